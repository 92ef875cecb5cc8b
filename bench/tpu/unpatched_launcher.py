"""The trainer's launcher with Tunix's own optimizer placement, which holds the optimizer's state twice for a moment
(workload/launch/optimizer_placement.py): only for the bench, to show beside the patched launcher what it does."""

from workload.launch import trainer_launcher

if __name__ == "__main__":
    trainer_launcher.main(place_optimizer_per_array=False)

"""The names that cross layers. The Pulumi program (infra/), the SSH layer (remote/), the rehearsal and the
workload on the VM import them from here, so no layer holds a copy that a test must keep equal.

Standard library only, and nothing imported: this module is shipped to the VM with the rest of workload/.
"""

from __future__ import annotations

# The post-deploy pipeline as `pulumi up` runs it: one pulumi-command task per phase, in this order.
PHASES = ("bootstrap", "convert", "train", "export", "eval")
# The workload's steps, in order (workload/run/pipeline.py).
RUN_STEPS = ("convert", "train", "export", "verify", "keep", "eval")
# The workload step each phase's part of the run ends with; bootstrap runs no
# workload step. eval benchmarks the kept model against its base (workload/eval/): its own phase, so that a changed
# eval setting re-runs it alone.
PHASE_UNTIL = {"convert": "convert", "train": "train", "export": "keep", "eval": "eval"}
# One detached job on the host runs every workload step, convert to keep (remote/pipeline/claim.py): the run. Its
# attempts are the jobs RUN_JOB_PREFIX-1, -2, … under JOBS_DIR, numbered on the host; the highest is the run (a
# tool that looks for "the run" takes it). The run task, after bootstrap, starts it with every setting; each phase
# task after it follows its own part of it.
RUN_JOB_PREFIX = "run"
RUN_TASK = "run"  # the run task's name: its pulumi-command resource's last part and its summary's "phase"

# Where the VM's startup script mounts the data disk (infra/resources/disk.py), and what is kept there.
MOUNT_POINT = "/mnt/tpu-sft-data"
KEPT_DIR = f"{MOUNT_POINT}/tpu-sft"
# On the data disk of a VM its group recreates (tpu-sft:recovery auto): what a new boot disk needs to resume the run
# with nobody at the laptop (docs/restarts.md): the run's job and settings records, the code, the read token and the
# install script. Only the SSH user reads it (0700).
RESUME_KIT_DIR = f"{MOUNT_POINT}/.tpu-sft-resume"
# The object prefix, in the stack's checkpoint bucket (infra/resources/bucket.py), of the workload's --runs-dir:
# training checkpoints and TensorBoard logs that outlive the VM. The bucket's lifecycle rule expires objects under it.
RUNS_PREFIX = "runs"
# The prefix, in the same bucket, of the kept model: a slice's only copy (remote/pipeline/profile.py slice_host: a
# slice has no data disk), the VM's copy of its data disk's (`kept_copy_dir`), fetched from there with no VM. Outside
# RUNS_PREFIX, so the lifecycle rule never expires it.
KEPT_PREFIX = "kept"
# The prefix, in the same bucket, where a slice's hosts tell each other how long they have been idle
# (workload/spend/autostop.py): one small object per host, overwritten every poll.
AUTOSTOP_PREFIX = "autostop"
# Fast scratch, as the seed; lost on reboot, hence the keep step.
SCRATCH_DIR = "/dev/shm/tpu-sft"

# Environment variables of each phase's command: where to connect, and the settings that phase depends on.
TARGET_ENV = "TPU_SFT_TARGET"  # remote.ssh.target.Target JSON
PIPELINE_ENV = "TPU_SFT_PIPELINE"  # stack-keyed pipeline settings JSON (workload/core/config.py)

# On the host, relative to the SSH user's home: everything tpu-sft keeps there (remote/ssh/target.py), and its
# detached jobs (remote/ssh/jobs.py), which the VM's autostop (workload/spend/autostop.py) watches.
STATE_DIR = ".tpu-sft"
JOBS_DIR = "jobs"

HF_TOKEN_SECRET = "hf_token"  # the secret's file name on the host, and the `put-secret` verb's argument
HF_WRITE_TOKEN_SECRET = "hf_write_token"  # for publishing to the Hub (workload/publish/__main__.py)
APIS_READY_ENV = (
    "TPU_SFT_APIS_READY"  # the APIs-ready task's project, network and APIs JSON (remote/pipeline/apis_ready.py)
)
PUBLISH_ENV = "TPU_SFT_PUBLISH"  # the publish task's destinations JSON (remote/pipeline/publish.py)

# The instance metadata attribute that holds the price per chip-hour: written by infra/resources/vm.py, read on the VM
# by workload/spend/bill.py. (Autostop's own attributes, and the variables that point it and remote/ at stand-ins of
# Google's APIs, are in workload/spend/autostop.py, which imports nothing of tpu-sft.)
PRICE_KEY = "tpu-sft-usd-per-chip-hour"

# Relative to the project directory, where `pulumi up` runs: the same state on every machine.
PROJECT_PYTHON = ".venv/bin/python"

# Exit status of bad input (a setting, flag, target or file) in every CLI: the code argparse itself uses.
EXIT_BAD_INPUT = 2
# Exit status of an unexpected error (a bug) in every CLI: one line names the log holding its traceback.
EXIT_UNEXPECTED = 76


def run_job_id(attempt: int) -> str:
    """The job of attempt `attempt` (1, 2, …) of the run on a host."""
    return f"{RUN_JOB_PREFIX}-{attempt}"


def run_attempt(job_id: str) -> int | None:
    """The attempt number of a run's job id; None for any other job (bootstrap's, publish's)."""
    prefix, _, number = job_id.rpartition("-")
    return int(number) if prefix == RUN_JOB_PREFIX and number.isascii() and number.isdigit() else None


def phase_command(phase: str) -> str:
    """The command a phase's pulumi-command task runs."""
    return f"{PROJECT_PYTHON} -m remote phase {phase}"


def run_command() -> str:
    """The command of the run task, which starts the run on the host with every setting (or finds it running)."""
    return f"{PROJECT_PYTHON} -m remote start-run"


def publish_command() -> str:
    """The command of the task that publishes the kept model after the export phase."""
    return f"{PROJECT_PYTHON} -m remote publish"


def apis_ready_command() -> str:
    """The command of the task that waits until the APIs the stack enabled answer (infra/resources/apis.py)."""
    return f"{PROJECT_PYTHON} -m remote.pipeline.apis_ready"


def put_secret_command(name: str) -> str:
    """The command that stores a secret piped into its stdin on the host."""
    return f"{PROJECT_PYTHON} -m remote put-secret {name}"

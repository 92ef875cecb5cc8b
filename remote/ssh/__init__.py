"""The SSH toolkit: reaching hosts safely (pinned keys, explicit timeouts, quoted environments) and running
commands, detached jobs, transfers and secrets there. It knows nothing of the pipeline (remote/pipeline/)."""

"""The user's commands against a deployed stack (`scripts/tpu-sft`, `python -m remote.stack`): read the stack's outputs,
reach its VM (or bucket) and say where the run stands, show its log, cancel it, fetch the kept model."""

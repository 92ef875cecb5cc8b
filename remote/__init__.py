"""The remote layer: how every post-deploy task reaches the VM over SSH (Fabric), with no Pulumi in it.

ssh/        the toolkit, which knows nothing of the pipeline: target, pinned connections, gateway, wait, detached
            jobs, sync, secrets, one command or step on every host, errors and their exit codes
pipeline/   the pipeline's phases over that toolkit: the host profile and the target that carries it, bootstrap,
            start_run (the run task: ship → take the whole run), phase (request → ship → claim the run → follow its
            part; on a slice, slice_phase), outcome, publish
cli/        `python -m remote VERB`, the entry point of both: the toolkit's verbs and the pipeline's
"""

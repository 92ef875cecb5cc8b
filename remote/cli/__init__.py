"""`python -m remote VERB …`: the remote layer from the shell (and from Pulumi's local.Command).

Thin over the library, in two sets of verbs: the SSH toolkit's (`toolkit_verbs.py`: wait, run, start, status,
follow, cancel, fetch) and the pipeline's over it (`pipeline_verbs.py`: bootstrap, phase, publish, put-secret);
`common.py` holds what both share (the parser, the target's flags, the exit codes the help lists). Each verb is an
`add_<verb>` that declares its flags and a `_<verb>` that runs it. To add a verb, write both and list `add_<verb>`
in VERBS.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from remote.cli import pipeline_verbs, toolkit_verbs
from remote.cli.common import EXIT_CODES, TARGET_HELP, Parser, common_flags
from remote.exit_status import exit_status

# In the order `python -m remote --help` lists them.
VERBS = (
    toolkit_verbs.add_wait,
    pipeline_verbs.add_bootstrap,
    toolkit_verbs.add_run,
    toolkit_verbs.add_start,
    toolkit_verbs.add_status,
    toolkit_verbs.add_follow,
    toolkit_verbs.add_cancel,
    toolkit_verbs.add_fetch,
    pipeline_verbs.add_phase,
    pipeline_verbs.add_start_run,
    pipeline_verbs.add_publish,
    pipeline_verbs.add_put_secret,
)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr, format="remote: %(message)s", level=logging.WARNING if args.quiet else logging.INFO
    )
    logging.getLogger("paramiko").setLevel(logging.CRITICAL)  # its tracebacks would repeat our one-line errors
    return exit_status(
        lambda: args.func(args), interrupted="remote jobs keep running; `follow` them again", secrets=_secrets(args)
    )


def _secrets(args) -> list[str | None]:
    """What must never reach a log: the HF tokens and every --secret-env value."""
    names = ["HF_TOKEN", "HF_WRITE_TOKEN", *getattr(args, "secret_env", [])]
    return [os.environ.get(name) for name in names]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m remote",
        description="Reach the training VM over SSH: wait for it, bootstrap it, run commands and detached jobs, "
        "follow their logs and fetch their results. Host keys are pinned; nothing is ever run twice "
        "by a retry.",
        epilog=f"{TARGET_HELP}\n\n{EXIT_CODES}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    common = common_flags()
    for add in VERBS:
        add(verbs, common)
    return parser

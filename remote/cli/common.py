"""What the remote CLI's two sets of verbs share: its parser, the target's flags over $TPU_SFT_TARGET, the exit codes
its help lists, and how a verb prints its JSON."""

from __future__ import annotations

import argparse
import json
import os

from remote.pipeline.target import PipelineTarget
from remote.ssh import flags
from remote.ssh.errors import (
    EXIT_AUTH,
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_HOST_KEY,
    EXIT_JOB_LOST,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_SOME_HOSTS_FAILED,
    EXIT_UNREACHABLE,
    EXIT_VERIFY,
)
from workload.core.contract import EXIT_UNEXPECTED, TARGET_ENV
from workload.core.one_line_parser import OneLineParser

EXIT_CODES = f"""exit codes (the same for every verb):
  {EXIT_OK}   done
  {EXIT_FAILED}   a remote command or bootstrap step failed (`run` returns the command's own code instead)
  {EXIT_BAD_INPUT}  bad input: target, flag, job id or spec (the message names it and the fix)
  {EXIT_HOST_KEY}  host key refused: unknown (trust-on-first-use off) or CHANGED since it was pinned
  {EXIT_NOT_FOUND}  no such job, or a remote file to fetch is missing
  {EXIT_AUTH}  the server refused the key
  {EXIT_UNREACHABLE}  unreachable: no answer within the connect/command timeouts, or refused
  {EXIT_JOB_LOST}  `follow`: the job ended without an exit code (killed, host rebooted, cancelled)
  {EXIT_VERIFY}  `fetch`: a file's size or sha256 did not match
  {EXIT_SOME_HOSTS_FAILED}  `run --all-hosts` / `bootstrap` / `put-secret`: some hosts failed (each is named on stderr)
  {EXIT_UNEXPECTED}  an unexpected error (a bug): stderr names the log file holding its traceback
  130 interrupted (Ctrl-C)
  `follow` and `publish` otherwise exit with the job's own exit code."""

TARGET_HELP = f"""The target comes from ${TARGET_ENV} (JSON with the fields host, user, key_path, known_hosts, port,
gateway, trust_on_first_use, workers, connect_timeout, command_timeout, keepalive_s, state_dir), and
any target flag overrides the field of the same name."""


class Parser(OneLineParser):
    bad_input_exit = EXIT_BAD_INPUT


def verb(verbs, name: str, common, summary: str, details: str) -> argparse.ArgumentParser:
    return verbs.add_parser(
        name,
        parents=[common],
        help=summary,
        description=f"{summary}\n\n{details}",
        epilog=f"{TARGET_HELP}\n\n{EXIT_CODES}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def common_flags() -> argparse.ArgumentParser:
    common = Parser(add_help=False)
    common.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors on stderr")
    t = common.add_argument_group("target (override $" + TARGET_ENV + ")")
    t.add_argument("--host", help="address, or instance name when --gateway is an IAP tunnel")
    t.add_argument("--port", type=flags.port)
    t.add_argument("--user")
    t.add_argument("--key", dest="key_path", metavar="PATH", help="private key file")
    t.add_argument("--known-hosts", metavar="PATH", help="file with the pinned host keys")
    t.add_argument(
        "--gateway", metavar="PROXYCOMMAND", help="e.g. gcloud compute start-iap-tunnel %%h %%p --listen-on-stdin …"
    )
    t.add_argument(
        "--trust-on-first-use",
        action="store_true",
        default=None,
        help="record an unknown host key instead of refusing it (only over an authenticated link)",
    )
    t.add_argument("--worker", dest="workers", action="append", metavar="HOST", help="another host (repeat)")
    t.add_argument("--connect-timeout", type=flags.positive_seconds, metavar="S")
    t.add_argument("--command-timeout", type=flags.positive_seconds, metavar="S")
    t.add_argument("--state-dir", metavar="PATH", help="on the host, for jobs and bootstrap state (default .tpu-sft)")
    return common


def target_from(args) -> PipelineTarget:
    raw = os.environ.get(TARGET_ENV)
    fields = PipelineTarget.from_json(raw).__dict__.copy() if raw else {}
    for name in (
        "host",
        "port",
        "user",
        "key_path",
        "known_hosts",
        "gateway",
        "trust_on_first_use",
        "workers",
        "connect_timeout",
        "command_timeout",
        "state_dir",
    ):
        value = getattr(args, name)
        if value is not None:
            fields[name] = value
    return PipelineTarget.from_mapping(fields)


def print_json(value) -> None:
    print(json.dumps(value, sort_keys=True), flush=True)

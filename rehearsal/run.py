"""Record what `pulumi up` would run, then run it the way pulumi-command does.

`record` evaluates the real program (__main__.py) under the Pulumi SDK's mock engine, runs its APIs-ready task
against the stand-in of a project whose APIs were just enabled (rehearsal/google_apis.py: every call refused for
PROPAGATION_S, `default` made by Compute Engine's first answered request), as `pulumi up` runs it after the enables
and before anything that calls them, and returns its post-deploy commands in dependency order. `execute` runs one
like pulumi-command's local provider: `/bin/sh -c CREATE` in the project directory, with this process's environment
plus the command's own, the `stdin` piped in, stdout and stderr captured (and echoed live, as `pulumi up` shows
them). One difference: a command that starts with the project's Python (the contract's PROJECT_PYTHON, the
checkout's `.venv` that Pulumi.yaml names) runs with the Python running the rehearsal, the same venv wherever it
lives: a contributor's may be outside the checkout (tests/rehearsal/test_outside_the_checkout.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from infra.config.stack_file import read_stack_config
from infra.resources.tasks import last_json_line
from rehearsal.engine import ROOT, Declared, Stack, run_program
from rehearsal.google_apis import GoogleApis
from rehearsal.pulumi_display import StatusLine, end, failure
from remote.pipeline import apis_ready
from workload.core.contract import APIS_READY_ENV, PHASES, PROJECT_PYTHON, apis_ready_command
from workload.run.phase_outcome import outcome_lines

COMMAND = "command:local:Command"
PROPAGATION_S = 2.0  # how long the rehearsal's project refuses an API after enabling it (Google publishes no figure)
POLL_S = "0.25"  # the task's poll, shortened to the stand-in's propagation


@dataclass
class Recorded:
    name: str
    create: str
    environment: dict[str, str]
    stdin: str | None = field(default=None, repr=False)

    @classmethod
    def of(cls, declared: Declared) -> "Recorded":
        stdin = declared.inputs.get("stdin")
        if isinstance(stdin, dict):  # a secret: the engine hands the provider its plain value
            stdin = stdin["value"]
        return cls(declared.name, declared.inputs["create"], dict(declared.inputs.get("environment", {})), stdin)


@dataclass
class Executed:
    name: str
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def record(
    config_file: Path,
    overrides: dict[str, str],
    *,
    secret_keys: tuple[str, ...] = (),
    remove: tuple[str, ...] = (),
    state: Stack | None = None,
    gone: tuple[str, ...] = (),
) -> tuple[Stack, list[Recorded]]:
    """The program evaluated on the stack file with `overrides`, its keys in `remove` left out, and the post-deploy
    commands it declared, in dependency order. `state`: what the stack's state holds as this `pulumi up` starts
    (`left_by`), None: an empty one; `gone`: the instances Compute Engine no longer has (a group's numbered host
    otherwise exists, as the mock engine answers)."""
    config = {k: v for k, v in {**read_stack_config(config_file), **overrides}.items() if k not in remove}
    stack = run_program(config, secret_keys=secret_keys, preview=False, state=state, instance_ids=dict.fromkeys(gone))
    commands = [Recorded.of(c) for c in _in_dependency_order(stack.of_type(COMMAND))]
    for wait in (c for c in commands if c.create == apis_ready_command()):
        wait_for_the_apis(wait)
    return stack, [c for c in commands if c.create != apis_ready_command()]


def left_by(stack: Stack, executed: list[Executed]) -> Stack:
    """The state a `pulumi up` leaves: what it declared, each command it ran with the stdout it printed."""
    printed = {done.name: done.stdout for done in executed}
    return Stack(
        [
            dataclasses.replace(r, outputs={**r.outputs, "stdout": printed[r.name]}) if r.name in printed else r
            for r in stack.resources
        ],
        dict(stack.outputs),
    )


def wait_for_the_apis(command: Recorded, delay_s: float = PROPAGATION_S) -> Executed:
    """The APIs-ready task against a project whose APIs it lists were enabled just now; raises its one line if it
    fails, as `pulumi up` would stop there."""
    asked = json.loads(command.environment[APIS_READY_ENV])
    with GoogleApis(asked["project"], delay_s) as google:
        google.enable(*asked["apis"])
        done = execute(command, {apis_ready.BASE_ENV: google.url, apis_ready.POLL_ENV: POLL_S})
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip() or f"{command.name} failed (exit {done.returncode})")
    return done


def _in_dependency_order(commands: list[Declared]) -> list[Declared]:
    by_urn = {c.urn: c for c in commands}
    done: list[Declared] = []
    while len(done) < len(commands):
        ready = [
            c for c in commands if c not in done and all(d not in by_urn or by_urn[d] in done for d in c.dependencies)
        ]
        if not ready:
            raise RuntimeError("the post-deploy commands depend on each other in a cycle")
        done.extend(ready)
    return done


def start(command: Recorded, extra_env: dict[str, str], *, new_session: bool = False) -> subprocess.Popen:
    """Launch `command` as pulumi-command does; its stdin is already written and closed. `new_session`: in a
    session and process group of its own, which a caller can kill whole."""
    proc = subprocess.Popen(
        ["/bin/sh", "-c", with_this_python(command.create)],
        cwd=ROOT,
        env={**os.environ, **command.environment, **extra_env},
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=new_session,
    )
    assert proc.stdin is not None  # stdin=PIPE
    proc.stdin.write(command.stdin or "")
    proc.stdin.close()
    return proc


def with_this_python(create: str) -> str:
    """`create` with the project's Python, where it starts with it, as the Python running this process."""
    head, space, rest = create.partition(" ")
    return f"{shlex.quote(sys.executable)} {rest}" if head == PROJECT_PYTHON and space else create


def execute(
    command: Recorded, extra_env: dict[str, str], *, echo: bool = True, status: StatusLine | None = None
) -> Executed:
    """Run `command` to the end, echoing its output live (or, given `status`, into it: pulumi-command's view)."""
    started = time.monotonic()
    proc = start(command, extra_env)
    streams: dict[str, list[str]] = {"stdout": [], "stderr": []}

    def pump(name: str, source, sink) -> None:
        for line in source:
            streams[name].append(line)
            if status is not None:
                status.line(line)
            elif echo:
                sink.write(line)
                sink.flush()

    pumps = [
        threading.Thread(target=pump, args=("stdout", proc.stdout, sys.stdout)),
        threading.Thread(target=pump, args=("stderr", proc.stderr, sys.stderr)),
    ]
    for t in pumps:
        t.start()
    for t in pumps:
        t.join()
    return Executed(
        command.name, proc.wait(), "".join(streams["stdout"]), "".join(streams["stderr"]), time.monotonic() - started
    )


def up(commands: list[Recorded], environment: Callable[[Recorded], dict[str, str]], label: str) -> dict | None:
    """Every command in order, as `pulumi up` runs them, each with its header and live output: the last one's JSON
    summary, or None once one failed (after saying so on stderr)."""
    summary: dict = {}
    for command in commands:
        print(f"\n=== {command.name}: {command.create}", flush=True)
        done = execute(command, environment(command))
        if done.returncode != 0:
            print(
                f"\n{label}: {command.name} failed (exit {done.returncode}); its output is above. "
                f"Fix what it names and run the {label} again: finished work is not redone.",
                file=sys.stderr,
            )
            return None
        summary = last_json_line(done.stdout)
    return summary


def up_as_pulumi_shows(commands: list[Recorded], environment: Callable[[Recorded], dict[str, str]]) -> dict | None:
    """Every command in order, each shown as pulumi-command shows it: its last status line when it ends. Then what
    `pulumi up` leaves on screen: a failed command's error and the stack output `phases` (rehearsal/pulumi_display.py).
    Returns the last command's JSON summary, or None once one failed."""
    summaries: dict[str, dict] = {}
    errors: dict[str, str] = {}
    last: dict = {}
    for command in commands:
        status = StatusLine()
        done = execute(command, environment(command), status=status)
        print(f"  {command.name}: {status.text}", flush=True)
        task = command.name.rsplit("-", 1)[1]
        if done.returncode != 0:
            errors[command.name] = failure(command.create, done.returncode, done.stdout, done.stderr)
            break
        last = last_json_line(done.stdout)
        if task in PHASES:
            summaries[task] = last
    phases = outcome_lines(summaries)
    print(f"\n`pulumi up` would end with:\n{end({'phases': phases} if phases else {}, errors)}", flush=True)
    return None if errors else last

"""A `pulumi up` task's output: its progress in a whole log on this machine, and on stdout only what must be seen.

pulumi-command 1.2.1 shows each line of a command's output as a status message (provider/pkg/provider/util/util.go
`LogOutput`: `l.InfoStatus(msg)` per line), which Pulumi's progress display shows in its Info column and drops from
the final output; and a failed command's error repeats all of its stdout and stderr (local/commandOutputs.go `run`:
`fmt.Errorf("%w: running %q:\\n%s", err, command, stdouterrbuf.String())`). So where the target names a directory
for them (`task_logs`, set by the program: infra/resources/tasks.py), a phase writes its progress lines, its stderr
and its log messages into `<task_logs>/<phase>.log`, and prints on stdout three lines: where to watch (the Info
column's text while it runs), its outcome (workload/run/phase_outcome.py; a failure's reason and the log's path), and
the JSON summary the stack outputs read. A failed task's error in `pulumi up` is then those lines and no more. Without
`task_logs` (a phase run by hand, the tests') every line goes to stdout as before.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import time
from pathlib import Path
from typing import Iterator, TextIO, cast

from workload.run.phase_outcome import outcome_line

LIVE_VIEW = "scripts/tpu-sft logs"


def path(task_logs: str, task: str) -> Path:
    return Path(task_logs) / f"{task}.log"


class _LastLine(io.TextIOBase):
    """Writes through to `sink` and keeps the last complete line: the phase's JSON summary."""

    def __init__(self, sink: TextIO):
        self.sink, self.last, self._partial = sink, "", ""

    def write(self, text: str) -> int:
        self.sink.write(text)
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        if lines and lines[-1].strip():
            self.last = lines[-1]
        return len(text)

    def flush(self) -> None:
        self.sink.flush()


@contextlib.contextmanager
def progress_of(task: str, task_logs: str | None, stdout: TextIO) -> Iterator[TextIO]:
    """Where the task's progress goes for the `with` body: `stdout` itself without `task_logs`; else the whole log,
    which also takes this process's stderr and log messages until the body ends, and after it the outcome line and
    the summary go to `stdout`. A body that raises prints its failed summary to the stream it is given, as a phase
    does on every path (remote/cli/pipeline_verbs.py)."""
    if task_logs is None:
        yield stdout
        return
    log_path = path(task_logs, task)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    print(f"{task}: live view `{LIVE_VIEW}`; whole log: {log_path}", file=stdout, flush=True)
    with open(log_path, "a", encoding="utf-8") as log:
        print(f"=== {task}, {time.strftime('%Y-%m-%d %H:%M:%S %z')}", file=log, flush=True)
        kept = _LastLine(log)
        handlers = [h for h in logging.getLogger().handlers if isinstance(h, logging.StreamHandler)]
        streams = [h.setStream(log) for h in handlers]
        try:
            with contextlib.redirect_stderr(log):
                yield cast(TextIO, kept)
        finally:
            for handler, stream in zip(handlers, streams, strict=True):
                handler.setStream(stream)
            _end(task, kept.last, log_path, stdout)


def _end(task: str, last: str, log_path: Path, stdout: TextIO) -> None:
    try:
        summary = json.loads(last)
    except json.JSONDecodeError:
        summary = {}
    if not isinstance(summary, dict) or summary.get("event") != "summary":
        summary = {}
    line = (outcome_line(task, summary) if summary else None) or f"✗ {task} ended without a summary"
    if not summary.get("ok"):
        line += f"; whole log: {log_path}"
    print(line, file=stdout, flush=True)
    if summary:
        print(last, file=stdout, flush=True)

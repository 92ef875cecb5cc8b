"""The run's log outlives the VM: every event line the runner prints (its job's log on the host,
workload/run/events.py) is copied, token redacted, beside the run's checkpoints, and so is each step's end and the
summary, each as a small file of its own:

    <run dir>/run-log/<started>.jsonl       the events of one runner invocation (<started>: UTC, YYYYmmddTHHMMSSZ)
    <run dir>/run-log/steps/<step>.json     the step's last end event: done, failed or skipped, with its facts
    <run dir>/run-log/summary.json          the last summary

`<run dir>` is the layout's (workload/run/layout.py): `<runs>/<model>/post-train/<run>`, a gs:// prefix on a VM
or a slice. `python -m remote.stack logs` reads them there when the VM is gone (remote/stack/run_log.py).

Copied as the run goes: at once for every event but a training step's, and a step's at most every `INTERVAL_S`, so
a VM lost mid-training loses at most the step lines of that interval (the whole log is rewritten each time: a run
prints a few hundred lines, workload/run/events.py). Only where the run has a runs dir (without one its
checkpoints are lost with the VM too), and on a slice only worker 0's, whose log `pulumi up` shows. A copy that
fails never fails the run: it is said once on stderr (the job's log) and tried again with the next event.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from typing import Callable, Iterator

from workload.run import storage

LOG_DIR = "run-log"
LOG_SUFFIX = ".jsonl"
STEPS_DIR = "steps"
SUMMARY = "summary.json"
INTERVAL_S = 15.0
_STEP_ENDS = ("done", "failed", "skipped")


class Mirror:
    """Receives each event line (an `Events` listener) and keeps its copy in `log_dir` current."""

    def __init__(
        self,
        log_dir: str,
        scrub: Callable[[str], str],
        *,
        started: str | None = None,
        interval_s: float = INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.log_dir, self.scrub, self.interval_s, self.clock = log_dir, scrub, interval_s, clock
        self.log_url = storage.join(log_dir, (started or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())) + LOG_SUFFIX)
        self.lines: list[str] = []
        self.copied_at: float | None = None
        self.behind = False  # lines not yet copied
        self.warned = False

    def line(self, text: str) -> None:
        text = self.scrub(text)
        self.lines.append(text)
        event = json.loads(text)  # the runner's own events: one JSON object each
        kind = event.get("event")
        if kind == "phase" and event.get("status") in _STEP_ENDS:
            self._write(storage.join(self.log_dir, STEPS_DIR, f"{event.get('phase')}.json"), text)
        elif kind == "summary":
            self._write(storage.join(self.log_dir, SUMMARY), text)
        self.behind = True
        if kind != "step" or self.copied_at is None or self.clock() - self.copied_at >= self.interval_s:
            self.copy()

    def copy(self) -> None:
        if self._write(self.log_url, "".join(f"{line}\n" for line in self.lines)):
            self.copied_at, self.behind = self.clock(), False

    def _write(self, url: str, text: str) -> bool:
        try:
            storage.write_text(url, text)
        except Exception as error:  # noqa: BLE001  any client's failure: the run goes on without its copy
            if not self.warned:
                self.warned = True
                cause = self.scrub(f"{type(error).__name__}: {error}".splitlines()[0])
                said = f"log mirror: cannot copy the run's log to {url} ({cause}); retrying with each event"
                print(said, file=sys.stderr)
            return False
        return True


@contextlib.contextmanager
def mirrored(events, run_dir: str | None, scrub: Callable[[str], str], leader: bool) -> Iterator[None]:
    """While the block runs, `events` (an `Events`) are copied beside the run's checkpoints in `run_dir`."""
    if run_dir is None or not leader:
        yield
        return
    mirror = Mirror(storage.join(run_dir, LOG_DIR), scrub)
    events.listeners.append(mirror.line)
    try:
        yield
    finally:
        events.listeners.remove(mirror.line)
        if mirror.behind:
            mirror.copy()

"""The runner's copy of its log beside the checkpoints (workload/run/log_mirror.py), on a local runs dir: every line,
token redacted, each step's end and the summary in their own files; training steps copied at most every interval;
a copy that fails never fails the run; and nothing copied where nothing outlives the VM."""

import io
import json

from workload.launch.hf_token import REDACTED, redactor
from workload.run import log_mirror
from workload.run.events import Events

TOKEN = "hf_" + "Abc123" * 6


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def copied(log_dir) -> list[dict]:
    (log,) = log_dir.glob("*.jsonl")
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_every_line_is_copied_redacted_with_each_steps_end_and_the_summary(tmp_path):
    events = Events(io.StringIO())
    with log_mirror.mirrored(events, str(tmp_path / "run"), redactor(TOKEN), leader=True):
        events.emit("phase", phase="convert", status="start", reason=f"token {TOKEN}")
        events.emit("phase", phase="convert", status="done", seconds=1.0)
        events.emit("summary", ok=True, until="convert")
    log_dir = tmp_path / "run" / log_mirror.LOG_DIR
    assert [e["event"] for e in copied(log_dir)] == ["phase", "phase", "summary"]
    assert TOKEN not in (next(log_dir.glob("*.jsonl"))).read_text()
    assert copied(log_dir)[0]["reason"] == f"token {REDACTED}"
    assert json.loads((log_dir / "steps" / "convert.json").read_text())["status"] == "done"
    assert json.loads((log_dir / "summary.json").read_text())["until"] == "convert"


def test_training_steps_are_copied_at_most_every_interval_and_at_the_end(tmp_path):
    clock = Clock()
    mirror = log_mirror.Mirror(str(tmp_path), lambda text: text, started="t0", interval_s=15, clock=clock)
    step = json.dumps({"event": "step", "step": 1})
    mirror.line(json.dumps({"event": "phase", "phase": "train", "status": "start"}))
    mirror.line(step)
    assert len((tmp_path / "t0.jsonl").read_text().splitlines()) == 1  # the step waits
    clock.now = 15
    mirror.line(step)
    assert len((tmp_path / "t0.jsonl").read_text().splitlines()) == 3
    mirror.line(step)
    assert mirror.behind
    mirror.copy()  # what leaving `mirrored` does
    assert len((tmp_path / "t0.jsonl").read_text().splitlines()) == 4


def test_a_copy_that_fails_leaves_the_run_alone_and_is_said_once(tmp_path, capsys):
    blocked = tmp_path / "a file"
    blocked.write_text("")
    out = io.StringIO()
    events = Events(out)
    with log_mirror.mirrored(events, str(blocked / "run"), redactor(TOKEN), leader=True):
        events.emit("phase", phase="convert", status="start")
        events.emit("phase", phase="convert", status="done")
    assert len(out.getvalue().splitlines()) == 2  # the job's own log has every line
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and said[0].startswith("log mirror: cannot copy the run's log to")


def test_nothing_is_copied_without_a_runs_dir_or_on_another_worker(tmp_path):
    events = Events(io.StringIO())
    for run_dir, leader in ((None, True), (str(tmp_path / "run"), False)):
        with log_mirror.mirrored(events, run_dir, redactor(None), leader=leader):
            events.emit("summary", ok=True)
    assert not (tmp_path / "run").exists() and events.listeners == []

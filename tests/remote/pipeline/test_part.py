"""Each phase task shows its own part of the one run on the host: the steps after the previous phase's last, its
progress lines, and its summary; it stops following once its part has ended, and follows a failure to its end."""

from __future__ import annotations

import io
import json

import pytest

from remote.pipeline.part import PartDone, PartPrinter, part_steps


def _event(event: str, **fields) -> str:
    return json.dumps({"event": event, "t": 0, **fields})


RUN = [
    _event("phase", phase="assets", status="start"),
    _event("phase", phase="convert", status="start"),
    _event("phase", phase="convert", status="done", seconds=3),
    _event("summary", ok=True, until="convert", checkpoint="c"),
    _event("phase", phase="train", status="start"),
    _event("step", phase="train", step=2, steps=2, loss=1.5),
    _event("phase", phase="train", status="done", seconds=9),
    _event("summary", ok=True, until="train", final_step=2),
    _event("phase", phase="export", status="start"),
    _event("phase", phase="verify", status="start"),
    _event("phase", phase="keep", status="start"),
    _event("summary", ok=True, until="keep", final_step=2, kept_dir="k"),
]


def _follow(phase: str, lines: list[str], quiet: bool = False) -> tuple[PartPrinter, list[str], int]:
    out = io.StringIO()
    printer = PartPrinter(phase, out, quiet=quiet)
    read: list[str] = []
    with pytest.raises(PartDone):
        for line in lines:
            read.append(line)
            printer.line(line)
    return printer, out.getvalue().splitlines(), len(read)


def test_the_parts_split_the_runs_steps_at_each_phases_last():
    assert part_steps("convert") == ("assets", "setup", "convert")
    assert part_steps("train") == ("train",)
    assert part_steps("export") == ("export", "verify", "keep")


@pytest.mark.parametrize(
    ("phase", "shown", "read"),
    [
        ("convert", ["▶ assets", "▶ convert", "✓ convert done in 3 s"], 4),
        ("train", ["▶ train", "train step 2/2 · loss 1.5000", "✓ train done in 9 s"], 8),
        ("export", ["▶ export", "▶ verify", "▶ keep"], 12),
    ],
)
def test_a_phase_shows_its_part_and_stops_at_its_summary(phase, shown, read):
    printer, lines, stopped_at = _follow(phase, RUN)
    assert lines == shown and stopped_at == read
    assert printer.summary == json.loads(RUN[read - 1])


def test_a_part_that_had_ended_before_the_task_came_is_shown_quietly():
    printer, lines, _ = _follow("train", RUN, quiet=True)
    assert lines == [] and printer.summary is not None and printer.summary["final_step"] == 2


def test_a_failure_is_kept_and_followed_to_the_runs_end():
    failed = [*RUN[:5], _event("summary", ok=False, until="keep", failed_step="train", error="OOM")]
    out = io.StringIO()
    printer = PartPrinter("train", out)
    for line in failed:  # no PartDone: the caller follows the job to its exit code
        printer.line(line)
    assert printer.summary is not None and printer.summary["failed_step"] == "train"
    assert out.getvalue().splitlines() == ["▶ train"]


def test_lines_that_are_not_events_are_left_in_the_log():
    out = io.StringIO()
    printer = PartPrinter("convert", out)
    for line in ("Traceback (most recent call last):", "[1, 2]", '{"no": "event"}'):
        printer.line(line)
    assert out.getvalue() == "" and printer.summary is None

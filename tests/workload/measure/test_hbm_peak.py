"""The HBM a chip held, as the trainer's launcher reports it and the train summary keeps it (measure/hbm_peak.py).

No TPU is here: the devices below stand in for a TPU's, with the two keys of `memory_stats()` that a TPU's runtime
reports and this code reads (a CPU device reports None: the tiny run checks that path for real, through the
launcher and the runner). What they do not stand for: the figures themselves, which only a chip can give."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workload.measure import hbm_peak
from workload.measure.throughput import AttemptTimeline

GIB = 2**30


@dataclass
class Device:
    platform: str
    stats: dict[str, Any] | None

    def memory_stats(self) -> dict[str, Any] | None:
        return self.stats


def tpu(peak: int) -> Device:
    return Device("tpu", {"peak_bytes_in_use": peak, "bytes_limit": 33_822_867_456, "bytes_in_use": peak // 2})


def test_the_line_names_the_largest_peak_of_the_hosts_chips_and_reads_back():
    line = hbm_peak.line([tpu(16 * GIB), tpu(17 * GIB), tpu(15 * GIB), tpu(16 * GIB)])
    assert line == f"tpu-sft hbm: peak_bytes_in_use={17 * GIB} bytes_limit=33822867456 devices=4"
    assert hbm_peak.parse(line) == {"hbm_peak_bytes_per_chip": 17 * GIB, "hbm_bytes_limit_per_chip": 33_822_867_456}


def test_devices_without_memory_statistics_say_so_instead_of_a_figure():
    line = hbm_peak.line([Device("cpu", None)])
    assert line == "tpu-sft hbm: none: cpu devices report no memory statistics"
    assert hbm_peak.parse(line) == {"hbm_reason": "cpu devices report no memory statistics"}
    assert hbm_peak.parse("Train loop finished in: 1.0 seconds") is None


def test_the_summary_keeps_the_largest_peak_of_any_attempt_or_says_why_there_is_none():
    first = {"attempt": 1.0, "hbm_peak_bytes_per_chip": 18 * GIB, "hbm_bytes_limit_per_chip": 31 * GIB}
    resumed = {"attempt": 2.0, "hbm_peak_bytes_per_chip": 16 * GIB, "hbm_bytes_limit_per_chip": 31 * GIB}
    killed = {"attempt": 3.0}  # killed with the runner: its launcher printed nothing
    assert hbm_peak.summary([first, resumed, killed]) == {
        "hbm_peak_bytes_per_chip": 18 * GIB,
        "hbm_bytes_limit_per_chip": 31 * GIB,
    }
    cpu = {"attempt": 1.0, "hbm_reason": "cpu devices report no memory statistics"}
    assert hbm_peak.summary([cpu]) == {"hbm_peak_bytes_per_chip": None, "hbm_reason": cpu["hbm_reason"]}
    assert hbm_peak.summary([killed])["hbm_reason"] == "the trainer reported no memory statistics"


def test_the_attempts_timeline_keeps_the_launchers_line():
    timeline = AttemptTimeline(started=0.0)
    timeline.observe(hbm_peak.line([tpu(17 * GIB)]), now=9.0)
    assert timeline.facts["hbm_peak_bytes_per_chip"] == 17 * GIB


def test_the_tiny_run_says_its_cpu_reports_no_hbm(tiny_pipeline):
    """The real path: train_sft through the launcher on this CPU, its line read by the runner into the summary."""
    summary = tiny_pipeline.finished.summary
    assert summary["hbm_peak_bytes_per_chip"] is None
    assert summary["hbm_reason"] == "cpu devices report no memory statistics"

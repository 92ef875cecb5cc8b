"""A span of time as the runner's lines write it: "4 min 2 s", or "1 h 7 min" from an hour on. One form for the
ETA of a run (workload/run/progress.py, run_state.py) and the VM's uptime on its bill (workload/spend/bill.py)."""

from __future__ import annotations


def duration(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600} h {whole % 3600 // 60} min" if whole >= 3600 else f"{whole // 60} min {whole % 60} s"

"""The bill, measured on the VM: its chips × the time since it booted × the price the program put in its
metadata; in the train progress line while it runs, and one line at the end of a phase.

The metadata server does not exist off Google Cloud: the local stand-in (tests/workload/gce_standin.py) answers
for it; the uptime is a file laid out like /proc/uptime, so the numbers are known.
"""

from __future__ import annotations

import io
import json

import pytest

from remote.pipeline.claim import Claimed
from remote.pipeline.phase import _follow
from remote.pipeline.request import PhaseRequest
from remote.ssh import jobs
from remote.ssh.connection import connect
from tests.workload.gce_standin import GceStandin
from workload.core.config import PipelineConfig
from workload.core.contract import PRICE_KEY, run_job_id
from workload.run.progress import render
from workload.spend.autostop import Cloud
from workload.spend.bill import Meter, describe, total


@pytest.fixture
def uptime(tmp_path):
    path = tmp_path / "uptime"
    path.write_text("4932.47 39000.12\n")  # 1 h 22 min 12 s since boot
    return str(path)


@pytest.fixture
def metadata():
    standin = GceStandin(attributes={PRICE_KEY: "2.7"}).start()
    yield Cloud(standin.host, timeout_s=2.0)
    standin.stop()


def test_the_meter_reads_the_price_from_metadata_and_the_time_since_boot(metadata, uptime):
    bill = Meter(8, metadata, uptime).reading()
    assert bill == {"vm_up_s": 4932, "chips": 8, "chip_hours": 10.961, "usd_per_chip_hour": 2.7, "cost_usd": 29.59}
    assert describe(bill) == (
        "bill: this VM has been up 1 h 22 min since it booted × 8 chips = 10.961 chip-hours "
        "≈ $29.59 at $2.70 per chip-hour"
    )


def test_off_google_cloud_there_is_no_price_and_no_made_up_cost(uptime):
    nowhere = Cloud("127.0.0.1:9", timeout_s=1.0)  # nothing listens on the discard port
    bill = Meter(8, nowhere, uptime).reading()
    assert (bill["chip_hours"], bill["usd_per_chip_hour"], bill["cost_usd"]) == (10.961, None, None)
    assert describe(bill) == "bill: this VM has been up 1 h 22 min since it booted × 8 chips = 10.961 chip-hours"


def test_a_slice_hosts_meter_counts_its_own_chips_and_the_progress_line_the_slices(metadata, uptime):
    meter = Meter(4, metadata, uptime, hosts=4)  # one host of a v6e-16
    assert meter.reading()["chips"] == 4 and meter.reading()["cost_usd"] == round(4 * 4932.47 / 3600 * 2.7, 2)
    assert meter.cost_so_far() == round(meter.reading()["cost_usd"] * 4, 2)


def test_a_slices_bill_adds_every_hosts_reading_up():
    """A host the group recreated has been up less than the others: its own time counts, not worker 0's."""
    hosts = [
        {"vm_up_s": 7200, "chips": 4, "chip_hours": 8.0, "usd_per_chip_hour": 2.7, "cost_usd": 21.6},
        {"vm_up_s": 7190, "chips": 4, "chip_hours": 7.989, "usd_per_chip_hour": 2.7, "cost_usd": 21.57},
        {"vm_up_s": 1800, "chips": 4, "chip_hours": 2.0, "usd_per_chip_hour": 2.7, "cost_usd": 5.4},
    ]
    bill = total(hosts)
    assert bill == {
        "hosts": 3,
        "vm_up_s": 7200,
        "chips": 12,
        "chip_hours": 17.989,
        "usd_per_chip_hour": 2.7,
        "cost_usd": 48.57,
    }
    assert describe(bill) == (
        "bill: 3 hosts, the longest up 2 h 0 min since it booted, 12 chips in all = 17.989 chip-hours "
        "≈ $48.57 at $2.70 per chip-hour"
    )
    off_cloud = total([{**h, "usd_per_chip_hour": None, "cost_usd": None} for h in hosts])
    assert off_cloud["cost_usd"] is None and "$" not in describe(off_cloud)
    unread = describe({**bill, "unread": ["worker 2 (10.0.0.4)"]})
    assert "not counted: worker 2 (10.0.0.4), whose reading could not be read" in unread


def test_cost_so_far_in_the_train_progress_line():
    event = {
        "event": "step",
        "phase": "train",
        "step": 120,
        "steps": 1000,
        "loss": 1.2345,
        "step_seconds": 0.61,
        "eta_s": 542.0,
        "cost_usd": 12.34,
    }
    assert render(event) == "train step 120/1000 · loss 1.2345 · 0.61 s/step · ETA 9 min 2 s · $12.34 so far"
    assert "so far" not in render({**event, "cost_usd": None})


def test_the_phase_ends_with_the_bill_line_before_its_summary(target):
    bill = {"vm_up_s": 4932, "chips": 8, "chip_hours": 10.961, "usd_per_chip_hour": 2.7, "cost_usd": 29.59}
    summary = json.dumps({"event": "summary", "ok": True, "until": "keep", "bill": bill})  # export's part's
    with connect(target) as conn:
        state = jobs.start(conn, run_job_id(1), f"echo '{summary}'")
        out = io.StringIO()
        request = PhaseRequest(phase="export", target=target, pipeline=PipelineConfig())
        claimed = Claimed(run_job_id(1), state, started=True, unfollowed=True)
        assert _follow(request, claimed, out, conn) == 0
    lines = out.getvalue().splitlines()
    assert lines[-2] == describe(bill)
    assert json.loads(lines[-1])["bill"] == bill

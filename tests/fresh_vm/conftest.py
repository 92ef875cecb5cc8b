"""The one fresh-VM rehearsal the tests share: a new simulated Spot VM in its group, the whole tiny `pulumi up`, a
preemption and a Google restart the VM resumes from alone, a second `up`, a preemption after the run, an `up` on
that VM (minutes: it installs MaxText on the VM), and, the VM deleted, an `up` that adds a Hub repo to publish to
(the Hub stand-in's)."""

from __future__ import annotations

import io
import os
from dataclasses import dataclass

import pytest

from rehearsal.fresh_vm.evidence import report
from rehearsal.fresh_vm.rehearse import FreshVmRun, HubDestination, RehearsalFailed, rehearse
from tests.hub_upload_standin import HubStandin

USER = "tpu-sft"  # the rehearsal stack's ssh user (the settings' default)
HEAD_START = 5  # nice levels: about 3 times the CPU share of a process at the default priority


HUB_REPO = "team/gemma-sft"  # what the user adds once autostop deleted the VM of the finished run
WRITE_TOKEN = "hf_" + "FreshVmWrite" * 3


@dataclass
class FreshVmRehearsal:
    run: FreshVmRun
    output: str
    directory: object
    hub: HubStandin  # stopped: what it was sent stays readable (`repos`, `requests`)


@pytest.fixture(scope="session")
def fresh_vm(tmp_path_factory) -> FreshVmRehearsal:
    directory = tmp_path_factory.mktemp("fresh-vm")
    out = io.StringIO()
    # The longest run of the suite, mostly one process at a time (apt, uv, one phase), while scripts/test runs the
    # others beside it, whose MaxText processes use every core: ahead of them, it does not end last by far.
    os.nice(-HEAD_START)  # root only, as is everything here; its VM's processes inherit it
    try:
        # With the held-out passes: the tiny profile reads their data in the trainer's own process
        # (workload/launch/data_in_process.py), so they no longer start a data worker of a GiB or more each.
        with HubStandin(token=WRITE_TOKEN) as hub:
            run = rehearse(directory, out=out, publish=HubDestination(hub.endpoint, HUB_REPO, WRITE_TOKEN))
    except RehearsalFailed as e:
        pytest.fail(f"{e}\n{out.getvalue()[-6000:]}")
    finally:
        os.nice(HEAD_START)
        # What scripts/rehearse prints, its progress and each command's output, kept beside the VMs' console logs,
        # also when it failed.
        (directory / "rehearsal.log").write_text(out.getvalue())
    (directory / "report.txt").write_text("".join(f"{line}\n" for line in report(run, USER)))
    output = out.getvalue()
    ups = {
        "first up": run.first_up,
        "second up": run.second_up,
        "after the finished run": run.after_finished_up,
        "publish with no VM": run.publish_up,
    }
    (directory / "seconds.tsv").write_text(
        "".join(f"{up}\t{done.name}\t{done.seconds:.1f}\n" for up, done_list in ups.items() for done in done_list)
    )
    return FreshVmRehearsal(run, output, directory, hub)

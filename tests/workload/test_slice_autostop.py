"""Autostop on a slice: no host decides alone. Each host's watcher reports to the checkpoint bucket; once every host
has been idle for idle minutes (a host silent for a few polls counts as quiet since it was last heard from), one of
them asks the Compute Engine API to resize the slice's group to 0, with the grant the program declared on that
one group.

The watchers run here as the startup script runs them, as processes of their own, each with its own jobs
directory; Cloud Storage is gcp-storage-emulator behind the IAM stand-in (rehearsal/storage_iam.py: the hosts act as
their service account, with the roles the program declared); the metadata server and the Compute Engine API are the
local stand-in (tests/workload/gce_standin.py), one per host, granting only what the program slice_autostop. SSH
sessions are left out here (each watcher is pointed at a port nobody uses): tests/workload/test_autostop.py covers
them, and tests/slice/test_slice_autostop.py runs the watchers on simulated hosts with real jobs."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from rehearsal import storage_iam
from tests.ssh_testbed import wait_until
from tests.workload.gce_standin import TOKEN, GceStandin, NotModelled
from workload import autostop

WATCHER = Path(autostop.__file__)
IDLE_S = 1.8
HOSTS = ("tpu-sft-dev-01", "tpu-sft-dev-02")
RESIZE = "/compute/v1/projects/my-tpu-project/zones/us-east5-b/instanceGroupManagers/{}/resize?size=0"
UNUSED_PORT = 1  # tcpmux: no SSH session ever lands there


def _resize(standin: GceStandin, group: str, token: str = TOKEN) -> tuple[int, str]:
    request = urllib.request.Request(
        f"http://{standin.host}{RESIZE.format(group)}",
        method="POST",
        data=b"",
        headers={"Authorization": f"Bearer {token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())["error"]["message"]


def test_the_grant_lets_the_hosts_resize_their_own_group_and_no_other(slice_autostop):
    standin = GceStandin(access=None, group_access=slice_autostop.access).start()
    try:
        assert _resize(standin, "tpu-sft-dev")[0] == 200
        assert standin.resizes == [("tpu-sft-dev", 0)]
        assert _resize(standin, "someone-elses-group") == (
            403,
            "Required 'compute.instanceGroupManagers.update' permission for "
            "'projects/my-tpu-project/zones/us-east5-b/instanceGroupManagers/someone-elses-group'",
        )
        assert _resize(standin, "tpu-sft-dev", token="ya29.someone-else")[0] == 401
        standin.group_access = slice_autostop.access_off  # autostop off declares no grant: nothing may resize
        assert _resize(standin, "tpu-sft-dev")[0] == 403
        standin.group_access = dataclasses.replace(
            slice_autostop.access, service_account="someone@my-tpu-project.iam.gserviceaccount.com"
        )
        assert _resize(standin, "tpu-sft-dev")[0] == 403  # the grant names the hosts' own account
    finally:
        standin.stop()
    (binding,) = slice_autostop.access.bindings
    wider = dataclasses.replace(slice_autostop.access, bindings=frozenset({(*binding[:3], "true")}))
    with pytest.raises(NotModelled):  # a condition the stand-in cannot evaluate is never guessed at
        wider.granted("compute.instanceGroupManagers.update", "my-tpu-project", "us-east5-b", "tpu-sft-dev")


NOW, IDLE, STALE = 10_000.0, 60.0, 2.0


@pytest.mark.parametrize(
    ("report", "quiet_since"),
    [
        (None, 9_000.0),  # never reported: quiet for as long as this watcher has waited
        ({"busy": None, "idle_since": 9_500.0, "written": NOW}, 9_500.0),
        ({"busy": "job x is running", "idle_since": None, "written": NOW - 1}, None),  # busy, and heard from
        ({"busy": "job x is running", "idle_since": None, "written": NOW - 3}, NOW - 3),  # silent since
        ({"busy": None, "idle_since": 9_500.0, "written": NOW - 500}, 9_500.0),  # silent while idle
    ],
)
def test_how_long_a_host_has_been_quiet(report, quiet_since):
    assert autostop.quiet_since(report, NOW, STALE, 9_000.0) == quiet_since


def test_every_host_must_have_been_quiet_for_idle_minutes_and_the_others_are_named():
    idle = {"busy": None, "idle_since": NOW - IDLE, "written": NOW}
    assert autostop.holding_up({"a": idle, "b": idle}, NOW, IDLE, STALE, NOW - IDLE) == []
    busy = {"busy": "job export-1 is running", "idle_since": None, "written": NOW}
    recent = {"busy": None, "idle_since": NOW - 30, "written": NOW}
    assert autostop.holding_up({"a": idle, "b": busy, "c": recent, "d": None}, NOW, IDLE, STALE, NOW - 6) == [
        "b (job export-1 is running)",
        "c (idle 0.5 min)",
        "d (idle 0.1 min)",
    ]


def _job(jobs_root: Path, name: str) -> subprocess.Popen:
    """A running detached job as remote/ssh/jobs.py leaves it: its directory, this boot's id, its wrapper's pid."""
    job = jobs_root / name
    job.mkdir(parents=True)
    (job / "boot_id").write_text(Path("/proc/sys/kernel/random/boot_id").read_text())
    wrapper = subprocess.Popen(["sleep", "600"])
    start = Path(f"/proc/{wrapper.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    (job / "pid").write_text(f"{wrapper.pid} {start}\n")
    return wrapper


def test_the_slice_is_resized_to_0_only_once_every_host_is_idle(slice_autostop, tmp_path):
    iam = storage_iam.start(slice_autostop.storage, tmp_path / "emulator.log")
    standins = [
        GceStandin(
            instance=host,
            # Two of the v6e-16's four hosts run here: the metadata names those two (how a host that never reports
            # counts: test_how_long_a_host_has_been_quiet).
            attributes={
                **slice_autostop.metadata,
                autostop.HOSTS_KEY: ",".join(HOSTS),
                autostop.IDLE_KEY: str(IDLE_S / 60),
            },
            group_access=slice_autostop.access,
        ).start()
        for host in HOSTS
    ]
    export = _job(tmp_path / "worker-0" / "jobs", "export-0123456789abcdef-1")  # worker 0 exports alone
    watchers = []
    try:
        for worker, standin in enumerate(standins):
            env = {
                "PATH": os.environ["PATH"],
                "GCE_METADATA_HOST": standin.host,
                "TPU_SFT_COMPUTE_API": f"http://{standin.host}",
                "TPU_SFT_STORAGE_API": iam.url(slice_autostop.storage.host),
            }
            log = tmp_path / f"autostop-{worker}.log"
            with open(log, "w") as out:
                jobs_root = tmp_path / f"worker-{worker}" / "jobs"
                command = [sys.executable, str(WATCHER), "--jobs-root", str(jobs_root), "--ssh-port", str(UNUSED_PORT)]
                watchers.append(
                    (
                        subprocess.Popen(
                            [*command, "--poll-seconds", "0.2"], stdout=out, stderr=subprocess.STDOUT, env=env, cwd="/"
                        ),
                        log,
                    )
                )
        waiting = "idle here; the slice waits for tpu-sft-dev-01 (job export-0123456789abcdef-1 is running)"
        wait_until(lambda: waiting in watchers[1][1].read_text(), 30, "worker 1 to wait for worker 0's export")
        time.sleep(2 * IDLE_S)  # worker 1 idle twice as long as idle minutes: it still waits
        assert [s.resizes for s in standins] == [[], []]
        export.kill()
        export.wait()
        ended = time.time()
        wait_until(lambda: all(p.poll() is not None for p, _ in watchers), 30, "the watchers to resize and exit")
        resized = [standin.api_times[-1] for standin in standins if standin.resizes]
        assert resized and min(resized) >= ended + IDLE_S - 0.5  # worker 0's own idle minutes, counted from its job
        assert {r for s in standins for r in s.resizes} == {("tpu-sft-dev", 0)}
        assert [p.returncode for p, _ in watchers] == [0, 0]
        text = "".join(log.read_text() for _, log in watchers)
        assert "every host idle 0.03 min" in text and "asking the API to resize group tpu-sft-dev to 0 hosts" in text
        assert TOKEN not in text
        report_url = f"{iam.url(slice_autostop.storage.host)}/storage/v1/b/{slice_autostop.storage.bucket}/o/"
        report = json.loads(urllib.request.urlopen(f"{report_url}autostop%2Ftpu-sft-dev-02.json?alt=media").read())
        assert report["host"] == "tpu-sft-dev-02" and report["busy"] is None and report["idle_since"] < ended
        assert iam.refusals == []
    finally:
        export.kill()
        for process, _ in watchers:
            if process.poll() is None:
                process.kill()
                process.wait()
        for standin in standins:
            standin.stop()
        iam.stop()


def test_a_host_without_its_grant_on_the_bucket_says_so_in_one_line_and_keeps_trying(slice_autostop, tmp_path):
    """Reports are the hosts' only way to agree: a 403 from Cloud Storage is logged with the grant it lacks, and
    nothing is resized. With autostop off, no report is written at all, until the metadata turns it on."""
    iam = storage_iam.StorageIam(storage_iam.gcs_emulator.start(slice_autostop.storage.bucket, tmp_path / "e.log"), {})
    standin = GceStandin(
        instance=HOSTS[0],
        attributes={**slice_autostop.metadata, autostop.IDLE_KEY: "0.01", autostop.ACTION_KEY: "off"},
        group_access=slice_autostop.access,
    ).start()
    env = {
        "PATH": os.environ["PATH"],
        "GCE_METADATA_HOST": standin.host,
        "TPU_SFT_COMPUTE_API": f"http://{standin.host}",
        "TPU_SFT_STORAGE_API": iam.url(slice_autostop.storage.host),
    }
    log = tmp_path / "autostop.log"
    with open(log, "w") as out:
        watcher = subprocess.Popen(
            [sys.executable, str(WATCHER), "--jobs-root", str(tmp_path / "jobs"), "--ssh-port", str(UNUSED_PORT)]
            + ["--poll-seconds", "0.2"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        wait_until(lambda: "idle; on idle: off" in log.read_text(), 30, "the watcher to go idle")
        time.sleep(1.0)  # five polls
        assert "Cloud Storage" not in log.read_text()
        standin.attributes[autostop.ACTION_KEY] = "stop"  # `pulumi up` turned autostop on: no reboot needed
        wait_until(lambda: log.read_text().count("Cloud Storage answered 403") >= 2, 30, "two refused reports")
        assert watcher.poll() is None and standin.resizes == []
        line = next(line for line in log.read_text().splitlines() if "Cloud Storage answered 403" in line)
        assert f"lacks write access to gs://{slice_autostop.storage.bucket}: run `pulumi up`" in line
        assert TOKEN not in log.read_text()
    finally:
        watcher.kill()
        watcher.wait()
        standin.stop()
        iam.stop()

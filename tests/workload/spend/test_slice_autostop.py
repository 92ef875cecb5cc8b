"""Autostop on a slice: no host decides alone. Each host's watcher reports to the checkpoint bucket; once every host
has been idle for idle minutes (a host silent for a few polls counts as quiet since it was last heard from), one of
them asks the Compute Engine API to resize the slice's group to 0, with the grant the program declared on that
one group.

The watchers run here as the startup script runs them, as processes of their own, each with its own jobs
directory; Cloud Storage is gcp-storage-emulator behind the IAM stand-in (rehearsal/storage_iam.py: the hosts act as
their service account, with the roles the program declared); the metadata server and the Compute Engine API are the
local stand-in (tests/workload/gce_standin.py), one per host, granting only what the program declared. SSH
sessions are left out here (each watcher is pointed at a port nobody uses): tests/workload/spend/test_autostop.py covers
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
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rehearsal import storage_iam
from tests.ssh_testbed import wait_until
from tests.workload.gce_standin import TOKEN, GceStandin, NotModelled
from workload.spend import autostop

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


def test_the_grant_lets_the_hosts_resize_groups_and_do_nothing_else(slice_autostop):
    standin = GceStandin(access=None, group_access=slice_autostop.access).start()
    try:
        assert _resize(standin, "tpu-sft-dev")[0] == 200
        assert standin.resizes == [("tpu-sft-dev", 0)]
        # On the project, as IAM can grant it (infra/resources/autostop.py): another group of the project too, said so
        # there.
        assert _resize(standin, "someone-elses-group")[0] == 404
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
    assert binding[3] == ""  # no condition
    wider = dataclasses.replace(slice_autostop.access, bindings=frozenset({(*binding[:3], "true")}))
    with pytest.raises(NotModelled):  # a condition the stand-in cannot evaluate is never guessed at
        wider.granted("compute.instanceGroupManagers.update", "my-tpu-project", "us-east5-b", "tpu-sft-dev")


def test_a_condition_naming_the_group_grants_nothing(slice_autostop):
    """The grant this program declared before: IAM Conditions do not recognise an instance group manager's name
    (tests/workload/gce_standin.py says where that rule comes from), so the hosts could never resize their group."""
    (binding,) = slice_autostop.access.bindings
    named = 'resource.name == "projects/my-tpu-project/zones/us-east5-b/instanceGroupManagers/tpu-sft-dev"'
    conditional = dataclasses.replace(slice_autostop.access, bindings=frozenset({(*binding[:3], named)}))
    standin = GceStandin(access=None, group_access=conditional).start()
    try:
        assert _resize(standin, "tpu-sft-dev") == (
            403,
            "Required 'compute.instanceGroupManagers.update' permission for "
            "'projects/my-tpu-project/zones/us-east5-b/instanceGroupManagers/tpu-sft-dev'",
        )
    finally:
        standin.stop()


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
    hour = 3600.0
    long_idle = {"busy": None, "idle_since": NOW - hour, "written": NOW}
    recent = {"busy": None, "idle_since": NOW - 300, "written": NOW}
    holding = autostop.holding_up({"a": long_idle, "b": busy, "c": recent, "d": None}, NOW, hour, STALE, NOW - 6)
    assert holding == ["b (job export-1 is running)", "c (idle 5.0 min)", "d (idle 0.1 min)"]


@pytest.mark.parametrize(
    "raw",
    [
        b"",  # never written (a 404 reads as nothing)
        b"not json",
        b'["a list"]',
        b'{"busy": null, "idle_since": 1.0}',  # no time written
        b'{"busy": null, "idle_since": 1.0, "written": "now"}',
        b'{"busy": null, "idle_since": "long ago", "written": 2.0}',
    ],
)
def test_a_report_that_does_not_read_counts_as_none(raw):
    """A host whose report is damaged counts as one that never reported: it cannot stop the watcher that reads it."""
    assert autostop.parse_report(raw) is None


def test_a_report_reads_back_as_written():
    watcher = autostop.Watcher("/nonexistent", UNUSED_PORT, clock=lambda: 100.0, wall=lambda: NOW)
    watcher.doing = None
    report = watcher.report("tpu-sft-dev-02")
    assert report == {"host": "tpu-sft-dev-02", "busy": None, "idle_since": NOW, "written": NOW}
    assert autostop.parse_report(json.dumps(report).encode()) == report
    assert autostop.parse_report(b'{"busy": "job x is running", "idle_since": null, "written": 7}')["written"] == 7


class _Bucket:
    """What slice_waits_for reads the reports through: here, a dict."""

    def __init__(self, reports: dict[str, dict]):
        self.reports = reports

    def read_reports(self, reports: str, hosts: tuple[str, ...]) -> dict[str, dict | None]:
        return {host: self.reports.get(host) for host in hosts}


@pytest.mark.parametrize(("age_s", "holding"), [(0.7, ["b (job x is running)"]), (0.9, [])])
def test_a_busy_host_is_heard_from_for_four_polls_then_counts_as_quiet_since(age_s, holding):
    """Polls of 0.2 s: a busy report 0.7 s old is still news; at 0.9 s it is stale, and the host counts as quiet since
    it was written (idle minutes 0.5 s here)."""
    now = 10_000.0
    watcher = autostop.Watcher("/nonexistent", UNUSED_PORT, clock=lambda: 0.0, wall=lambda: now)
    bucket = _Bucket({"b": {"busy": "job x is running", "idle_since": None, "written": now - age_s}})
    slice_ = autostop.Slice("tpu-sft-dev", ("b",), "gs://bucket/autostop")
    assert autostop.slice_waits_for(watcher, bucket, slice_, idle_s=0.5, poll_s=0.2) == holding  # type: ignore[arg-type]


def _job(jobs_root: Path, name: str) -> subprocess.Popen:
    """A running detached job as remote/ssh/jobs.py leaves it: its directory, this boot's id, its wrapper's pid."""
    job = jobs_root / name
    job.mkdir(parents=True)
    (job / "boot_id").write_text(Path("/proc/sys/kernel/random/boot_id").read_text())
    wrapper = subprocess.Popen(["sleep", "600"])
    start = Path(f"/proc/{wrapper.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    (job / "pid").write_text(f"{wrapper.pid} {start}\n")
    return wrapper


@dataclasses.dataclass
class SimulatedSlice:
    """Two hosts' watchers, each a process with its own jobs directory and its own metadata and API stand-in."""

    iam: storage_iam.StorageIam
    standins: list[GceStandin]
    watchers: list[subprocess.Popen]
    logs: list[Path]

    def resizes(self) -> set[tuple[str, int]]:
        return {r for s in self.standins for r in s.resizes}


@pytest.fixture
def simulated_slice(slice_autostop, tmp_path) -> Iterator[Callable[[], SimulatedSlice]]:
    started: list[SimulatedSlice] = []

    def start() -> SimulatedSlice:
        iam = storage_iam.start(slice_autostop.storage, tmp_path / "emulator.log")
        # Two of the v6e-16's four hosts run here: the metadata names those two (how a host that never reports
        # counts: test_how_long_a_host_has_been_quiet).
        attributes = {
            **slice_autostop.metadata,
            autostop.HOSTS_KEY: ",".join(HOSTS),
            autostop.IDLE_KEY: str(IDLE_S / 60),
        }
        standins = [
            GceStandin(instance=host, attributes=attributes, group_access=slice_autostop.access).start()
            for host in HOSTS
        ]
        running = SimulatedSlice(iam, standins, [], [])
        started.append(running)
        for worker, standin in enumerate(standins):
            env = {
                "PATH": os.environ["PATH"],
                "GCE_METADATA_HOST": standin.host,
                "TPU_SFT_COMPUTE_API": f"http://{standin.host}",
                "TPU_SFT_STORAGE_API": iam.url(slice_autostop.storage.host),
            }
            log = tmp_path / f"autostop-{worker}.log"
            jobs_root = tmp_path / f"worker-{worker}" / "jobs"
            command = [sys.executable, str(WATCHER), "--jobs-root", str(jobs_root), "--ssh-port", str(UNUSED_PORT)]
            with open(log, "w") as out:
                running.watchers.append(
                    subprocess.Popen(
                        [*command, "--poll-seconds", "0.2"], stdout=out, stderr=subprocess.STDOUT, env=env, cwd="/"
                    )
                )
            running.logs.append(log)
        return running

    yield start
    for running in started:
        for process in running.watchers:
            if process.poll() is None:
                process.kill()
                process.wait()
        for standin in running.standins:
            standin.stop()
        running.iam.stop()


def test_the_slice_is_resized_to_0_only_once_every_host_is_idle(slice_autostop, simulated_slice, tmp_path):
    export = _job(tmp_path / "worker-0" / "jobs", "export-0123456789abcdef-1")  # worker 0 exports alone
    try:
        hosts = simulated_slice()
        waiting = "idle here; the slice waits for tpu-sft-dev-01 (job export-0123456789abcdef-1 is running)"
        wait_until(lambda: waiting in hosts.logs[1].read_text(), 300, "worker 1 to wait for worker 0's export")
        time.sleep(2 * IDLE_S)  # worker 1 idle twice as long as idle minutes: it still waits
        assert hosts.resizes() == set()
        busy_at = hosts.standins[0].mark()  # worker 0 saw its export running after this
        export.kill()
        export.wait()
        ended = time.time()
        wait_until(lambda: all(p.poll() is not None for p in hosts.watchers), 300, "the watchers to resize and exit")
        resized = [standin.api_times[-1] for standin in hosts.standins if standin.resizes]
        assert resized and min(resized) >= busy_at + IDLE_S  # worker 0's own idle minutes, counted from its job
        assert hosts.resizes() == {("tpu-sft-dev", 0)}
        assert [p.returncode for p in hosts.watchers] == [0, 0]
        text = "".join(log.read_text() for log in hosts.logs)
        assert "every host idle 0.03 min" in text and "asking the API to resize group tpu-sft-dev to 0 hosts" in text
        assert TOKEN not in text
        reports = f"{hosts.iam.url(slice_autostop.storage.host)}/storage/v1/b/{slice_autostop.storage.bucket}/o/"
        report = json.loads(urllib.request.urlopen(f"{reports}autostop%2Ftpu-sft-dev-02.json?alt=media").read())
        assert report["host"] == "tpu-sft-dev-02" and report["busy"] is None and report["idle_since"] < ended
        assert hosts.iam.refusals == []
    finally:
        export.kill()
        export.wait()


def test_a_host_whose_watcher_died_holds_the_slice_up_only_until_its_report_is_stale(simulated_slice, tmp_path):
    """Worker 1's last report says busy, and then nothing more (its watcher killed, as on a host Google ended): after
    four polls without a word it counts as quiet since that report, and worker 0 resizes once idle minutes have
    passed since then, not never."""
    train = _job(tmp_path / "worker-1" / "jobs", "train-0123456789abcdef-1")
    try:
        hosts = simulated_slice()
        waiting = "idle here; the slice waits for tpu-sft-dev-02 (job train-0123456789abcdef-1 is running)"
        wait_until(lambda: waiting in hosts.logs[0].read_text(), 300, "worker 0 to wait for worker 1's job")
        busy_at = hosts.standins[1].mark()  # worker 1 reported its job running after this
        hosts.watchers[1].kill()
        hosts.watchers[1].wait()
        # Were a silent host's last report believed for ever, this would time out: the report goes stale after 4
        # polls of 0.2 s, and then idle minutes (1.8 s) count from when it was written, not from its staleness.
        wait_until(lambda: hosts.watchers[0].poll() is not None, 300, "worker 0 to resize")
        (resized,) = hosts.standins[0].api_times
        assert resized >= busy_at + IDLE_S
        assert hosts.resizes() == {("tpu-sft-dev", 0)}
    finally:
        train.kill()
        train.wait()


def test_a_slice_policy_is_read_from_the_metadata_and_a_missing_key_is_named(slice_autostop):
    whole = GceStandin(instance=HOSTS[0], attributes=slice_autostop.metadata).start()
    partial = [
        GceStandin(instance=HOSTS[0], attributes={k: v for k, v in slice_autostop.metadata.items() if k != key}).start()
        for key in (autostop.HOSTS_KEY, autostop.REPORTS_KEY)
    ]
    try:
        policy = autostop.read_policy(autostop.Cloud(metadata_host=whole.host))
        assert policy.slice == autostop.Slice(
            "tpu-sft-dev",
            ("tpu-sft-dev-01", "tpu-sft-dev-02", "tpu-sft-dev-03", "tpu-sft-dev-04"),
            f"gs://{slice_autostop.storage.bucket}/autostop",
        )
        for standin in partial:  # never a slice of no hosts, or reports nowhere
            with pytest.raises(autostop.ApiError, match=f"metadata {autostop.GROUP_KEY} is set, but"):
                autostop.read_policy(autostop.Cloud(metadata_host=standin.host))
    finally:
        for standin in (whole, *partial):
            standin.stop()


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
        wait_until(lambda: "idle; on idle: off" in log.read_text(), 300, "the watcher to go idle")
        time.sleep(1.0)  # five polls
        assert "Cloud Storage" not in log.read_text()
        standin.attributes[autostop.ACTION_KEY] = "delete"  # `pulumi up` turned autostop on: no reboot needed
        wait_until(lambda: log.read_text().count("Cloud Storage answered 403") >= 2, 300, "two refused reports")
        assert watcher.poll() is None and standin.resizes == []
        line = next(line for line in log.read_text().splitlines() if "Cloud Storage answered 403" in line)
        assert f"lacks write access to gs://{slice_autostop.storage.bucket}: run `pulumi up`" in line
        assert TOKEN not in log.read_text()
    finally:
        watcher.kill()
        watcher.wait()
        standin.stop()
        iam.stop()

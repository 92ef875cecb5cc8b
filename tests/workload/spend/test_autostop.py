"""Autostop on the VM: once the pipeline's jobs are done and nobody is connected, the VM asks the Compute Engine
API, with its own service account's token, to delete itself; never during a job, never while an SSH session is
open. Never to stop itself: Compute Engine cannot restart a stopped TPU VM, and the stand-in refuses it as Google does.

The watcher (workload/spend/autostop.py) runs here as the VM's startup script runs it, as a process of its own; the
jobs are real detached jobs (remote/ssh/jobs.py) on a real sshd, and the SSH sessions real ones. The metadata
server and the Compute Engine API do not exist off Google Cloud: a local stand-in answers for them
(tests/workload/gce_standin.py), allows only what the program declared (run here under the mock engine) and records
what the VM asked.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from infra.config.stack_file import read_stack_config
from rehearsal.engine import ROOT, run_program
from remote.ssh import jobs
from remote.ssh.connection import connect
from tests.ssh_testbed import wait_until
from tests.workload.gce_standin import TOKEN, DeclaredAccess, GceStandin
from workload.core.contract import run_job_id
from workload.spend import autostop

WATCHER = Path(autostop.__file__)
IDLE_MINUTES = "0.03"  # 1.8 s
IDLE_S = 1.8
FLEX_START = {"provisioningModel": "FLEX_START", "maxRunHours": "4", "reservation": None}
API = "/compute/v1/projects/my-tpu-project/zones/us-east5-b/instances"


@pytest.fixture(scope="module")
def declare(tmp_path_factory) -> Callable[..., DeclaredAccess]:
    """What the dev stack, with these tpu-sft keys changed (None: removed), declares for the VM: run once each."""
    home = tmp_path_factory.mktemp("home")
    (home / ".ssh").mkdir()
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(home / ".ssh/google_compute_engine")], check=True
    )
    base = {
        **read_stack_config(ROOT / "Pulumi.dev.yaml"),
        "tpu-sft:sshPublicKey": (home / ".ssh/google_compute_engine.pub").read_text().strip(),
    }
    declared: dict[tuple, DeclaredAccess] = {}

    def run(**keys: str | None) -> DeclaredAccess:
        if (key := tuple(sorted(keys.items()))) not in declared:
            config = {**base, **{f"tpu-sft:{k}": v for k, v in keys.items()}}
            with pytest.MonkeyPatch.context() as env:
                env.setenv("HOME", str(home))
                stack = run_program({k: v for k, v in config.items() if v is not None})
            declared[key] = DeclaredAccess.of(stack, config["gcp:project"])
        return declared[key]

    return run


@pytest.fixture
def serve() -> Iterator[Callable[..., GceStandin]]:
    started: list[GceStandin] = []

    def start(access: DeclaredAccess | None, action: str = "delete") -> GceStandin:
        standin = GceStandin(
            attributes={autostop.ACTION_KEY: action, autostop.IDLE_KEY: IDLE_MINUTES}, access=access
        ).start()
        started.append(standin)
        return standin

    yield start
    for standin in started:
        standin.stop()


@pytest.fixture
def cloud(declare, serve) -> GceStandin:
    """The dev stack as shipped: autostop delete, its role and binding declared."""
    return serve(declare())


@pytest.fixture
def host_target(private_host, state_dir):
    return private_host.target(state_dir)


@pytest.fixture
def start_watcher(cloud, private_host, state_dir, tmp_path):
    """Starts the watcher as the startup script does (this machine's python3, the one file on its own)."""
    started = []

    def start() -> tuple[subprocess.Popen, Path]:
        log = tmp_path / f"autostop-{len(started)}.log"
        env = {
            "PATH": os.environ["PATH"],
            "GCE_METADATA_HOST": cloud.host,
            "TPU_SFT_COMPUTE_API": f"http://{cloud.host}",
        }
        with open(log, "w") as out:
            process = subprocess.Popen(
                [
                    sys.executable,
                    str(WATCHER),
                    "--jobs-root",
                    str(state_dir / "jobs"),
                    "--ssh-port",
                    str(private_host.sshd.port),
                    "--poll-seconds",
                    "0.2",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd="/",
            )
        started.append(process)
        return process, log

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


RUN = run_job_id(1)


def _start_job(target, job_id: str, command: str) -> None:
    with connect(target) as conn:
        jobs.start(conn, job_id, command)


def test_fires_after_the_pipeline_ends_and_idle_minutes_pass_never_during_a_job(
    host_target, state_dir, scratch, cloud, start_watcher
):
    # The run: one job from convert to keep (remote/pipeline/claim.py), busy until its last step has ended, however
    # long the laptop that started it is gone. It runs until the test says so, however slow this machine is.
    release = scratch / "release"
    _start_job(host_target, RUN, f"while [ ! -e {release} ]; do sleep 0.05; done; exit 0")
    try:
        watcher, log = start_watcher()
        wait_until(lambda: f"job {RUN} is running" in log.read_text(), 300, "the watcher to see it")
        time.sleep(IDLE_S + 0.5)  # longer than the idle time, but the job still runs
        assert (state_dir / "jobs" / RUN / "exit").exists() is False
        assert cloud.api_calls() == []
        busy_at = cloud.mark()  # a poll after this saw the job running: idle time counts from no earlier
    finally:
        release.touch()
    wait_until(lambda: cloud.api_calls(), 300, "the delete request")
    ended = (state_dir / "jobs" / RUN / "exit").stat().st_mtime
    assert watcher.wait(10) == 0
    [(method, path, headers)] = cloud.api_calls()
    assert (method, path) == ("DELETE", "/compute/v1/projects/my-tpu-project/zones/us-east5-b/instances/tpu-sft-dev")
    assert headers["Authorization"] == f"Bearer {TOKEN}"  # the VM's own service-account token
    # The token came from the metadata server, asked as a VM asks it; the request came an idle time after the job.
    token_reads = [c for c in cloud.calls if c[1].endswith("/service-accounts/default/token")]
    assert token_reads and all(h["Metadata-Flavor"] == "Google" for _, _, h in token_reads)
    text = log.read_text()
    assert f"last job {RUN} succeeded: asking the API to delete this VM" in text
    assert "delete requested (operation operation-1234-stand-in)" in text
    assert TOKEN not in text
    assert cloud.api_times[0] > ended and cloud.api_times[0] - busy_at >= IDLE_S


def test_never_while_an_ssh_session_is_open(host_target, cloud, start_watcher):
    _start_job(host_target, "train-0123456789abcdef-1", "exit 3")  # a failed pipeline ends too
    session = connect(host_target)  # someone logged in to look at the failure
    try:
        watcher, log = start_watcher()
        wait_until(lambda: "1 SSH session(s) open" in log.read_text(), 300, "the watcher to see the session")
        time.sleep(IDLE_S * 2)
        assert session.run("true", hide=True).ok  # the session is really open, and in use
        assert cloud.api_calls() == []
    finally:
        session.close()
    wait_until(lambda: cloud.api_calls(), 300, "the delete request once the session closed")
    assert watcher.wait(10) == 0
    assert "last job train-0123456789abcdef-1 failed (exit 3)" in log.read_text()


def test_off_never_calls_the_api_and_a_later_change_in_metadata_takes_effect(host_target, cloud, start_watcher):
    cloud.attributes[autostop.ACTION_KEY] = "off"
    _start_job(host_target, "export-0123456789abcdef-1", "exit 0")
    watcher, log = start_watcher()
    wait_until(lambda: "idle; on idle: off" in log.read_text(), 300, "the watcher to go idle")
    time.sleep(IDLE_S * 2)
    assert cloud.api_calls() == [] and watcher.poll() is None
    cloud.attributes[autostop.ACTION_KEY] = "delete"  # `pulumi up` changed tpu-sft:autostop: no reboot needed
    wait_until(lambda: cloud.api_calls(), 300, "the delete request after the change")
    assert watcher.wait(10) == 0


def test_a_refused_request_is_reported_in_one_line_and_retried(host_target, declare, cloud, start_watcher):
    cloud.access = declare(autostop="off")  # the metadata says delete, but no role grants it (yet)
    _start_job(host_target, "export-0123456789abcdef-1", "exit 0")
    watcher, log = start_watcher()
    wait_until(lambda: len(cloud.api_calls()) >= 2, 300, "a retry")
    assert watcher.poll() is None
    text = log.read_text()
    assert "Compute Engine API answered 403 to DELETE" in text and "lacks the tpu-sft autostop role" in text
    assert "trying again in 0.2 s" in text and TOKEN not in text


def test_a_job_whose_wrapper_never_recorded_its_pid_counts_as_starting_for_a_minute_only(tmp_path):
    job = tmp_path / "jobs" / "export-0123456789abcdef-1"
    job.mkdir(parents=True)
    (job / "boot_id").write_text(Path("/proc/sys/kernel/random/boot_id").read_text())
    assert autostop.running_jobs(str(tmp_path / "jobs")) == [job.name]
    old = time.time() - autostop.STARTING_S - 1
    os.utime(job, (old, old))
    assert autostop.running_jobs(str(tmp_path / "jobs")) == []
    (job / "boot_id").write_text("an earlier boot")  # and a job of an earlier boot died with it
    os.utime(job, None)
    assert autostop.running_jobs(str(tmp_path / "jobs")) == []


def test_the_policy_is_read_from_metadata_in_minutes_and_a_bad_value_is_named(serve):
    standin = serve(None)
    cloud = autostop.Cloud(standin.host, timeout_s=5.0)
    standin.attributes.update({autostop.ACTION_KEY: "delete", autostop.IDLE_KEY: "45"})
    assert autostop.read_policy(cloud) == autostop.Policy("delete", 45 * 60)
    standin.attributes.clear()  # a VM the program did not write them on: never acts, and 30 min if it did
    assert autostop.read_policy(cloud) == autostop.Policy("off", 30 * 60)
    standin.attributes[autostop.ACTION_KEY] = "halt"
    with pytest.raises(autostop.ApiError, match="tpu-sft-autostop='halt' is not one of delete, off"):
        autostop.read_policy(cloud)
    standin.attributes[autostop.ACTION_KEY] = "stop"  # no longer a value: Google cannot restart a stopped TPU VM
    with pytest.raises(autostop.ApiError, match="tpu-sft-autostop='stop' is not one of delete, off"):
        autostop.read_policy(cloud)
    standin.attributes.update({autostop.ACTION_KEY: "delete", autostop.IDLE_KEY: "soon"})
    with pytest.raises(autostop.ApiError, match="tpu-sft-idle-minutes='soon' is not a number of minutes"):
        autostop.read_policy(cloud)


def test_a_session_is_an_established_connection_to_the_local_ssh_port(tmp_path):
    """Read as the kernel writes /proc/net/tcp and tcp6: a header line, then one row per socket."""
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"

    def row(n: int, local: str, remote: str, state: str) -> str:
        return f"   {n}: {local} {remote} {state} 00000000:00000000 00:00000000 00000000     0        0 {n} 1\n"

    (tmp_path / "tcp").write_text(
        header
        + row(0, "0100007F:0016", "0100007F:C350", "01")  # logged in: counts
        + row(1, "00000000:0016", "00000000:0000", "0A")  # sshd listening
        + row(2, "0100007F:C351", "0100007F:0016", "01")
    )  # the VM's own ssh out
    (tmp_path / "tcp6").write_text(
        header + row(0, "00000000000000000000000001000000:0016", "00000000000000000000000001000000:C352", "01")
    )
    tables = (str(tmp_path / "tcp"), str(tmp_path / "unreadable"), str(tmp_path / "tcp6"))  # skipped, not the end
    assert autostop.ssh_sessions(22, tables) == 2
    assert autostop.ssh_sessions(2222, tables) == 0


def _job_of_this_boot(jobs_root: Path) -> Path:
    job = jobs_root / "export-0123456789abcdef-1"
    job.mkdir(parents=True)
    (job / "boot_id").write_text(Path("/proc/sys/kernel/random/boot_id").read_text())
    return job


@pytest.mark.parametrize(("age_s", "starting"), [(0, True), (59.5, True), (60.5, False), (86400, False)])
def test_a_job_without_a_pid_counts_as_starting_for_one_minute_not_longer(tmp_path, monkeypatch, age_s, starting):
    """A job whose wrapper never started must not hold the VM up (and bill on) past that minute."""
    job = _job_of_this_boot(tmp_path / "jobs")
    created = 1_750_000_000.0
    os.utime(job, (created, created))
    monkeypatch.setattr(autostop, "time", SimpleNamespace(time=lambda: created + age_s))
    assert autostop.running_jobs(str(tmp_path / "jobs")) == ([job.name] if starting else [])


def test_finished_jobs_and_jobs_of_an_earlier_boot_are_passed_over(tmp_path):
    jobs_root = tmp_path / "jobs"
    assert autostop.running_jobs(str(jobs_root)) == []  # a new VM: no job has been started yet
    starting = _job_of_this_boot(jobs_root)  # export-…, listed after the two below
    finished = jobs_root / "bootstrap-0123456789abcdef-1"
    finished.mkdir()
    (finished / "boot_id").write_text((starting / "boot_id").read_text())
    (finished / "exit").write_text("0")
    earlier = jobs_root / "convert-0123456789abcdef-1"
    earlier.mkdir()
    (earlier / "boot_id").write_text("an earlier boot")
    assert autostop.running_jobs(str(jobs_root)) == [starting.name]


def _start_time(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


def test_a_recorded_pid_is_the_job_only_while_the_same_process_lives(tmp_path):
    """The wrapper records "PID STARTTIME": a pid the kernel reused for another process (another start time), a
    zombie, a process gone or a line that is no pid is not the job."""
    jobs_root = tmp_path / "jobs"
    job = _job_of_this_boot(jobs_root)
    # A command name may hold ")" and spaces: the fields are read after the last ")".
    (tmp_path / "sleep) S 1 2").symlink_to(shutil.which("sleep"))
    wrapper = subprocess.Popen([str(tmp_path / "sleep) S 1 2"), "60"])
    ended = subprocess.Popen(["true"])
    try:
        start = _start_time(wrapper.pid)
        (job / "pid").write_text(f"{wrapper.pid} {start}\n")
        assert autostop.running_jobs(str(jobs_root)) == [job.name]
        (job / "pid").write_text(f"{wrapper.pid} {int(start) + 1}\n")  # the same pid, now another process
        assert autostop.running_jobs(str(jobs_root)) == []
        wait_until(
            lambda: Path(f"/proc/{ended.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z",
            10,
            "the process to end",
        )
        (job / "pid").write_text(f"{ended.pid} {_start_time(ended.pid)}\n")  # a zombie: ended, not yet reaped
        assert autostop.running_jobs(str(jobs_root)) == []
        ended.wait()
        assert autostop.running_jobs(str(jobs_root)) == []  # gone
        (job / "pid").write_text("not a pid\n")
        assert autostop.running_jobs(str(jobs_root)) == []
    finally:
        wrapper.kill()
        wrapper.wait()
        ended.wait()


def _call(standin: GceStandin, method: str, path: str, token: str = TOKEN) -> tuple[int, str]:
    request = urllib.request.Request(
        f"http://{standin.host}{path}", method=method, headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())["error"]["message"]


def test_the_api_allows_only_what_the_declared_role_grants_on_this_instance(declare, serve):
    delete_grant = serve(declare())
    assert _call(delete_grant, "DELETE", f"{API}/tpu-sft-dev")[0] == 200
    assert _call(delete_grant, "POST", f"{API}/tpu-sft-dev/stop") == (
        403,
        "Required 'compute.instances.stop' permission for "
        "'projects/my-tpu-project/zones/us-east5-b/instances/tpu-sft-dev'",
    )
    # Bound on this one instance: another instance is refused as Google refuses it, existing or not.
    assert _call(delete_grant, "DELETE", f"{API}/someone-elses-vm")[0] == 403
    assert _call(delete_grant, "DELETE", f"{API}/tpu-sft-dev", token="ya29.someone-else")[0] == 401
    assert serve(declare(autostop="off")).access.role_permissions == {}
    assert _call(serve(declare(autostop="off")), "DELETE", f"{API}/tpu-sft-dev")[0] == 403
    assert _call(serve(None), "DELETE", f"{API}/tpu-sft-dev")[0] == 403  # nothing declared grants nothing


def test_the_grant_must_name_the_vms_own_account(declare, serve):
    access = declare(serviceAccount="tpu-sft-vm@my-tpu-project.iam.gserviceaccount.com")
    assert _call(serve(access), "DELETE", f"{API}/tpu-sft-dev")[0] == 200
    other_account = dataclasses.replace(access, service_account="someone@my-tpu-project.iam.gserviceaccount.com")
    assert _call(serve(other_account), "DELETE", f"{API}/tpu-sft-dev")[0] == 403


def _granting_stop(access: DeclaredAccess) -> DeclaredAccess:
    """`access` with a stop grant added by hand on the VM: the program declares none (its role holds delete only),
    so this is how a test shows that the API itself, not a missing grant, refuses the stop."""
    role = f"projects/{access.project}/roles/stopByHand"
    binding = (access.project, access.zone, access.instance, role, f"serviceAccount:{access.service_account}")
    return dataclasses.replace(
        access,
        role_permissions={**access.role_permissions, role: frozenset({"compute.instances.stop"})},
        bindings=access.bindings | {binding},
    )


def test_a_tpu_vm_is_deleted_never_stopped(declare, serve):
    """Compute Engine cannot restart a stopped TPU VM (tests/workload/gce_standin.py quotes Google): the dev stack's
    ct6e VM is refused a stop even with a grant that allows it, and deleted with the one the program declares."""
    shipped = declare()
    assert shipped.machine_type == "ct6e-standard-8t"
    assert _call(serve(shipped), "POST", f"{API}/tpu-sft-dev/stop")[0] == 403  # its role holds delete only
    assert _call(serve(shipped), "DELETE", f"{API}/tpu-sft-dev")[0] == 200
    status, message = _call(serve(_granting_stop(shipped)), "POST", f"{API}/tpu-sft-dev/stop")
    assert status == 400 and "ct6e-standard-8t" in message and "delete it instead" in message
    # The refusal is the machine type's: a VM without TPUs, given the same grant, would be stopped.
    no_tpu = dataclasses.replace(_granting_stop(shipped), machine_type="n2-standard-8")
    assert _call(serve(no_tpu), "POST", f"{API}/tpu-sft-dev/stop")[0] == 200


def test_a_flex_start_vm_is_deleted_never_stopped(declare, serve):
    flex = declare(**FLEX_START)
    assert flex.provisioning_model == "FLEX_START"
    assert _call(serve(flex), "POST", f"{API}/tpu-sft-dev/stop")[0] == 403  # its role holds delete only
    assert _call(serve(flex), "DELETE", f"{API}/tpu-sft-dev")[0] == 200
    # Even a stop grant on a machine type Google could restart would not stop a flex-start VM.
    stop_granted = dataclasses.replace(_granting_stop(flex), machine_type="n2-standard-8")
    status, message = _call(serve(stop_granted), "POST", f"{API}/tpu-sft-dev/stop")
    assert status == 400 and "FLEX_START" in message

"""`python -m remote phase` on a multi-host slice: the same job on every worker, each with its worker id and all the
hostnames; worker 0 followed; one worker failing stops them all and is named; a re-run re-attaches on every
worker, or starts one new attempt on every worker; Ctrl-C leaves every job running; an unreachable worker stops
the phase before anything starts.

The hosts are real sshds, each with a home of its own (rehearsal/slice_hosts.py). MaxText's venv is a stand-in
written into each host's home: a shell script in place of its python that records its argv, its pid and its
host's name, then succeeds or fails as its control files say, optionally held until the test releases it.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rehearsal.fresh_vm.address import claim_address
from rehearsal.metadata_standin import tpu_env
from rehearsal.slice_hosts import SliceHost, SliceHosts
from remote import cli
from remote.pipeline import slice_phase
from remote.pipeline.outcome import INTERRUPTED
from remote.pipeline.profile import HostProfile
from remote.pipeline.target import PipelineTarget
from remote.ssh import jobs
from remote.ssh.connection import connect, run
from remote.ssh.errors import EXIT_FAILED, EXIT_UNREACHABLE, CommandFailed
from remote.ssh.hosts import workers_of
from tests.fixtures.sshd import slice_target
from tests.ssh_testbed import REMOTE_USER, held_by_another_thread, wait_until
from workload.core.contract import EXIT_UNEXPECTED, PHASE_UNTIL
from workload.spend.bill import describe as describe_bill

REPO = Path(__file__).resolve().parents[3]
TOKEN = "hf_SliceCanary" + "y" * 24
PIPELINE = json.dumps({"profile": "tiny", "steps": 2})
STANDIN = """#!/bin/sh
# Stands in for `python -m workload run …`: records what it was given, then does what its control files say.
control="$(dirname "$0")/../../standin"
mkdir -p "$control/calls"
printf '%s\\0' "$@" > "$control/calls/$$.argv"
hostname > "$control/calls/$$.host"
echo '{"event": "phase", "phase": "train", "status": "start"}'
if [ -e "$control/hold" ]; then while [ ! -e "$control/release" ]; do sleep 0.05; done; fi
if [ "$(cat "$control/plan" 2>/dev/null)" = fail ]; then
  echo '{"event": "summary", "phase": "train", "ok": false, "error": "the stand-in failed as planned"}'
  exit 3
fi
bill=""
if [ -e "$control/bill" ]; then bill=", \\"bill\\": $(cat "$control/bill")"; fi
# A summary as each phase's part ends (--phase-summaries), up to --until: what each phase task follows.
until=; previous=; for arg in "$@"; do [ "$previous" = --until ] && until=$arg; previous=$arg; done
for part in convert train keep; do
  fields="\\"phase\\": \\"train\\", \\"until\\": \\"$part\\", \\"ok\\": true, \\"host\\": \\"$(hostname)\\"$bill"
  echo "{\\"event\\": \\"summary\\", $fields}"
  [ "$part" = "$until" ] && break
done
exit 0
"""


@pytest.fixture(scope="module")
def slice_hosts(testbed, user_key, remote_user):
    with SliceHosts(testbed / "slice", 3, REMOTE_USER, user_key) as hosts:
        yield hosts


class Slice:
    """This test's view of the hosts: its own state directory on each, the stand-in venv installed there."""

    def __init__(self, hosts: SliceHosts, state: str, uid: int, gid: int):
        self.hosts, self.state = hosts, state
        for host in hosts.hosts:
            python = self.path(host, "maxtext_venv/bin/python")
            python.parent.mkdir(parents=True)
            python.write_text(STANDIN)
            python.chmod(0o755)
            self.path(host, "standin").mkdir()
            for root, dirs, _ in os.walk(self.path(host, "")):
                for name in [".", *dirs]:
                    os.chown(os.path.join(root, name), uid, gid)

    def path(self, host: SliceHost, relative: str) -> Path:
        """A file of this test's state on `host`, as this machine sees it."""
        return host.home / self.state / relative

    def target(self, workers: tuple[str, ...] | None = None) -> PipelineTarget:
        home = os.path.expanduser(f"~{REMOTE_USER}")
        profile = HostProfile(
            name="slice-test", scratch_dir=f"{home}/scratch", kept_dir=f"{home}/kept", required_mount=None
        )
        return slice_target(self.hosts, self.state, workers, profile=profile)

    def control(self, worker: int, name: str, text: str = "") -> None:
        self.path(self.hosts.hosts[worker], f"standin/{name}").write_text(text)

    def uncontrol(self, worker: int, name: str) -> None:
        self.path(self.hosts.hosts[worker], f"standin/{name}").unlink(missing_ok=True)

    def calls(self, worker: int) -> list[list[str]]:
        """The argv of every stand-in run on `worker`, oldest first."""
        found = sorted(
            self.path(self.hosts.hosts[worker], "standin/calls").glob("*.argv"), key=lambda p: p.stat().st_mtime_ns
        )
        return [p.read_bytes().decode().split("\0")[:-1] for p in found]

    def hostnames(self, worker: int) -> set[str]:
        return {p.read_text().strip() for p in self.path(self.hosts.hosts[worker], "standin/calls").glob("*.host")}

    def jobs(self, worker: int) -> list[str]:
        root = self.path(self.hosts.hosts[worker], "jobs")
        return sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) if root.exists() else []

    def exit_code(self, worker: int, job_id: str) -> str | None:
        path = self.path(self.hosts.hosts[worker], f"jobs/{job_id}/exit")
        return path.read_text().strip() if path.exists() else None

    def standins_running(self, worker: int) -> list[str]:
        """The live stand-in processes on `worker`, read on the host itself (its own process namespace)."""
        target = self.target()
        with connect(target, self.hosts.addresses[worker]) as conn:
            # "pytho[n]" matches the stand-in's command line but not this grep's own.
            out = run(conn, "grep -ls 'maxtext_venv/bin/pytho[n]' /proc/[0-9]*/cmdline; true").stdout
        return out.split()


@pytest.fixture
def on_slice(slice_hosts, remote_user, request) -> Slice:
    return Slice(slice_hosts, f"state-{request.node.name[:60]}", remote_user.pw_uid, remote_user.pw_gid)


@pytest.fixture
def tpu_envs(slice_hosts):
    """Give the hosts' metadata stand-ins other tpu-envs (place order; None: no tpu-env); each host's own after."""

    def give(*texts: str | None) -> None:
        for host, text in zip(slice_hosts.hosts, texts, strict=True):
            host.metadata.set("tpu-env", text)

    yield give
    for host in slice_hosts.hosts:
        host.metadata.set("tpu-env", tpu_env(host.worker_id, slice_hosts.count))


@pytest.fixture
def interruptible():
    """The phases these tests send SIGINT to must take it as a user's Ctrl-C. Under a background job of a
    non-interactive shell (`.ci/run &`, nohup) pytest inherits SIGINT ignored, an ignored signal stays ignored
    across exec, and the phase would never see it. A handler of pytest's own is reset to the default in the child,
    where Python then raises KeyboardInterrupt."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def start_phase(target: PipelineTarget, phase: str = "train", pipeline: str = PIPELINE) -> subprocess.Popen:
    env = {**os.environ, "TPU_SFT_TARGET": target.to_json(), "TPU_SFT_PIPELINE": pipeline, "HF_TOKEN": TOKEN}
    return subprocess.Popen(
        [sys.executable, "-m", "remote", "phase", phase],
        cwd=REPO,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def finish(proc: subprocess.Popen, timeout: float = 60) -> tuple[int, list[str], dict]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()  # a phase that never ends must not outlive its test
        raise
    assert "Traceback" not in out + err and TOKEN not in out + err, out + err
    lines = out.splitlines()
    return proc.returncode, lines, json.loads(lines[-1])


def following(proc: subprocess.Popen) -> None:
    """Until the phase prints worker 0's first event: every worker's job has started and is being followed."""
    assert proc.stdout is not None
    assert next(line for line in proc.stdout if line.startswith("▶ ")) == "▶ train\n"


def run_phase(target: PipelineTarget, phase: str = "train") -> tuple[int, list[str], dict]:
    return finish(start_phase(target, phase))


def test_every_worker_runs_the_same_job_with_its_own_worker_id(on_slice):
    addresses = on_slice.hosts.addresses
    # Without a whole run the run task started (remote/pipeline/start_run.py), convert's run ends with convert, and
    # train starts the next attempt.
    for attempt, phase in enumerate(("convert", "train"), start=1):
        code, lines, summary = run_phase(on_slice.target(), phase)
        assert code == 0, lines
        assert summary["ok"] is True and summary["host"] == "worker-0"  # worker 0's own summary is the phase's
        job_id = f"run-{attempt}"
        assert on_slice.jobs(0)[-1] == job_id
        assert any(line.startswith(f"{phase}: job {job_id} on 3 workers: 0 {addresses[0]} (") for line in lines)
        argvs = []
        for worker in range(3):
            assert on_slice.jobs(worker)[-1] == job_id  # one job, the same name
            # Convert's part follows worker 0 alone: another worker's job may still be writing its exit code.
            wait_until(
                lambda w=worker, j=job_id: on_slice.exit_code(w, j) is not None, what=f"worker {worker}'s exit code"
            )
            assert on_slice.exit_code(worker, job_id) == "0"
            (argv,) = [a for a in on_slice.calls(worker) if a[a.index("--until") + 1] == PHASE_UNTIL[phase]]
            assert argv[-4:] == ["--worker-id", str(worker), "--worker-hostnames", ",".join(addresses)]
            argvs.append(argv[:-4])
            job_sh = on_slice.path(on_slice.hosts.hosts[worker], f"jobs/{job_id}/job.sh").read_text()
            assert TOKEN not in job_sh and "--hf-token-file ../secrets/hf_token" in job_sh
            secret = on_slice.path(on_slice.hosts.hosts[worker], "secrets/hf_token")
            assert secret.read_text() == TOKEN and stat.S_IMODE(secret.stat().st_mode) == 0o600
        assert argvs[0] == argvs[1] == argvs[2]  # the same job, config and flags everywhere but the worker id
        assert argvs[0][:4] == ["-m", "workload", "run", "--config"]
    assert [on_slice.hostnames(w) for w in range(3)] == [{"worker-0"}, {"worker-1"}, {"worker-2"}]


def test_the_workers_follow_the_hosts_tpu_env_not_the_targets_order(on_slice, tpu_envs):
    """The target lists the hosts by instance name; each host's metadata says which worker it is (places 0, 1, 2
    are workers 2, 0, 1): every worker's argv, the hostnames' order (the coordinator first) and the worker followed
    are the metadata's."""
    addresses = on_slice.hosts.addresses
    tpu_envs(tpu_env(2, 3), tpu_env(0, 3), tpu_env(1, 3))
    code, lines, summary = run_phase(on_slice.target(), "train")
    assert code == 0, lines
    in_worker_order = [addresses[1], addresses[2], addresses[0]]
    assert summary["ok"] is True and summary["host"] == on_slice.hosts.hosts[1].hostname  # worker 0's own summary
    assert any(line.startswith("train: job run-") and f"on 3 workers: 0 {addresses[1]} (" in line for line in lines), (
        lines
    )
    for place, worker_id in ((0, 2), (1, 0), (2, 1)):
        (argv,) = on_slice.calls(place)
        assert argv[-4:] == ["--worker-id", str(worker_id), "--worker-hostnames", ",".join(in_worker_order)]
    assert all(host.metadata.refused == 0 for host in on_slice.hosts.hosts)  # every read sent Metadata-Flavor


def test_a_lost_link_to_worker_0_reconnects_to_worker_0_not_to_the_first_host_listed(on_slice, tpu_envs):
    """The follow's link to worker 0 (the second host the target lists) dies mid-phase, its sshd sessions killed:
    the follow reconnects there, and the phase prints worker 0's summary, not the first listed host's."""
    tpu_envs(tpu_env(1, 3), tpu_env(0, 3), tpu_env(2, 3))
    for worker in range(3):
        on_slice.control(worker, "hold")
    proc = start_phase(on_slice.target())
    following(proc)
    zero = on_slice.hosts.hosts[1]
    assert zero.sshd.kill_sessions() >= 1
    for worker in range(3):
        on_slice.control(worker, "release")
    code, lines, summary = finish(proc)
    assert code == 0 and summary["ok"] is True and summary["host"] == zero.hostname, lines


@pytest.mark.parametrize(
    ("texts", "said"),
    [
        pytest.param(
            (tpu_env(0, 3), tpu_env(1, 3), tpu_env(1, 3)),
            "{1} and {2}: both have TPU_WORKER_ID 1 in their tpu-env. Fix: compare each host's tpu-env",
            id="repeated",
        ),
        pytest.param(
            (tpu_env(0, 3), tpu_env(1, 3).replace("TPU_WORKER_ID: '1'\n", ""), tpu_env(2, 3)),
            "{1}: its tpu-env has no TPU_WORKER_ID. Fix: compare each host's tpu-env",
            id="missing-id",
        ),
        pytest.param(
            (tpu_env(0, 3), tpu_env(1, 3), None),
            "{2}: its instance metadata has no tpu-env, so its TPU worker id is unknown. Fix: target only",
            id="no-tpu-env",
        ),
    ],
)
def test_an_order_not_whole_stops_the_phase_at_once(on_slice, tpu_envs, texts, said):
    """Hosts whose tpu-envs give no whole worker order: one line naming the host(s), before anything starts."""
    addresses = on_slice.hosts.addresses
    tpu_envs(*texts)
    code, lines, summary = run_phase(on_slice.target(), "train")
    assert code == EXIT_FAILED
    assert summary["ok"] is False and summary["error"].startswith(said.format(*addresses)), summary
    assert "\n" not in summary["error"]
    for place in range(3):  # nothing shipped, placed or started anywhere
        assert not on_slice.path(on_slice.hosts.hosts[place], "code").exists()
        assert on_slice.jobs(place) == [] and on_slice.calls(place) == []


def test_the_phases_bill_adds_up_every_workers_own_reading(on_slice):
    """Each host measures its own chips and uptime (workload/spend/bill.py); worker 2 came up later, as a host the group
    recreated does. A worker whose job printed no reading is named, not guessed."""
    bills = [
        {"vm_up_s": up, "chips": 4, "chip_hours": round(4 * up / 3600, 3), "usd_per_chip_hour": 2.7}
        for up in (7200, 7195, 1800)
    ]
    for worker, bill in enumerate(bills[:2]):
        on_slice.control(worker, "bill", json.dumps({**bill, "cost_usd": round(bill["chip_hours"] * 2.7, 2)}))
    code, lines, summary = run_phase(on_slice.target(), "convert")
    assert code == 0, lines
    assert summary["bill"]["chip_hours"] == 8.0 + 7.994 and summary["bill"]["unread"] == [
        f"worker 2 ({on_slice.hosts.addresses[2]})"
    ]
    assert "not counted: worker 2" in lines[-2]
    on_slice.control(2, "bill", json.dumps({**bills[2], "cost_usd": round(bills[2]["chip_hours"] * 2.7, 2)}))
    code, lines, summary = run_phase(on_slice.target(), "export")  # the next attempt: convert's ended with convert
    assert code == 0, lines
    assert summary["bill"]["chip_hours"] == 8.0 + 7.994 + 2.0 and summary["bill"]["hosts"] == 3
    assert lines[-2] == describe_bill(summary["bill"]) and lines[-2].startswith("bill: 3 hosts, the longest up 2 h")


@pytest.mark.parametrize("failing", [1, 0])
def test_a_failing_worker_stops_every_worker_and_is_named(on_slice, failing):
    addresses = on_slice.hosts.addresses
    others = [w for w in range(3) if w != failing]
    on_slice.control(failing, "plan", "fail")
    for held in others:
        on_slice.control(held, "hold")
    code, lines, summary = run_phase(on_slice.target())
    (job_id,) = on_slice.jobs(failing)
    log = f"~/{on_slice.state}/jobs/{job_id}/log"
    # The failed worker's own reason, from the summary its workload printed last: only worker 0's output is shown.
    error = (
        f"worker {failing} ({addresses[failing]}): job {job_id} failed: exited with code 3 "
        f"(the stand-in failed as planned); its log: {log}"
    )
    assert code == 3
    assert lines[-2] == f"✗ {error}"
    assert summary == {
        "event": "summary",
        "phase": "train",
        "ok": False,
        "error": error,
        "worker": failing,
        "host": addresses[failing],
    }
    for worker in others:
        assert len(on_slice.calls(worker)) == 1  # it had started
        assert on_slice.path(on_slice.hosts.hosts[worker], f"jobs/{job_id}/cancelled").exists()
        assert on_slice.standins_running(worker) == []

    # Failed on one worker and cancelled on the others: the next run is attempt 2, on every worker.
    on_slice.control(failing, "plan", "ok")
    for held in others:
        on_slice.uncontrol(held, "hold")
    code, lines, summary = run_phase(on_slice.target())
    assert code == 0 and summary["ok"] is True, lines
    second = job_id.removesuffix("-1") + "-2"
    for worker in range(3):
        assert on_slice.jobs(worker) == [job_id, second]
        assert on_slice.exit_code(worker, second) == "0"
        assert on_slice.calls(worker)[-1][-3] == str(worker)


def test_a_rerun_after_a_partial_success_runs_a_new_attempt_on_every_worker(on_slice):
    on_slice.control(1, "plan", "fail")
    on_slice.control(1, "hold")
    proc = start_phase(on_slice.target())
    assert proc.stdout is not None
    # Workers 0 and 2 succeed first, and the phase has seen worker 0 end; only then does worker 1 fail.
    waiting = next(line for line in proc.stdout if "waiting for" in line)
    assert waiting.startswith("train: worker 0's part succeeded; waiting for worker 1 (")
    (job_id,) = on_slice.jobs(1)
    wait_until(lambda: on_slice.exit_code(2, job_id) == "0", 300, "worker 2's job to succeed")
    on_slice.control(1, "release")
    code, lines, summary = finish(proc)
    assert code == 3 and summary["worker"] == 1 and summary["ok"] is False, lines

    on_slice.control(1, "plan", "ok")
    code, lines, summary = run_phase(on_slice.target())
    assert code == 0 and summary["ok"] is True, lines
    second = job_id.removesuffix("-1") + "-2"
    for worker in range(3):
        assert on_slice.jobs(worker) == [job_id, second]  # the workers that had succeeded run it again too
        assert on_slice.exit_code(worker, second) == "0"
        assert len(on_slice.calls(worker)) == 2


def test_ctrl_c_leaves_every_job_running_and_a_rerun_reattaches_on_every_worker(on_slice, interruptible):
    for worker in range(3):
        on_slice.control(worker, "hold")
    first = start_phase(on_slice.target())
    following(first)
    first.send_signal(signal.SIGINT)
    code, lines, summary = finish(first)
    assert code == 130 and summary["ok"] is False and summary["error"] == INTERRUPTED
    (job_id,) = on_slice.jobs(0)
    for worker in range(3):
        assert on_slice.exit_code(worker, job_id) is None and on_slice.standins_running(worker) != []

    second = start_phase(on_slice.target())
    assert second.stdout is not None
    started = next(line for line in second.stdout if line.startswith("train: job "))  # claimed on every worker
    assert started.startswith(f"train: job {job_id} on 3 workers: ") and started.count("(running)") == 3
    for worker in range(3):
        on_slice.control(worker, "release")
    code, lines, summary = finish(second)
    assert code == 0 and summary["ok"] is True and summary["host"] == "worker-0", lines
    for worker in range(3):
        assert on_slice.jobs(worker) == [job_id]  # re-attached: no second job anywhere
        assert len(on_slice.calls(worker)) == 1
        assert on_slice.exit_code(worker, job_id) == "0"


def test_a_phase_whose_settings_the_running_run_lacks_cancels_it_everywhere_and_starts_the_next(
    on_slice, interruptible
):
    """The changed-input rule: train's settings changed while the run trains with the old ones. A convert with the
    same convert settings follows that run; train stops it on every worker and starts the next attempt with its own."""
    for worker in range(3):
        on_slice.control(worker, "hold")
    first = start_phase(on_slice.target())
    following(first)
    first.send_signal(signal.SIGINT)
    assert finish(first)[0] == 130
    changed = json.dumps({**json.loads(PIPELINE), "steps": 3})
    convert = start_phase(on_slice.target(), "convert", changed)
    assert convert.stdout is not None
    started = next(line for line in convert.stdout if line.startswith("convert: job "))
    assert started.startswith("convert: job run-1 on 3 workers: ") and started.count("(running)") == 3
    convert.kill()  # it follows run-1, which stays held
    convert.wait()
    for worker in range(3):
        on_slice.uncontrol(worker, "hold")
    code, lines, summary = finish(start_phase(on_slice.target(), "train", changed))
    assert code == 0 and summary["ok"] is True, lines
    assert any(line.startswith("train: job run-2 on 3 workers: ") for line in lines), lines
    for worker in range(3):
        assert on_slice.jobs(worker) == ["run-1", "run-2"]
        host = on_slice.hosts.hosts[worker]
        assert on_slice.path(host, "jobs/run-1/cancelled").exists() and on_slice.exit_code(worker, "run-1") is None
        assert on_slice.exit_code(worker, "run-2") == "0"
        assert json.loads(on_slice.path(host, "runs/run-2.json").read_text())["steps"] == 3
        assert on_slice.standins_running(worker) == []


def test_ctrl_c_inside_paramiko_still_ends_the_phase(on_slice, monkeypatch, capsys):
    """Ctrl-C can strike worker 0's follow while paramiko holds its transport's send lock, which then stays held
    (seen under load: the phase hung instead of exiting 130). Here the lock is held on purpose before the
    interrupt; the phase must still end at once, leaving every job running."""
    for worker in range(3):
        on_slice.control(worker, "hold")
    monkeypatch.setenv("TPU_SFT_TARGET", on_slice.target().to_json())
    monkeypatch.setenv("TPU_SFT_PIPELINE", PIPELINE)
    releases: list[threading.Event] = []

    def interrupted_inside_paramiko(*_, conn, **__):
        conn.sftp()  # open, as shipping left it: its close would send a message under that lock
        releases.append(held_by_another_thread(conn.transport.clear_to_send_lock))
        raise KeyboardInterrupt

    monkeypatch.setattr(jobs, "follow", interrupted_inside_paramiko)
    codes: list[int] = []
    phase = threading.Thread(target=lambda: codes.append(cli.main(["phase", "train"])), daemon=True)
    phase.start()
    phase.join(300)  # a hang never ends: the bound only has to outlast a slow start
    for release in releases:
        release.set()
    assert codes == [130], "the phase hung after Ctrl-C on a connection whose send lock was left held"
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert summary["ok"] is False and summary["error"] == INTERRUPTED
    (job_id,) = on_slice.jobs(0)
    for worker in range(3):
        assert on_slice.exit_code(worker, job_id) is None and on_slice.standins_running(worker) != []
        on_slice.control(worker, "release")


def test_a_rerun_stops_what_runs_of_an_attempt_a_worker_lost_and_starts_anew(on_slice, interruptible):
    for worker in range(3):
        on_slice.control(worker, "hold")
    first = start_phase(on_slice.target())
    following(first)
    first.send_signal(signal.SIGINT)
    assert finish(first)[0] == 130
    (job_id,) = on_slice.jobs(0)
    with connect(on_slice.target(), on_slice.hosts.addresses[1]) as conn:  # worker 1's job ends while unwatched
        assert jobs.cancel(conn, job_id).state == "cancelled"
    for worker in range(3):
        on_slice.uncontrol(worker, "hold")
    code, lines, summary = run_phase(on_slice.target())
    assert code == 0 and summary["ok"] is True, lines
    second = job_id.removesuffix("-1") + "-2"
    for worker in range(3):
        assert on_slice.jobs(worker) == [job_id, second]
        assert on_slice.exit_code(worker, job_id) is None  # attempt 1 was stopped, not finished
        assert on_slice.exit_code(worker, second) == "0"
        assert on_slice.standins_running(worker) == []


def test_an_unreachable_worker_stops_the_phase_before_anything_starts(on_slice, monkeypatch, capsys):
    monkeypatch.setattr(slice_phase, "NEW_VM_DEADLINE_S", 1.0)
    silent, lock = claim_address()  # a loopback address of our own with nothing listening on port 22
    try:
        target = on_slice.target(workers=(on_slice.hosts.addresses[1], silent))
        monkeypatch.setenv("TPU_SFT_TARGET", target.to_json())
        monkeypatch.setenv("TPU_SFT_PIPELINE", PIPELINE)
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        code = cli.main(["phase", "train"])
    finally:
        lock.close()
    out, err = capsys.readouterr()
    summary = json.loads(out.splitlines()[-1])
    assert code == EXIT_UNREACHABLE
    assert summary["ok"] is False and summary["error"].startswith(f"worker 2 ({silent}): no SSH answer within 1 s")
    assert f"error: {summary['error']}" in err
    for worker in (0, 1):  # nothing shipped, placed or started on the workers that did answer
        assert not on_slice.path(on_slice.hosts.hosts[worker], "code").exists()
        assert not on_slice.path(on_slice.hosts.hosts[worker], "secrets").exists()
        assert on_slice.jobs(worker) == [] and on_slice.calls(worker) == []


def _two_held_workers_followed(hosts, remote_user, monkeypatch):
    """Both workers' jobs held running, the phase's target set; the event is set once worker 0 is followed."""
    on_two = Slice(hosts, "state", remote_user.pw_uid, remote_user.pw_gid)
    on_two.control(0, "hold")
    on_two.control(1, "hold")
    monkeypatch.setenv("TPU_SFT_TARGET", on_two.target().to_json())
    monkeypatch.setenv("TPU_SFT_PIPELINE", PIPELINE)
    following, follow = threading.Event(), jobs.follow

    def follow_and_tell(*args, **kwargs):
        following.set()
        return follow(*args, **kwargs)

    monkeypatch.setattr(jobs, "follow", follow_and_tell)
    return on_two, following


def test_a_worker_unreachable_for_too_long_counts_as_lost(testbed, user_key, remote_user, monkeypatch, capsys):
    monkeypatch.setattr(slice_phase, "UNREACHABLE_S", 1.0)
    with SliceHosts(testbed / "slice-lost", 2, REMOTE_USER, user_key) as hosts:
        on_two, following = _two_held_workers_followed(hosts, remote_user, monkeypatch)

        def take_worker_1_down() -> None:  # its host goes away mid-run: no status, no exit code, ever
            assert following.wait(300)
            hosts.hosts[1].sshd.stop()

        down = threading.Thread(target=take_worker_1_down)
        down.start()
        code = cli.main(["phase", "train"])
        down.join()
        out, err = capsys.readouterr()
        summary = json.loads(out.splitlines()[-1])
        assert code == EXIT_UNREACHABLE, out + err
        assert (
            summary["worker"] == 1
            and summary["error"].startswith(f"worker 1 ({hosts.addresses[1]}): job run-")
            and " unreachable for 1 s: " in summary["error"]
        )
        (job_id,) = on_two.jobs(0)
        assert on_two.path(hosts.hosts[0], f"jobs/{job_id}/cancelled").exists()
        assert on_two.standins_running(0) == []


def _train_with_worker_1_polls_raising(error, directory, user_key, remote_user, monkeypatch, capsys):
    """`phase train` on two held workers, every status poll of worker 1 raising `error` once the phase follows:
    (the exit statuses it ended with, within 120 s, and its summary line)."""
    with SliceHosts(directory, 2, REMOTE_USER, user_key) as hosts:
        status = jobs.status
        on_two, following = _two_held_workers_followed(hosts, remote_user, monkeypatch)

        def raising_on_worker_1(conn, job_id):
            if following.is_set() and conn.host == hosts.addresses[1]:
                raise error
            return status(conn, job_id)

        monkeypatch.setattr(jobs, "status", raising_on_worker_1)
        ended: list[int] = []
        phase = threading.Thread(target=lambda: ended.append(cli.main(["phase", "train"])), daemon=True)
        phase.start()
        phase.join(timeout=120)
        lines = capsys.readouterr().out.splitlines()
        return ended, json.loads(lines[-1]) if ended else None


def test_a_poll_that_fails_otherwise_than_unreachable_still_ends_the_phase(
    testbed, user_key, remote_user, monkeypatch, capsys
):
    """A host going down can cut a status poll mid-command (an exit of -1) instead of refusing the connection.
    The watcher once died on that, and worker 0's follow of a job that never ends waited forever: seen as a hang
    of the test above. Any failed poll counts toward UNREACHABLE_S like an unreachable host."""
    monkeypatch.setattr(slice_phase, "UNREACHABLE_S", 1.0)
    cut = CommandFailed("worker-1", -1, ())
    ended, summary = _train_with_worker_1_polls_raising(
        cut, testbed / "slice-cut", user_key, remote_user, monkeypatch, capsys
    )
    assert ended == [EXIT_UNREACHABLE], "the phase did not end after worker 1's polls kept failing"
    assert summary["worker"] == 1 and " unreachable for 1 s: " in summary["error"]


def test_a_poll_that_fails_unexpectedly_ends_the_phase_naming_the_worker(
    testbed, user_key, remote_user, monkeypatch, capsys
):
    """Not a remote error at all (a bug, an unforeseen answer): the watcher must still end the phase, not die."""
    unforeseen = ValueError("an answer nobody foresaw")
    ended, summary = _train_with_worker_1_polls_raising(
        unforeseen, testbed / "slice-bug", user_key, remote_user, monkeypatch, capsys
    )
    assert ended == [EXIT_UNEXPECTED], "the phase did not end after worker 1's poll failed unexpectedly"
    assert summary["worker"] == 1
    assert "its status poll failed: ValueError: an answer nobody foresaw" in summary["error"]


def test_worker_ids_follow_the_targets_host_order():
    target = PipelineTarget(host="10.0.0.9", workers=("10.0.0.3", "10.0.0.5"), user="u", key_path="k", known_hosts="h")
    assert [(w.id, w.host) for w in workers_of(target)] == [(0, "10.0.0.9"), (1, "10.0.0.3"), (2, "10.0.0.5")]
    assert jobs.shown("rel/log") == "~/rel/log" and jobs.shown("/abs/log") == "/abs/log"


def start_run(target: PipelineTarget, pipeline: str = PIPELINE) -> tuple[int, list[str], dict]:
    env = {**os.environ, "TPU_SFT_TARGET": target.to_json(), "TPU_SFT_PIPELINE": pipeline, "HF_TOKEN": TOKEN}
    return finish(
        subprocess.Popen(
            [sys.executable, "-m", "remote", "start-run"],
            cwd=REPO,
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    )


def test_the_run_task_starts_one_whole_attempt_on_every_worker_and_a_changed_setting_the_next(on_slice):
    """The run task takes the run on every worker and returns at once; the same settings again start nothing;
    changed settings stop the running attempt everywhere and start the next, and train's task follows it."""
    addresses = on_slice.hosts.addresses
    for worker in range(3):
        on_slice.control(worker, "hold")
    code, lines, summary = start_run(on_slice.target())
    assert code == 0 and (summary["job"], summary["started"]) == ("run-1", True), lines
    assert lines[-2].startswith(f"run: job run-1 on 3 workers: 0 {addresses[0]} (") and "started" in lines[-2]
    for worker in range(3):
        wait_until(lambda w=worker: on_slice.calls(w), what=f"worker {worker}'s stand-in to start")
        (argv,) = on_slice.calls(worker)
        assert argv[argv.index("--until") + 1] == "eval"  # the whole run
        assert argv[-4:] == ["--worker-id", str(worker), "--worker-hostnames", ",".join(addresses)]
    code, _, again = start_run(on_slice.target())
    assert code == 0 and (again["job"], again["started"]) == ("run-1", False)

    changed = json.dumps({**json.loads(PIPELINE), "steps": 3})
    code, lines, summary = start_run(on_slice.target(), changed)
    assert code == 0 and (summary["job"], summary["started"]) == ("run-2", True), lines
    train = start_phase(on_slice.target(), "train", changed)
    following(train)  # run-2, which the run task started, held
    for worker in range(3):
        on_slice.control(worker, "release")
    code, lines, summary = finish(train)
    assert code == 0 and summary["ok"] is True, lines
    for worker in range(3):
        host = on_slice.hosts.hosts[worker]
        assert on_slice.jobs(worker) == ["run-1", "run-2"]  # train followed the run task's attempt, starting none
        assert on_slice.path(host, "jobs/run-1/cancelled").exists()
        assert json.loads(on_slice.path(host, "runs/run-2.json").read_text())["steps"] == 3

"""Restarts that must start nothing, and the crash loop, played on real jobs: the VM's start-up
(workload/run/boot_resume.py `main`, as the startup script runs it) over a jobs dir laid out as remote/ssh/jobs.py lays
it out, each attempt the real wrapper (`run.sh`) running the real workload (`python -m workload run`), whose
boot-resume budget is kept in the bucket (gcp-storage-emulator behind the IAM stand-in, reached as the VM's service
account); then what autostop makes of the VM, and `scripts/tpu-sft status` once autostop has deleted it (the run's
log as copied to the bucket).

Stand-ins: a boot is the boot id the start-up reads (`boot_resume.BOOT_ID` pointed at a file that each boot
rewrites); a boot's end is SIGKILL to the attempt's processes, as a VM's end kills them. MaxText's converter, the
first process an attempt starts, is a module that hangs until its boot ends (a run that dies with its VM at every
start: nothing reaches a newer checkpoint) or exits 1 at once (a run that fails on its own). Not played here: a
real reboot, MaxText, and the startup script around the start-up's call (tests/infra/resources/test_startup_resume.py;
the fresh-VM rehearsal restarts a whole VM: tests/fresh_vm/test_restart_resumes.py)."""

from __future__ import annotations

import json
import os
import shlex
import signal
from pathlib import Path

from remote.ssh import jobs
from remote.ssh.connection import connect, env_prefix
from tests.remote.stack.test_run_log_bucket import read
from tests.remote.stack_commands import REPO, standing_at, tpu_sft
from tests.ssh_testbed import free_port, wait_until
from workload.core.config import PipelineConfig
from workload.core.contract import RUN_JOB_PREFIX
from workload.run import boot_resume, resume_budget
from workload.spend import autostop

RESUMES = 2  # tpu-sft:bootResumes for these runs (default 3): one boot-resume fewer to play
# The SSH user's interpreter for a run that keeps nothing in a bucket (the standard library is all it needs): this
# machine's venvs live under root's home, which the tests' SSH user cannot read.
IMAGE_PYTHON = "/usr/bin/python3"
CONVERTER = '''"""MaxText's converter, as the test's run meets it: hangs until its boot ends, or fails on its own."""
import os, sys, time
if os.environ["STANDIN_CONVERTER"] == "fail":
    sys.exit("RuntimeError: the converter failed on its own")
open(os.path.join(os.environ["STANDIN_STARTED"], str(os.getpid())), "w").close()
time.sleep(3600)
'''


class Vm:
    """The SSH user's state dir on a VM whose boots the test plays (`jobs/`, `runs/`), the boot id file, and the
    run's command: the workload with the converter stand-in."""

    def __init__(self, tmp: Path, state: Path, python: str, runs_url: str | None, converter: str):
        # A run of its own in the session's bucket: the budget is kept by run.
        self.config = PipelineConfig.from_mapping({"runName": f"{converter}-{tmp.name[:20]}"})
        self.tmp, self.python, self.state, self.runs_url, self.boot = tmp, python, state, runs_url, 0
        self.jobs, self.started = state / "jobs", tmp / "converters-started"
        self.started.mkdir()
        self.started.chmod(0o777)  # the SSH user's converter writes here
        standin = tmp / "standin" / "maxtext" / "checkpoint_conversion"
        standin.mkdir(parents=True)
        for package in (standin.parent, standin):
            (package / "__init__.py").write_text("")
        (standin / "to_maxtext.py").write_text(CONVERTER)
        self.env = {
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": str(tmp / "standin"),
            "STANDIN_CONVERTER": converter,
            "STANDIN_STARTED": str(self.started),
        }
        runs = state / "runs"
        runs.mkdir(parents=True)
        (runs / "run-1.json").write_text(json.dumps(self.config.to_mapping()))
        (runs / "run-1.json.until").write_text("keep\n")

    def command(self) -> str:
        """run-1's, as the run task's claim.start_attempt writes it."""
        argv = ["-m", "workload", "run", "--config", str(self.state / "runs" / "run-1.json")]
        argv += ["--work-dir", str(self.tmp / "shm"), "--output-dir", str(self.tmp / "disk"), "--until", "keep"]
        argv += ["--phase-summaries"] + (["--runs-dir", self.runs_url] if self.runs_url else [])
        return f"cd {shlex.quote(str(REPO))} && exec {shlex.quote(self.python)} {shlex.join(argv)}"

    def died_with_boot_zero(self) -> None:
        """run-1 as jobs.start leaves it (its job.sh and run.sh), started in a boot before the test's first: no exit
        record, so it died with that boot."""
        job = self.job(1)
        job.mkdir(parents=True)
        (job / "job.sh").write_text(jobs.job_script(self.command(), env_prefix(self.env)))
        (job / "run.sh").write_text(jobs._RUN_SH)
        (job / "boot_id").write_text("boot-0\n")

    def next_boot(self, monkeypatch, capsys) -> str:
        """A new boot: its start-up runs once the data disk is mounted; returns the line it printed."""
        self.boot += 1
        boot_id = self.tmp / "boot_id"
        boot_id.write_text(f"boot-{self.boot}\n")
        monkeypatch.setattr(boot_resume, "BOOT_ID", str(boot_id))
        argv = ["--jobs-root", str(self.jobs), "--attempt-prefix", RUN_JOB_PREFIX, "--boot-resumes", str(RESUMES)]
        assert boot_resume.main([*argv, "--deadline-hours", "24"]) == 0
        return capsys.readouterr().out.strip()

    def job(self, number: int) -> Path:
        return self.jobs / f"{RUN_JOB_PREFIX}-{number}"

    def converting(self, number: int) -> int:
        """Wait until attempt `number` has started its converter; its pid."""
        exit_record = self.job(number) / "exit"
        wait_until(lambda: any(self.started.iterdir()) or exit_record.exists(), what=f"run-{number}'s converter")
        assert not exit_record.exists(), (self.job(number) / "log").read_text()[-3000:]
        converter = next(self.started.iterdir())
        converter.unlink()
        return int(converter.name)

    def ended_before_any_step(self, number: int) -> None:
        """Wait until attempt `number` has ended or started its converter: it must have ended."""
        exit_record = self.job(number) / "exit"
        wait_until(lambda: exit_record.exists() or any(self.started.iterdir()), what=f"run-{number}'s end")
        if not exit_record.exists():
            os.killpg(int((self.job(number) / "pid").read_text().split()[0]), signal.SIGKILL)
            raise AssertionError(f"run-{number} started a step: {(self.job(number) / 'log').read_text()[-3000:]}")

    def end_boot_once_converting(self, number: int) -> None:
        """Wait until attempt `number` has started its converter, then end the boot: every process of it killed."""
        converter = self.converting(number)
        wrapper = int((self.job(number) / "pid").read_text().split()[0])
        os.killpg(wrapper, signal.SIGKILL)  # the wrapper leads the attempt's session and group
        os.kill(converter, signal.SIGKILL)  # the step's own group, which a boot's end kills too
        wait_until(lambda: not autostop.running_jobs(str(self.jobs)), what=f"run-{number}'s end with its boot")

    def log(self, number: int) -> list[dict]:
        lines = (self.job(number) / "log").read_text().splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]


def attempts(vm: Vm) -> list[str]:
    return sorted(p.name for p in vm.jobs.iterdir() if not p.name.startswith("."))


def idle_verdict(vm: Vm) -> tuple[str | None, str]:
    """What autostop does with this VM once its idle time has passed, no SSH session open."""
    now = [0.0]
    watcher = autostop.Watcher(str(vm.jobs), free_port("127.0.0.1"), clock=lambda: now[0])
    policy = autostop.Policy("delete", idle_s=1800)
    watcher.poll(policy)
    now[0] += policy.idle_s
    return watcher.poll(policy)


def status_once_the_vm_is_gone(tmp: Path, recorded: dict, gcs) -> list[str]:
    target = json.loads(recorded["target"]) | {"host": "127.0.0.1", "port": free_port("127.0.0.1")}
    target["profile"]["runs_dir"] = gcs.gs("runs")
    shown = tpu_sft(tmp, {**recorded, "target": json.dumps(target)}, "status", env={"STORAGE_EMULATOR_HOST": gcs.url})
    assert "does not answer SSH" in shown.stdout, shown.stdout + shown.stderr
    return shown.stdout.splitlines()


def test_a_run_that_dies_with_every_boot_is_resumed_k_times_then_refused_and_the_vm_left_idle(
    tmp_path, monkeypatch, capsys, maxtext_python, gcs, recorded
):
    vm = Vm(tmp_path, tmp_path / "state", maxtext_python, gcs.gs("runs"), converter="hang")
    vm.died_with_boot_zero()
    for number in range(2, RESUMES + 2):
        said = vm.next_boot(monkeypatch, capsys)
        assert said.endswith(
            f"run-{number - 1} died with its boot (no exit record, started in another boot): started run-{number}"
        ), said
        vm.end_boot_once_converting(number)
        resumed = [e for e in vm.log(number) if e["event"] == "boot_resume"]
        assert [(e["status"], e["since_checkpoint"], e["checkpoint"]) for e in resumed] == [
            ("resumed", number - 1, None)
        ]
    budget = f"runs/{vm.config.model}/post-train/{vm.config.run_name}/{resume_budget.RECORD}"
    # The K+1st boot-resume: started by the start-up, refused by the run itself before any step.
    refused_at = RESUMES + 2
    assert vm.next_boot(monkeypatch, capsys).endswith(f"started run-{refused_at}")
    vm.ended_before_any_step(refused_at)
    assert (vm.job(refused_at) / "exit").read_text().strip() == "1"
    events = vm.log(refused_at)
    assert [e["status"] for e in events if e["event"] == "boot_resume"] == ["refused"]
    assert not [e for e in events if e["event"] == "phase"]  # no step began
    assert list(vm.started.iterdir()) == []
    # The next boot starts nothing: the refused attempt ended on its own.
    assert vm.next_boot(monkeypatch, capsys).endswith(
        f"nothing to resume: run-{refused_at} ended on its own (exit 1): a boot never restarts it"
    )
    assert attempts(vm) == [f"run-{n}" for n in range(1, refused_at + 1)]
    assert len(json.loads(read(gcs, budget))["resumes"]) == RESUMES  # kept in the bucket, where a new VM finds it
    assert idle_verdict(vm) == ("delete", "idle")
    status = status_once_the_vm_is_gone(tmp_path, recorded, gcs)
    assert status[-1].endswith(
        f": stopped: not resumed at boot: {RESUMES} boot-resumes at no checkpoint without a newer checkpoint, the most "
        f"tpu-sft:bootResumes ({RESUMES}) allows: the run dies at every start; read its log, then `pulumi up` starts "
        "it again"
    ), status


def test_a_run_that_failed_on_its_own_is_not_started_by_the_next_boot(
    tmp_path, monkeypatch, capsys, maxtext_python, gcs, recorded
):
    vm = Vm(tmp_path, tmp_path / "state", maxtext_python, gcs.gs("runs"), converter="fail")
    vm.died_with_boot_zero()
    assert vm.next_boot(monkeypatch, capsys).endswith("started run-2")  # run-1 died with boot 0
    wait_until(lambda: (vm.job(2) / "exit").exists(), what="run-2's exit record")
    assert (vm.job(2) / "exit").read_text().strip() == "1"
    summary = vm.log(2)[-1]
    assert (summary["event"], summary["failed_step"]) == ("summary", "convert")
    assert vm.next_boot(monkeypatch, capsys).endswith(
        "nothing to resume: run-2 ended on its own (exit 1): a boot never restarts it"
    )
    assert attempts(vm) == ["run-1", "run-2"]
    assert idle_verdict(vm) == ("delete", "idle")
    status = status_once_the_vm_is_gone(tmp_path, recorded, gcs)
    assert status[-1].endswith(
        ": failed in convert: RuntimeError: the converter failed on its own · resumed at boot: run-1 died with its "
        f"boot (1 of {RESUMES} at no checkpoint)"
    ), status


def test_a_cancelled_run_is_not_started_by_the_next_boot(
    tmp_path, monkeypatch, capsys, target, scratch, remote_user, recorded
):
    """The run task's start over SSH (jobs.start, as claim.start_attempt calls it) and `scripts/tpu-sft cancel`, both
    real, against a local sshd standing for the VM; then a boot."""
    vm = Vm(scratch, Path(target.state_dir), IMAGE_PYTHON, None, converter="hang")
    for made in (vm.state, vm.state / "runs"):
        os.chown(made, remote_user.pw_uid, remote_user.pw_gid)  # the SSH user's, as on the VM
    with connect(target) as conn:
        jobs.start(conn, f"{RUN_JOB_PREFIX}-1", vm.command(), env=vm.env)
    converter = vm.converting(1)
    outputs = standing_at(recorded, target)
    cancelled = tpu_sft(tmp_path, outputs, "cancel", "--grace", "1")
    assert cancelled.stdout.startswith("run run-1 cancelled"), cancelled.stdout + cancelled.stderr
    wait_until(lambda: not Path(f"/proc/{converter}").exists(), what="the cancelled run's converter to end")
    assert vm.next_boot(monkeypatch, capsys).endswith(
        "nothing to resume: run-1 was cancelled: a boot never restarts it"
    )
    assert attempts(vm) == ["run-1"]
    assert idle_verdict(vm) == ("delete", "idle")
    status = tpu_sft(tmp_path, outputs, "status").stdout.splitlines()
    assert status[-1].startswith("run run-1: cancelled · convert running"), status

"""A VM its group recreated resumes the run by itself (docs/restarts.md, "After a recreation"): what the tasks keep on
the data disk (remote/pipeline/resume_kit.py, its host script run here by sh) is what a new boot disk's start-up
restores (workload/run/boot_resume.py `--kit`), and the run's next attempt installs what the boot disk lost before its
command. The jobs are the remote layer's own wrapper (remote/ssh/jobs.py), run here as on a host."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from remote.pipeline import resume_kit
from remote.pipeline.bootstrap.scheduler import install_script
from remote.pipeline.bootstrap.spec import BootstrapSpec
from remote.ssh import jobs
from remote.ssh.target import Target
from tests.ssh_testbed import wait_until
from workload.core.contract import HF_TOKEN_SECRET, JOBS_DIR, RUN_JOB_PREFIX, STATE_DIR
from workload.run import boot_resume

OTHER_BOOT = "00000000-0000-0000-0000-000000000000"
TOKEN = "hf_secret_value_never_printed"


def spec(home: Path) -> BootstrapSpec:
    """Two steps that leave their work in the home, as MaxText's venv does."""
    return BootstrapSpec.from_mapping(
        {
            "steps": [
                {"name": "venv", "command": "mkdir -p venv && echo installed >> venv/count", "timeout_s": 60},
                {"name": "maxtext", "command": "echo maxtext > venv/maxtext", "timeout_s": 60, "after": ["venv"]},
            ],
            "env": {},
        }
    )


def data_disk_kit(tmp_path: Path) -> Path:
    """Where the kit goes on the mounted data disk: its folder is made by the kit's own script, the disk is there."""
    (tmp_path / "data-disk").mkdir()
    return tmp_path / "data-disk" / "kit"


def old_vm(home: Path, kit: Path, *, ended: bool) -> None:
    """The old VM, as the tasks left it: bootstrap done, the code shipped, the token placed, the kit kept, and attempt
    run-1 started (its job and settings records written through the kit's links), dead with its boot or ended."""
    state = home / STATE_DIR
    (state / "code" / "workload").mkdir(parents=True)
    (state / "code" / "workload" / "__main__.py").write_text("print('the workload')\n")
    (state / "secrets").mkdir(mode=0o700)
    (state / "secrets" / HF_TOKEN_SECRET).write_text(TOKEN)
    (state / "secrets" / HF_TOKEN_SECRET).chmod(0o600)
    target = Target(host="vm", user="tpu-sft", key_path="/nonexistent", known_hosts="/nonexistent")
    script = resume_kit.keep_script(STATE_DIR, str(kit), install_script(target, spec(home)))
    run_sh(home, script)
    assert (state / JOBS_DIR).is_symlink() and (state / "runs").is_symlink()
    job = state / JOBS_DIR / f"{RUN_JOB_PREFIX}-1"
    job.mkdir()
    (job / "job.sh").write_text(jobs.job_script('cd "$HOME" && exec echo "the run, venv: $(cat venv/maxtext)"'))
    (job / "run.sh").write_text(jobs._RUN_SH)
    (job / "boot_id").write_text(OTHER_BOOT + "\n")
    if ended:
        (job / "exit").write_text("0\n")
    (state / "runs" / f"{job.name}.json").write_text(json.dumps({"tpu-sft:steps": "20"}))
    (state / "runs" / f"{job.name}.json.until").write_text("keep\n")


def run_sh(home: Path, script: str) -> str:
    done = subprocess.run(["sh", "-c", script], env={**os.environ, "HOME": str(home)}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def new_boot_disk(tmp_path: Path) -> Path:
    """The recreated VM's home: the same user, nothing of the run."""
    home = tmp_path / "new-home"
    home.mkdir(parents=True)
    return home


def start_up(home: Path, kit: Path, capsys) -> str:
    argv = ["--jobs-root", str(home / STATE_DIR / JOBS_DIR), "--attempt-prefix", RUN_JOB_PREFIX]
    old = os.environ["HOME"]
    os.environ["HOME"] = str(home)  # runuser gives the start-up's python the user's home
    try:
        assert boot_resume.main([*argv, "--boot-resumes", "3", "--deadline-hours", "4", "--kit", str(kit)]) == 0
    finally:
        os.environ["HOME"] = old
    return capsys.readouterr().out


def test_a_run_that_died_with_its_vm_resumes_on_the_new_boot_disk_after_installing(tmp_path, capsys):
    kit = data_disk_kit(tmp_path)
    old_vm(tmp_path / "old-home", kit, ended=False)
    home = new_boot_disk(tmp_path)
    line = start_up(home, kit, capsys)
    assert f"a new boot disk: restored jobs, runs, code, secrets from {kit}" in line
    assert "run-1 died with its boot" in line and line.rstrip().endswith("started run-2")
    job = home / STATE_DIR / JOBS_DIR / "run-2"
    wait_until(lambda: (job / "exit").exists(), what="the resumed attempt's exit")
    # The install ran first, inside the job, then the run's own command with the boot-resume flags.
    assert (job / "exit").read_text().strip() == "0"
    assert (job / "log").read_text().splitlines()[-1].startswith("the run, venv: maxtext --boot-resume-of run-1")
    assert (home / "venv" / "count").read_text() == "installed\n"
    assert (home / STATE_DIR / "bootstrap" / "fingerprint").read_text() == spec(home).fingerprint
    # The records are the data disk's: the old VM's, and the new attempt's, written there as they happen.
    assert (kit / JOBS_DIR / "run-2" / "exit").exists() and (kit / "runs" / "run-2.json").exists()
    assert (home / STATE_DIR / "code" / "workload" / "__main__.py").is_file()


def test_the_token_is_kept_and_restored_readable_by_its_user_alone_and_never_said(tmp_path, capsys):
    kit = data_disk_kit(tmp_path)
    old_vm(tmp_path / "old-home", kit, ended=False)
    assert stat.S_IMODE(kit.stat().st_mode) == 0o700
    assert stat.S_IMODE((kit / "secrets" / HF_TOKEN_SECRET).stat().st_mode) == 0o600
    home = new_boot_disk(tmp_path)
    line = start_up(home, kit, capsys)
    token = home / STATE_DIR / "secrets" / HF_TOKEN_SECRET
    assert token.read_text() == TOKEN and stat.S_IMODE(token.stat().st_mode) == 0o600
    assert stat.S_IMODE(token.parent.stat().st_mode) == 0o700
    wait_until(lambda: (home / STATE_DIR / JOBS_DIR / "run-2" / "exit").exists(), what="the attempt's exit")
    assert TOKEN not in line and TOKEN not in (home / STATE_DIR / JOBS_DIR / "run-2" / "job.sh").read_text()
    assert TOKEN not in (kit / "install.sh").read_text()


def test_a_finished_run_starts_nothing_and_installs_nothing_on_a_new_boot_disk(tmp_path, capsys):
    kit = data_disk_kit(tmp_path)
    old_vm(tmp_path / "old-home", kit, ended=True)
    home = new_boot_disk(tmp_path)
    line = start_up(home, kit, capsys)
    assert "nothing to resume: run-1 ended on its own (exit 0)" in line
    assert sorted(p.name for p in (kit / JOBS_DIR).iterdir()) == ["run-1"]
    assert not (home / "venv").exists()


def test_a_boot_disk_that_keeps_the_install_skips_it(tmp_path, capsys):
    """Google's restart of a STANDARD VM in its group keeps the boot disk: the attempt goes straight to the run."""
    kit = data_disk_kit(tmp_path)
    home = tmp_path / "old-home"
    old_vm(home, kit, ended=False)
    (home / "venv").mkdir()
    (home / "venv" / "maxtext").write_text("maxtext\n")
    (home / STATE_DIR / "bootstrap").mkdir()
    (home / STATE_DIR / "bootstrap" / "fingerprint").write_text("installed")
    line = start_up(home, kit, capsys)
    assert "restored" not in line and line.rstrip().endswith("started run-2")
    job = home / STATE_DIR / JOBS_DIR / "run-2"
    wait_until(lambda: (job / "exit").exists(), what="the resumed attempt's exit")
    assert (job / "exit").read_text().strip() == "0" and not (home / "venv" / "count").exists()


def test_a_failed_install_ends_the_attempt_with_an_exit_record_so_no_later_boot_retries(tmp_path, capsys):
    kit = data_disk_kit(tmp_path)
    old_vm(tmp_path / "old-home", kit, ended=False)
    (kit / "install.sh").write_text("echo 'uv: no network' >&2; exit 3\n")
    home = new_boot_disk(tmp_path)
    start_up(home, kit, capsys)
    job = home / STATE_DIR / JOBS_DIR / "run-2"
    wait_until(lambda: (job / "exit").exists(), what="the resumed attempt's exit")
    assert (job / "exit").read_text().strip() == "3" and "uv: no network" in (job / "log").read_text()
    # The next recreation finds an attempt that ended on its own.
    assert "nothing to resume: run-2 ended on its own (exit 3)" in start_up(new_boot_disk(tmp_path / "3"), kit, capsys)


def test_records_already_on_the_boot_disk_stay_there_and_the_task_says_so(tmp_path):
    home, kit = tmp_path / "home", tmp_path / "kit"
    (home / STATE_DIR / JOBS_DIR / "run-1").mkdir(parents=True)
    (home / STATE_DIR / "code").mkdir()
    out = run_sh(home, resume_kit.keep_script(STATE_DIR, str(kit), "true\n"))
    assert resume_kit._ON_BOOT_DISK in out
    assert not (home / STATE_DIR / JOBS_DIR).is_symlink() and (home / STATE_DIR / JOBS_DIR / "run-1").is_dir()


@pytest.mark.parametrize("kit", [None, "/mnt/tpu-sft-data/.tpu-sft-resume"])
def test_the_profile_names_a_kit_only_on_the_data_disk_and_a_plain_vm_s_target_is_unchanged(kit):
    from remote.pipeline.profile import VM, HostProfile

    profile = HostProfile.from_mapping({**VM.to_mapping(), **({"resume_kit": kit} if kit else {})})
    assert profile.resume_kit == kit
    assert ("resume_kit" in profile.to_mapping()) == (kit is not None)
    with pytest.raises(Exception, match="profile.resume_kit"):
        HostProfile.from_mapping({**VM.to_mapping(), "resume_kit": "/home/tpu-sft/kit"})


# The run's first act in a boot-resumed attempt, played with the budget's own rule (workload/run/resume_budget.py
# `decide`), its record in a folder that stands for the bucket: resumed, it dies with the VM (no newer checkpoint);
# refused, it ends with exit 1 and an exit record, as the workload does.
CRASHING_RUN = """
import json, sys, time
from workload.run.resume_budget import BootResume, decide
args = sys.argv[sys.argv.index("--boot-resume-of"):]
resume = BootResume(args[1], int(args[3]), float(args[5]))
path = sys.argv[1]
try:
    record = json.load(open(path))
except OSError:
    record = None
decision = decide(record, None, time.time(), resume)
json.dump(decision.record, open(path, "w"))
print(decision.refusal or "resumed", flush=True)
if decision.refusal:
    sys.exit(1)
time.sleep(300)
"""


def test_a_crash_loop_of_recreations_ends_within_the_budget_and_the_group_at_size_0(
    tmp_path, capsys, mock_stack, monkeypatch
):
    """Every VM the group makes dies before a newer checkpoint: each new boot disk's start-up resumes the run, the
    budget lets tpu-sft:bootResumes of them run and refuses the next, whose attempt ends with an exit record; no
    later boot starts it, autostop finds no job running, and its resize leaves the group at 0, which it keeps."""
    from rehearsal.managed_group import ManagedGroup
    from workload.spend import autostop

    stack = mock_stack({"tpu-sft:provisioningModel": "SPOT"}, remove=("tpu-sft:reservation",))
    group = ManagedGroup.declared(
        stack.one("gcp:compute/instanceGroupManager:InstanceGroupManager").inputs,
        stack.one("gcp:compute/instanceTemplate:InstanceTemplate").inputs,
    )
    [name] = group.vms
    kit = data_disk_kit(tmp_path)
    old_vm(tmp_path / "home-0", kit, ended=False)
    script, bucket = tmp_path / "run.py", tmp_path / "bucket" / "boot-resumes.json"
    script.write_text(CRASHING_RUN)
    bucket.parent.mkdir()
    repo = Path(__file__).resolve().parents[3]
    command = f"PYTHONPATH={repo} exec {sys.executable} {script} {bucket}"
    (kit / JOBS_DIR / "run-1" / "job.sh").write_text(jobs.job_script(command))
    boot_id = tmp_path / "boot_id"
    monkeypatch.setattr(boot_resume, "BOOT_ID", str(boot_id))
    started = []
    for boot in range(1, 10):
        group.preempt(name)  # Google preempts the VM (the attempt dies with it) and the group makes it again
        assert name in group.vms
        boot_id.write_text(f"boot-{boot}\n")
        home = new_boot_disk(tmp_path / f"boot-{boot}")
        line = start_up(home, kit, capsys)
        if "started" not in line:
            break
        job = kit / JOBS_DIR / line.split("started ")[-1].strip()
        started.append(job.name)
        wait_until(lambda job=job: "resumed" in (job / "log").read_text() or (job / "exit").exists(), what="budget")
        if (job / "exit").exists():
            continue
        os.killpg(int((job / "pid").read_text().split()[0]), 9)  # the VM goes, its processes with it, no exit record
    # 3 boot-resumes (tpu-sft:bootResumes, the start-up's --boot-resumes), then the refused one, then nothing.
    assert started == ["run-2", "run-3", "run-4", "run-5"]
    assert (kit / JOBS_DIR / "run-5" / "exit").read_text().strip() == "1"
    assert (
        "3 boot-resumes at no checkpoint without a newer checkpoint" in (kit / JOBS_DIR / "run-5" / "log").read_text()
    )
    assert "nothing to resume: run-5 ended on its own (exit 1)" in line
    # Autostop: no job of this boot runs, so once idle it resizes the group to 0 (its path:
    # tests/workload/spend/test_vm_group_autostop.py), and the group makes nothing more, whatever happens.
    assert autostop.running_jobs(str(kit / JOBS_DIR)) == []
    group.resize(0)
    assert group.vms == {} and group.lost_disks == []

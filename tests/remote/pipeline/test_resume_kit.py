"""A VM its group recreated resumes the run by itself (docs/restarts.md, "After a recreation"): what the tasks keep on
the data disk (remote/pipeline/resume_kit.py, its host script run here by sh) is what a new boot disk's start-up
restores (workload/run/boot_resume.py `--kit`), and the run's next attempt installs what the boot disk lost before its
command. The jobs are the remote layer's own wrapper (remote/ssh/jobs.py), run here as on a host."""

from __future__ import annotations

import json
import os
import stat
import subprocess
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
    kit = tmp_path / "data-disk" / "kit"
    kit.parent.mkdir()
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
    kit = tmp_path / "data-disk" / "kit"
    kit.parent.mkdir()
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
    kit = tmp_path / "data-disk" / "kit"
    kit.parent.mkdir()
    old_vm(tmp_path / "old-home", kit, ended=True)
    home = new_boot_disk(tmp_path)
    line = start_up(home, kit, capsys)
    assert "nothing to resume: run-1 ended on its own (exit 0)" in line
    assert sorted(p.name for p in (kit / JOBS_DIR).iterdir()) == ["run-1"]
    assert not (home / "venv").exists()


def test_a_boot_disk_that_keeps_the_install_skips_it(tmp_path, capsys):
    """Google's restart of a STANDARD VM in its group keeps the boot disk: the attempt goes straight to the run."""
    kit = tmp_path / "data-disk" / "kit"
    kit.parent.mkdir()
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
    kit = tmp_path / "data-disk" / "kit"
    kit.parent.mkdir()
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

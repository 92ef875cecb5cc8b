"""The startup script resumes the run at every boot, once the data disk is mounted (infra/resources/startup.py,
workload/run/boot_resume.py): the resumer copied whole, run as the SSH user with the stack's budget."""

from __future__ import annotations

import subprocess

import pytest

from infra.resources.startup import DEADLINE_HOURS_WITHOUT_CAP, RESUMER_PATH, RESUMER_SOURCE

INSTANCE = "gcp:compute/instance:Instance"


@pytest.fixture
def vm(mock_stack):
    return mock_stack().one(INSTANCE)


def test_the_resume_runs_after_the_mount_and_before_autostop(vm):
    script = vm.inputs["metadata"]["startup-script"]
    mounted = script.index("mount -o discard,defaults")
    resumed = script.index(f"-- python3 {RESUMER_PATH} --jobs-root /home/tpu-sft/.tpu-sft/jobs --attempt-prefix run")
    assert mounted < resumed < script.index("autostop.py --jobs-root")
    assert "runuser -u tpu-sft --" in script  # the jobs are the SSH user's, and so is the token file they read
    assert RESUMER_SOURCE.read_text().rstrip("\n") in script


def script(mock_stack, **overrides: str) -> str:
    return (
        mock_stack({f"tpu-sft:{k}": v for k, v in overrides.items()}).one(INSTANCE).inputs["metadata"]["startup-script"]
    )


def test_the_budget_is_the_stacks_bootresumes_and_maxrunhours(mock_stack):
    assert "--boot-resumes 5 --deadline-hours 8" in script(mock_stack, bootResumes="5", maxRunHours="8")
    assert f"--deadline-hours {DEADLINE_HOURS_WITHOUT_CAP}" in script(mock_stack, maxRunHours="off")


@pytest.mark.parametrize("bad", ["-1", "three", "2.5"])
def test_a_bad_bootresumes_is_one_line_naming_the_key(mock_stack, bad):
    with pytest.raises(Exception) as refused:
        script(mock_stack, bootResumes=bad)
    assert "tpu-sft:bootResumes" in str(refused.value) and len(str(refused.value).splitlines()) == 1


def test_the_script_is_valid_bash(vm):
    subprocess.run(["bash", "-n"], input=vm.inputs["metadata"]["startup-script"], text=True, check=True)


def test_every_slice_host_resumes_at_boot_as_the_vm_does(slice_stack):
    """A slice's hosts have the same jobs on their own boot disks (remote/pipeline/slice_claim.py): each host's start-up
    begins the next attempt, and the attempts meet in the bucket before any step (workload/run/slice_rejoin.py)."""
    script = slice_stack().one("gcp:compute/instanceTemplate:InstanceTemplate").inputs["metadata"]["startup-script"]
    assert "mount -o" not in script  # no data disk on a slice's host
    resumed = script.index(f"-- python3 {RESUMER_PATH} --jobs-root /home/tpu-sft/.tpu-sft/jobs --attempt-prefix run")
    assert resumed < script.index("autostop.py --jobs-root")
    assert RESUMER_SOURCE.read_text().rstrip("\n") in script
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)

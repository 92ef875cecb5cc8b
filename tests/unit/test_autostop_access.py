"""Autostop's place in the program: the watcher in the startup script, its settings as metadata, and the
narrowest permission that lets the VM end itself — one custom role with exactly one permission, bound to the
VM's own service account on that one instance."""

import subprocess

import pytest

from infra.startup import WATCHER_SOURCE
from workload import autostop

INSTANCE = "gcp:compute/instance:Instance"
ROLE = "gcp:projects/iAMCustomRole:IAMCustomRole"
BINDING = "gcp:compute/instanceIAMMember:InstanceIAMMember"
DEFAULT_ACCOUNT = "123456789012-compute@developer.gserviceaccount.com"  # the mock's default compute account


@pytest.mark.parametrize(("action", "permission"), [("stop", "compute.instances.stop"),
                                                    ("delete", "compute.instances.delete")])
def test_one_permission_on_this_instance_only(mock_stack, action, permission):
    stack = mock_stack({"tpu-sft:autostop": action})
    role, binding = stack.one(ROLE), stack.one(BINDING)
    assert role.inputs["permissions"] == [permission]
    assert role.inputs["project"] == "my-tpu-project"
    assert role.inputs["roleId"] == "tpuSftAutostop.dev.tpu_sft_dev_autostop"
    assert binding.inputs == {
        "project": "my-tpu-project", "zone": "us-east5-b", "instanceName": "tpu-sft-dev",
        "role": "projects/my-tpu-project/roles/tpuSftAutostop.dev.tpu_sft_dev_autostop",
        "member": f"serviceAccount:{DEFAULT_ACCOUNT}",
    }
    # Nothing at project level: no IAM member or binding on the project.
    assert not [r for r in stack.resources if r.type.startswith("gcp:projects/iAM") and r.type != ROLE]


def test_bound_to_the_stacks_own_service_account(mock_stack):
    own = "tpu-sft-vm@my-tpu-project.iam.gserviceaccount.com"
    binding = mock_stack({"tpu-sft:serviceAccount": own}).one(BINDING)
    assert binding.inputs["member"] == f"serviceAccount:{own}"


def test_off_grants_nothing_and_tells_the_vm(mock_stack):
    stack = mock_stack({"tpu-sft:autostop": "off"})
    assert stack.of_type(ROLE) == [] and stack.of_type(BINDING) == []
    assert stack.one(INSTANCE).inputs["metadata"][autostop.ACTION_KEY] == "off"


def test_dev_stack_stops_after_idle_minutes_and_asks_pulumi_up_to_start_it_again(mock_stack, dev_config):
    assert (dev_config["tpu-sft:autostop"], dev_config["tpu-sft:idleMinutes"]) == ("stop", "30")
    vm = mock_stack().one(INSTANCE)
    assert vm.inputs["metadata"][autostop.ACTION_KEY] == "stop"
    assert vm.inputs["metadata"][autostop.IDLE_KEY] == "30"
    assert vm.inputs["desiredStatus"] == "RUNNING"


def test_startup_script_mounts_then_starts_the_watcher_with_the_users_jobs(mock_stack, tmp_path):
    script = mock_stack({"tpu-sft:sshUser": "alice"}).one(INSTANCE).inputs["metadata"]["startup-script"]
    assert script.index("mount -o discard") < script.index("autostop.py --jobs-root")
    assert "python3 /var/lib/tpu-sft/autostop.py --jobs-root /home/alice/.tpu-sft/jobs" in script
    assert "ClientAliveInterval 60" in script
    # The watcher is written out whole: run the script's heredoc through a shell and compare.
    body = script[script.index("cat > /var/lib/tpu-sft/autostop.py"):]
    body = body[: body.index("\nTPU_SFT_AUTOSTOP_PY\n") + len("\nTPU_SFT_AUTOSTOP_PY\n")]
    written = tmp_path / "autostop.py"
    subprocess.run(["bash", "-c", body.replace("/var/lib/tpu-sft/autostop.py", str(written), 1)], check=True)
    assert written.read_text() == WATCHER_SOURCE.read_text()
    # The image's python3 runs it: it compiles, and it says what it needs.
    help_text = subprocess.run(["python3", str(written), "--help"], capture_output=True, text=True, check=True).stdout
    assert "--jobs-root" in help_text

"""Autostop's place in the program: the watcher in the startup script, its settings as metadata, and the
narrowest permission that lets the VM end itself — one custom role with exactly one permission, bound to the
VM's own service account on that one instance. The VM deletes itself, never stops: Compute Engine cannot restart a
stopped TPU VM, so `stop` is refused before anything is created."""

import subprocess

import pytest
from pulumi import RunError

from infra.resources.autostop import ROLE_SUFFIX_HEX_DIGITS, role_id_prefix
from infra.resources.startup import WATCHER_SOURCE
from rehearsal.engine import Stack, run_program
from tests.infra.resources.custom_role_namespace import ROLE_ID, CustomRoleNamespace, RoleIdRefused
from workload.spend import autostop

INSTANCE = "gcp:compute/instance:Instance"
ROLE = "gcp:projects/iAMCustomRole:IAMCustomRole"
BINDING = "gcp:compute/instanceIAMMember:InstanceIAMMember"
DEFAULT_ACCOUNT = "123456789012-compute@developer.gserviceaccount.com"  # the mock's default compute account


def test_one_permission_on_this_instance_only(mock_stack):
    stack = mock_stack()
    role, binding = stack.one(ROLE), stack.one(BINDING)
    assert role.inputs["permissions"] == ["compute.instances.delete"]
    assert role.inputs["project"] == "my-tpu-project"
    assert ROLE_ID.fullmatch(role.inputs["roleId"])
    assert binding.inputs == {
        "project": "my-tpu-project",
        "zone": "us-east5-b",
        "instanceName": "tpu-sft-dev",
        "role": f"projects/my-tpu-project/roles/{role.inputs['roleId']}",
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


def test_dev_stack_deletes_its_vm_after_idle_minutes(mock_stack, dev_config):
    """The data disk outlives the VM (tests/infra/resources/test_firewall_and_disk.py), so the next `pulumi up` makes a
    new VM that finds the kept model."""
    assert (dev_config["tpu-sft:autostop"], dev_config["tpu-sft:idleMinutes"]) == ("delete", "30")
    vm = mock_stack().one(INSTANCE)
    assert vm.inputs["metadata"][autostop.ACTION_KEY] == "delete"
    assert vm.inputs["metadata"][autostop.IDLE_KEY] == "30"


def test_startup_script_mounts_then_starts_the_watcher_with_the_users_jobs(mock_stack, tmp_path):
    script = mock_stack({"tpu-sft:sshUser": "alice"}).one(INSTANCE).inputs["metadata"]["startup-script"]
    assert script.index("mount -o discard") < script.index("autostop.py --jobs-root")
    assert "python3 /var/lib/tpu-sft/autostop.py --jobs-root /home/alice/.tpu-sft/jobs" in script
    assert "ClientAliveInterval 60" in script
    # The watcher is written out whole: run the script's heredoc through a shell and compare.
    body = script[script.index("cat > /var/lib/tpu-sft/autostop.py") :]
    body = body[: body.index("\nTPU_SFT_AUTOSTOP_PY\n") + len("\nTPU_SFT_AUTOSTOP_PY\n")]
    written = tmp_path / "autostop.py"
    subprocess.run(["bash", "-c", body.replace("/var/lib/tpu-sft/autostop.py", str(written), 1)], check=True)
    assert written.read_text() == WATCHER_SOURCE.read_text()
    # The image's python3 runs it: it compiles, and it says what it needs.
    help_text = subprocess.run(["python3", str(written), "--help"], capture_output=True, text=True, check=True).stdout
    assert "--jobs-root" in help_text


def _apply(namespace: CustomRoleNamespace, before: set[tuple[str, str]], stack) -> set[tuple[str, str]]:
    """What `pulumi up` does to the project's custom roles: create the declared ones that are new, then delete
    those no longer declared (a changed roleId is a replace, create before delete); returns what now exists."""
    declared = {(r.inputs["project"], r.inputs["roleId"]) for r in stack.of_type(ROLE)}
    for project, role_id in sorted(declared - before):
        namespace.provider_create(project, role_id)
    for project, role_id in sorted(before - declared):
        namespace.delete(project, role_id)
    return declared


@pytest.mark.parametrize("days_later", [1, 8, 36])
@pytest.mark.parametrize("gone_by", ["destroy", "autostop off"])
def test_the_role_can_be_made_again_any_day_after_it_was_deleted(mock_stack, days_later, gone_by):
    """A deleted custom role's ID stays taken for 37 days (undeletable for the first 7): each creation needs an ID
    of its own, or `pulumi up` a week after `pulumi destroy` (or after autostop off) fails."""
    namespace = CustomRoleNamespace()
    existing = _apply(namespace, set(), mock_stack())
    if gone_by == "destroy":
        for project, role_id in existing:
            namespace.delete(project, role_id)
        existing = set()
    else:
        existing = _apply(namespace, existing, mock_stack({"tpu-sft:autostop": "off"}))
    assert existing == set() and namespace.active == set()
    namespace.today = days_later
    try:
        again = _apply(namespace, existing, mock_stack())
    except RoleIdRefused as refused:
        pytest.fail(f"pulumi up {days_later} days after {gone_by}: {refused}")
    assert len(again) == 1 and namespace.active == again


def test_a_long_stack_and_instance_name_still_give_a_valid_role_id():
    prefix = role_id_prefix("a-stack-" + "s" * 60, "tpu-sft-" + "n" * 60)
    assert ROLE_ID.fullmatch(prefix + "0" * ROLE_SUFFIX_HEX_DIGITS), prefix


FLEX_START_VM = {"tpu-sft:provisioningModel": "FLEX_START", "tpu-sft:maxRunHours": "4"}


@pytest.mark.parametrize("model", [{}, FLEX_START_VM])
def test_stop_is_refused_in_one_line_with_the_fix_before_anything_is_created(mock_stack, dev_config, model):
    """Compute Engine cannot restart a stopped TPU VM: autostop's stop, which this program once shipped, would leave
    a VM billing its disks that the next `pulumi up` could not start. A stack that still says stop is told why and
    what to set, not that stop is not a choice."""
    declared = Stack()
    config = {k: v for k, v in dev_config.items() if not (model and k == "tpu-sft:reservation")}
    with pytest.raises(RunError) as refused:
        run_program({**config, **model, "tpu-sft:autostop": "stop"}, into=declared)
    assert str(refused.value) == (
        "tpu-sft:autostop: stop: Compute Engine cannot restart a stopped TPU VM (ct6e), so the next `pulumi up` could "
        "not start it. Fix: pulumi config set tpu-sft:autostop delete (the data disk and the checkpoint bucket stay; "
        "the next `pulumi up` makes a new VM)"
    )
    assert declared.resources == []
    deleting = mock_stack({**model, "tpu-sft:autostop": "delete"}, remove=("tpu-sft:reservation",) if model else ())
    assert deleting.one(ROLE).inputs["permissions"] == ["compute.instances.delete"]

"""Autostop on a Spot VM in its group of one (tpu-sft:recovery auto, infra/resources/vm_group.py): once idle, the VM's
watcher resizes its group to 0, as a slice's hosts do, and never deletes itself (the group would repair it); the
managed-group stand-in then makes no VM until a `pulumi up` sets the size again. The watcher runs as the startup
script runs it, with what the program declared: the template's metadata, the grant to resize, the bucket its report
goes to (the storage emulator behind the IAM stand-in), and the Compute Engine stand-in (tests/workload/gce_standin.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra.config.stack_file import read_stack_config
from rehearsal import storage_iam
from rehearsal.engine import run_program
from rehearsal.managed_group import ManagedGroup
from rehearsal.storage_iam import DeclaredStorage
from tests.fixtures.mock_engine import DEV_STACK
from tests.ssh_testbed import wait_until
from tests.workload.gce_standin import TOKEN, DeclaredGroupAccess, GceStandin
from workload.spend import autostop

WATCHER = Path(autostop.__file__)
GROUP = "gcp:compute/instanceGroupManager:InstanceGroupManager"
TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
IDLE_S = 1.2
UNUSED_PORT = 1  # tcpmux: no SSH session ever lands there


@pytest.fixture(scope="module")
def spot_stack(gcloud_home):
    public_key = (gcloud_home / ".ssh/google_compute_engine.pub").read_text().strip()
    config = {
        **read_stack_config(DEV_STACK),
        "tpu-sft:sshPublicKey": public_key,
        "tpu-sft:provisioningModel": "SPOT",
    }
    del config["tpu-sft:reservation"]
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HOME", str(gcloud_home))
        return run_program(config), config["gcp:project"]


def test_an_idle_vm_in_its_group_resizes_the_group_to_0_and_deletes_nothing(spot_stack, tmp_path):
    stack, project = spot_stack
    metadata = stack.one(TEMPLATE).inputs["metadata"]
    storage = DeclaredStorage.of(stack)
    iam = storage_iam.start(storage, tmp_path / "emulator.log")
    attributes = {k: v for k, v in metadata.items() if k.startswith("tpu-sft-")}
    standin = GceStandin(
        instance=metadata[autostop.HOSTS_KEY],  # its one host: tpu-sft-dev-01
        attributes={**attributes, autostop.IDLE_KEY: str(IDLE_S / 60)},
        group_access=DeclaredGroupAccess.of(stack, project),
    ).start()
    env = {
        "PATH": os.environ["PATH"],
        "GCE_METADATA_HOST": standin.host,
        "TPU_SFT_COMPUTE_API": f"http://{standin.host}",
        "TPU_SFT_STORAGE_API": iam.url(storage.host),
    }
    log = tmp_path / "autostop.log"
    command = [sys.executable, str(WATCHER), "--jobs-root", str(tmp_path / "jobs"), "--ssh-port", str(UNUSED_PORT)]
    watcher: subprocess.Popen | None = None
    try:
        with open(log, "w") as out:
            watcher = subprocess.Popen(
                [*command, "--poll-seconds", "0.2"], stdout=out, stderr=subprocess.STDOUT, env=env, cwd="/"
            )
        running = watcher
        wait_until(lambda: running.poll() is not None, 300, "the watcher to resize its group and exit")
        assert watcher.returncode == 0, log.read_text()
        assert standin.resizes == [("tpu-sft-dev", 0)]
        # What the group then does (rehearsal/managed_group.py): its VM deleted, none made again, the disk kept; the
        # next `pulumi up` declares size 1 again and the VM comes back on the same disk.
        group = ManagedGroup.declared(stack.one(GROUP).inputs, stack.one(TEMPLATE).inputs)
        [vm] = group.vms.values()
        for name, size in standin.resizes:
            assert name == group.name
            group.resize(size)
        assert group.vms == {} and group.lost_disks == []
        group.resize(1)
        assert group.vms[vm.name].disks == vm.disks
        assert [call for call in standin.calls if call[0] == "DELETE"] == []  # the VM was never deleted
        text = log.read_text()
        assert "asking the API to resize group tpu-sft-dev to 0 hosts" in text and TOKEN not in text
        assert iam.refusals == []
    finally:
        if watcher is not None and watcher.poll() is None:
            watcher.kill()
            watcher.wait()
        standin.stop()
        iam.stop()

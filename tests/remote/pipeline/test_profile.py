"""Host profiles (remote/pipeline/profile.py): a slice's host is the VM less its data disk, keeping to the bucket."""

import pytest

from remote.pipeline.profile import VM, HostProfile, slice_host
from remote.ssh.errors import TargetError

BUCKET = "gs://my-tpu-project-tpu-sft-dev-runs"


def test_a_slice_host_is_the_vm_without_a_disk_keeping_to_the_bucket():
    host = slice_host(f"{BUCKET}/kept", f"{BUCKET}/runs")
    assert host.to_mapping() == {
        **VM.to_mapping(),  # the seed's install, /dev/shm scratch
        "name": "slice-host",
        "kept_dir": f"{BUCKET}/kept",
        "runs_dir": f"{BUCKET}/runs",
        "required_mount": None,  # no data disk to wait for
    }
    assert HostProfile.from_mapping(host.to_mapping()) == host  # as the remote CLI reads it from the target


@pytest.mark.parametrize("kept_dir", ["gs://", "gs://b/kept\n", "kept", "s3://b/kept"])
def test_a_kept_dir_is_a_bucket_url_or_an_absolute_path(kept_dir):
    with pytest.raises(TargetError, match="^target.profile.kept_dir: "):
        HostProfile(kept_dir=kept_dir)


def test_the_vms_copy_in_the_bucket_travels_in_the_target_and_no_copy_leaves_the_target_as_it_was():
    vm = HostProfile(kept_copy_dir=f"{BUCKET}/kept")
    assert vm.to_mapping()["kept_copy_dir"] == f"{BUCKET}/kept"
    assert HostProfile.from_mapping(vm.to_mapping()) == vm
    # A target without the field (a stack deployed before the copy) still reads; without a copy it is not written,
    # so the slice's and the rehearsal host's targets, and the tasks that hold them, do not change.
    assert "kept_copy_dir" not in VM.to_mapping() and HostProfile.from_mapping(VM.to_mapping()) == VM


@pytest.mark.parametrize("copy", ["gs://", "/mnt/copy", "gs://b/kept\n"])
def test_a_kept_copy_dir_is_a_bucket_url(copy):
    with pytest.raises(TargetError, match="^target.profile.kept_copy_dir: "):
        HostProfile(kept_copy_dir=copy)

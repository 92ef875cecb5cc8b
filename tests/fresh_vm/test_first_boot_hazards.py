"""A new VM is hard to reach at first: each hazard is met by the first `pulumi up`, not avoided."""

from __future__ import annotations

from rehearsal.fresh_vm import evidence
from tests.fresh_vm.conftest import USER


def test_the_first_ssh_attempt_comes_before_sshd_answers(fresh_vm):
    run = fresh_vm.run
    attempts = evidence.failed_attempts(run)
    assert attempts, "the client never failed to connect: the VM was not new when it tried"
    assert attempts[0].refused == "connection"
    assert attempts[0].at < evidence.sshd_listening_at(run)
    assert evidence.first_connected_at(run) > evidence.sshd_listening_at(run)


def test_authentication_is_refused_until_the_guest_agent_made_the_user(fresh_vm):
    run = fresh_vm.run
    created = evidence.user_created_at(run)
    refused = [a for a in evidence.failed_attempts(run) if a.refused == "auth"]
    assert refused and all(a.at < created for a in refused)
    assert any(evidence.sshd_listening_at(run) < t < created for t in evidence.sshd_refused_unknown_user_at(run, USER))
    assert evidence.first_connected_at(run) > created


def test_the_host_key_is_made_at_first_boot_and_is_the_one_pinned(fresh_vm):
    run = fresh_vm.run
    assert not evidence.image_has_host_keys(run)
    generated = evidence.host_key_generated_at(run)
    assert generated is not None and run.vm_created_at < generated < evidence.sshd_listening_at(run)
    assert evidence.pinned_key_is_the_vms(run)


def test_the_startup_script_formats_the_data_disk_at_first_boot_only(fresh_vm):
    first, *later = fresh_vm.run.boots
    assert first.disk_uuid_before is None and first.disk_uuid_after
    assert later and all(b.disk_uuid_before == first.disk_uuid_after == b.disk_uuid_after for b in later)
    for boot in (first, *later):
        exited = boot.first("startup-script-exit")
        assert exited and exited[1] == "0", f"boot {boot.number}'s startup script failed; see {boot.console}"


def test_the_kept_model_survives_delete_and_recreate(fresh_vm):
    run = fresh_vm.run
    assert run.summary["kept_dir"].startswith("/mnt/tpu-sft-data/")
    assert {"manifest.json", "loss.png"} <= set(run.kept_after_recreate)

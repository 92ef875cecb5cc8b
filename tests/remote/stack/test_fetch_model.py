"""`scripts/tpu-sft fetch-model` from the VM's data disk over SSH (a real sshd stands for the VM): a link cut
mid-file, then the same command again continues the partial file and leaves the verified ones; a file that differs
from the manifest is refused and not kept."""

import json
from dataclasses import replace

import pytest

from remote.ssh.errors import EXIT_VERIFY, Unreachable
from remote.stack.gcs import Gcs
from remote.stack.model import fetch_model
from remote.stack.outputs import StackOutputs
from tests.fixtures.sshd import relayed
from tests.remote.stack_commands import kept_model, standing_at, tpu_sft


def same_files(model, dest) -> bool:
    files = [entry["path"] for entry in json.loads((model / "manifest.json").read_text())["files"]]
    return all((dest / path).read_bytes() == (model / path).read_bytes() for path in [*files, "manifest.json"])


def test_a_fetch_cut_mid_file_continues_where_it_stopped(sshd_host, target, scratch, tmp_path, make_proxy, recorded):
    model = kept_model(scratch / "kept", size=16 << 20)  # more than SSH's window buffers before the cut
    proxy = make_proxy((sshd_host.sshd.address, sshd_host.sshd.port))
    through = relayed(target, proxy, tmp_path / "kh")
    dest = tmp_path / "model"
    cut_at: list[int] = []

    def cut_in_the_weights(name, done, size):
        if name.endswith("model.safetensors") and not cut_at:
            cut_at.append(done)
            proxy.close()

    outputs = StackOutputs("", standing_at(recorded, through, modelDir=str(model)))
    with pytest.raises(Unreachable, match="run it again to continue"):
        fetch_model(outputs, dest, Gcs("http://127.0.0.1:9", None), progress=cut_in_the_weights)
    assert not (dest / "manifest.json").exists()  # written last: this folder does not hold a model yet
    assert (dest / "hf-model" / "config.json").is_file() and (dest / "loss.png").is_file()
    assert (dest / "hf-model" / ".model.safetensors.partial").stat().st_size >= cut_at[0]

    again = tpu_sft(tmp_path, standing_at(recorded, target, modelDir=str(model)), "fetch-model", str(dest))
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == (
        f"the model from {target.host}:{model} is in {dest}: 3 files match its manifest "
        "(1 fetched now, 1 of them resumed; the rest were here already)"
    )
    assert same_files(model, dest) and not list(dest.rglob("*.partial"))
    third = tpu_sft(tmp_path, standing_at(recorded, target, modelDir=str(model)), "fetch-model", str(dest))
    assert "(0 fetched now, 0 of them resumed" in third.stdout


def test_the_latest_kept_model_by_default_into_models_run(target, scratch, tmp_path, recorded):
    kept_model(scratch / "kept", "run-old")
    model = kept_model(scratch / "kept", "run-new")
    outputs = standing_at(recorded, target)
    profile = json.loads(outputs["target"])
    profile["profile"]["kept_dir"] = str(scratch / "kept")
    dest = tmp_path / "workdir"
    with pytest.MonkeyPatch.context() as cwd:
        dest.mkdir()
        cwd.chdir(dest)
        fetched = fetch_model(StackOutputs("", {**outputs, "target": json.dumps(profile)}), None, Gcs("", None))
    assert fetched.local_dir == "models/run-new" and same_files(model, dest / "models" / "run-new")


def test_a_file_that_differs_from_its_manifest_is_refused(target, scratch, tmp_path, recorded):
    model = kept_model(scratch / "kept")
    (model / "hf-model" / "config.json").write_text('{"model_type": "tampered"}\n')
    dest = tmp_path / "model"
    result = tpu_sft(tmp_path, standing_at(recorded, target, modelDir=str(model)), "fetch-model", str(dest))
    assert result.returncode == EXIT_VERIFY
    [line] = [line for line in result.stderr.splitlines() if line.startswith("error")]  # the others: progress
    assert line.startswith(f"error: {target.host}:{model}/hf-model/config.json is 27 bytes sha256 ")
    assert line.endswith("the kept copy is damaged; nothing of it was kept")
    assert not (dest / "hf-model" / "config.json").exists() and not (dest / "manifest.json").exists()


def test_the_vms_copy_in_the_bucket_first_the_vm_only_while_it_lacks_one(target, scratch, tmp_path, recorded, gcs):
    """A VM copies its kept model to gs://<bucket>/kept/<run>/ (workload/run/kept.py `copy`): a model kept before
    that, with no copy there, is fetched from the data disk; once the copy is there, from the bucket."""
    model = kept_model(scratch / "kept", "run-copied")
    prefix = f"kept-{tmp_path.name}"
    copying = replace(target, profile=replace(target.profile, kept_copy_dir=gcs.gs(prefix)))
    outputs = standing_at(recorded, copying, modelDir=str(model))
    env = {"STORAGE_EMULATOR_HOST": gcs.url}
    from_vm = tpu_sft(tmp_path, outputs, "fetch-model", str(tmp_path / "a"), env=env)
    assert from_vm.returncode == 0, from_vm.stderr
    assert from_vm.stdout.startswith(f"the model from {target.host}:{model} is in {tmp_path / 'a'}: 3 files match")
    gcs.upload(model, f"{prefix}/run-copied")
    from_bucket = tpu_sft(tmp_path, outputs, "fetch-model", str(tmp_path / "b"), env=env)
    assert from_bucket.returncode == 0, from_bucket.stderr
    assert from_bucket.stdout.startswith(f"the model from {gcs.gs(prefix, 'run-copied')} is in {tmp_path / 'b'}")
    assert same_files(model, tmp_path / "a") and same_files(model, tmp_path / "b")

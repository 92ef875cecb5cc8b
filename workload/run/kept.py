"""A model kept on the data disk for these inputs: found, verified and reported instead of redone.

The keep step writes `manifest.json` with, per step, the fingerprint of that step's own inputs (settings, run
name, tiny model spec, export fix, verify prompt, where it is kept) and the facts it reported, the settings that
name the run (stack-keyed: what the published model card quotes), and every file's size and sha256. A new VM
attached to the same data disk has no done-markers (they were on the lost VM's scratch). Each phase's job knows
the inputs of its own steps only (a convert job is not given train's settings), so it looks for a kept model
whose recorded inputs equal its own for exactly those steps and whose files still match: the inputs, never the
VM, decide what may be reused.

A slice keeps to its bucket (gs://): there the files are checked by name and size, not sha256 (that would
download the model; Cloud Storage checks each upload's CRC32C itself), and the manifest is written last. A VM keeps
to its data disk and copies the model to the same place in the bucket (`copy`), so that it can be fetched after the VM
is gone (remote/stack/model.py), with every file's sha256 in the manifest to check it by.
"""

from __future__ import annotations

import json
from typing import Any

from workload.launch.proc import StepFailed
from workload.run import storage
from workload.run.fingerprint import manifest_mismatches

MANIFEST = "manifest.json"
ADAPTER = "hf-adapter"  # a LoRA run's PEFT adapter, beside the merged model (hf-model)


def read(kept_dir: str) -> dict[str, Any] | None:
    try:
        text = storage.read_text(storage.join(kept_dir, MANIFEST))
        found = None if text is None else json.loads(text)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def made_from(found: dict[str, Any], inputs: dict[str, str]) -> bool:
    """Whether a manifest records exactly `inputs` (step → fingerprint) for each of those steps."""
    recorded = found.get("steps")
    return isinstance(recorded, dict) and all(
        isinstance(recorded.get(step), dict) and recorded[step].get("inputs") == fingerprint
        for step, fingerprint in inputs.items()
    )


def verified(kept_dir: str, inputs: dict[str, str]) -> tuple[dict[str, Any] | None, str]:
    """(the manifest, "") when the model kept in `kept_dir` was made from `inputs` and is intact; (None, why not)."""
    found = read(kept_dir)
    if found is None:
        return None, "no kept model"
    if not made_from(found, inputs):
        return None, "the kept model was made from other inputs"
    problems = _mismatches(kept_dir, found.get("files", []))
    if problems:
        return None, f"the kept model differs from its manifest ({problems[0]})"
    return found, ""


def _mismatches(kept_dir: str, entries: list[dict[str, Any]]) -> list[str]:
    if not storage.is_remote(kept_dir):
        return manifest_mismatches(kept_dir, entries)
    sizes = storage.files(kept_dir)
    return [
        f"{e['path']}: missing" if e["path"] not in sizes else f"{e['path']}: size {sizes[e['path']]} != {e['size']}"
        for e in entries
        if sizes.get(e["path"]) != e["size"]
    ]


def find(preferred_dir: str, inputs: dict[str, str]) -> tuple[str, dict[str, Any]] | None:
    """A verified kept model made from `inputs`: in `preferred_dir` (this run's) first, then beside it — a job
    that does not know the run's name (convert) finds it there."""
    parent = preferred_dir.rstrip("/").rsplit("/", 1)[0]
    others = [storage.join(parent, name) for name in storage.list_dirs(parent)]
    for candidate in [preferred_dir, *(d for d in others if d != preferred_dir)]:
        found = read(candidate)
        if found is not None and made_from(found, inputs):  # hash the files only of a model that could match
            checked, _ = verified(candidate, inputs)
            if checked is not None:
                return candidate, checked
    return None


def facts(found: dict[str, Any], steps: list[str]) -> dict[str, Any]:
    """What those steps reported when the kept model was made."""
    return {key: value for step in steps for key, value in found["steps"].get(step, {}).get("facts", {}).items()}


def copy(kept_dir: str, copy_dir: str) -> None:
    """The model kept in `kept_dir` (the data disk) to `copy_dir` (the bucket) too, replacing what was there, its
    manifest last: a reader that finds the manifest there finds every file it lists."""
    try:
        storage.upload_tree(kept_dir, copy_dir, last=MANIFEST)
    except Exception as error:  # noqa: BLE001  gcsfs raises OSError, ValueError or its own HttpError
        said = (str(error).splitlines() or [type(error).__name__])[0]
        raise StepFailed(
            f"the model is kept in {kept_dir}, but its copy to {copy_dir} failed ({type(error).__name__}: {said}); "
            "the VM's service account needs roles/storage.objectUser on the bucket: run `pulumi up` again"
        ) from None

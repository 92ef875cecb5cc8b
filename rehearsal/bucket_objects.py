"""What pulumi-gcp's `BucketObject` does on `pulumi up`, for the rehearsals: each object the program declared (a local
dataset's copies, infra/resources/data_access.py) is written into the emulator's bucket before the post-deploy tasks
run, as the tasks depend on those objects.

It stands for the provider's create: the asset's bytes uploaded under the declared name, as the person who runs
`pulumi up` (the project's owner: the emulator's own, unchecked address, rehearsal/gcs_emulator.py). The asset is
read as the engine recorded it (rehearsal/engine.py): a `FileAsset`'s `path`, relative to the project directory
as Pulumi resolves it, or a `StringAsset`'s `text`. The VM then reads the objects with its own identity, through
the IAM stand-in (rehearsal/storage_iam.py), which is where the rules are enforced.

Enforced: the object goes into the bucket the program declared it in, which must be the stand-in's (another is
refused, never written elsewhere); an asset of another kind (remote, archive) is refused.
Not enforced: the owner's own permissions (not checked: a person who runs `pulumi up` on their project may write
its bucket); Pulumi's diff (an object is written again at every call, harmless: the same name holds the same
bytes) and the deletion of an object the program no longer declares; what the provider sends beside the bytes
(content type, MD5 and CRC32C checks, metadata, storage class, customer-managed keys).
"""

from __future__ import annotations

from dataclasses import dataclass

from rehearsal.engine import ROOT, Stack
from rehearsal.gcs_emulator import GcsEmulator

BUCKET_OBJECT = "gcp:storage/bucketObject:BucketObject"


class NotUploadable(ValueError):
    """A declared object this stand-in cannot write as the provider would."""


@dataclass(frozen=True)
class DeclaredObject:
    bucket: str
    name: str
    data: bytes


def declared_objects(stack: Stack) -> list[DeclaredObject]:
    """Every BucketObject the program declared, with the bytes its asset holds."""
    found = []
    for resource in stack.of_type(BUCKET_OBJECT):
        inputs = resource.inputs
        source = inputs.get("source") or {}
        if "path" in source:
            data = (ROOT / source["path"]).read_bytes()  # Pulumi reads a relative path from the project directory
        elif "text" in source:
            data = source["text"].encode()
        else:
            raise NotUploadable(f"{resource.name}: its source is neither a FileAsset nor a StringAsset")
        found.append(DeclaredObject(inputs["bucket"], inputs["name"], data))
    return found


def upload_declared(stack: Stack, emulator: GcsEmulator) -> list[DeclaredObject]:
    """Write every declared object into the emulator's bucket, as the owner; returns what was written."""
    objects = declared_objects(stack)
    for declared in objects:  # every one checked before any is written
        if declared.bucket != emulator.bucket:
            raise NotUploadable(f"{declared.name} is declared in bucket {declared.bucket}, not {emulator.bucket}")
    for declared in objects:
        emulator.put(declared.name, declared.data)
    return objects

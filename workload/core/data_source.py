"""Where a dataset is: a Hugging Face Hub id, Cloud Storage files, or files on this machine (docs/data.md).

`tpu-sft:dataset` and `tpu-sft:evalData` name one of three places, told apart by their form alone (no file is read
here, so a value parses the same on every machine):

- `gs://BUCKET/PATH.jsonl` or `.parquet` (the object part may hold `*`): read on the VM with the VM's own identity;
- a path: absolute, `./…`, `../…` or `~/…`, or any value ending in `.jsonl`, `.json` or `.parquet`: a file, or a
  folder's files of one format (`./data/*.jsonl`). `pulumi up` copies it into the stack's bucket by content
  hash (infra/config/local_data.py); on the VM (and in tests) a path is the host's own;
- otherwise a Hub id, `owner/name`, as MaxText's sft.yml reads UltraChat.

A file dataset goes to MaxText's HF pipeline as `hf_path=json|parquet` with the files in `hf_train_files` /
`hf_eval_files` (maxtext/input_pipeline/hf_data_processing.py: `datasets.load_dataset(hf_path, data_files=…)`),
whose only split is `train`. Its held-out examples are a file of their own, or a share of the training file held
out by a fixed seed when `pulumi up` copies it (`evalData 5%`).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

# The file formats MaxText's HF pipeline reads through `datasets`' packaged builders, by extension.
FORMATS = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}
HUB, GCS, LOCAL = "hub", "gcs", "local"
# ASCII classes only, matched whole (as workload/core/config.py's patterns): these values reach MaxText's argv.
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
# Cloud Storage bucket names: 3-63 lower-case letters, digits, '-', '_', '.' (dotted names up to 222; rare here).
_BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]")
_OBJECT = re.compile(r"[A-Za-z0-9_.*/=+-]+")
# A local path: no quote, space, '=' or shell/OmegaConf metacharacter, since it reaches MaxText's argv on the host.
_PATH = re.compile(r"[A-Za-z0-9_./~+-]+")
_SHARE = re.compile(r"([0-9]{1,2}(\.[0-9]+)?)%")
SHARE_SEED = 40  # the fixed seed that picks a held-out share's rows: the same file always splits the same way


@dataclass(frozen=True)
class DataSource:
    """One parsed location. `format` is "json" or "parquet" for files (from the extension), None for a Hub id."""

    kind: str
    location: str
    format: str | None = None

    @property
    def bucket(self) -> str | None:
        return self.location.removeprefix("gs://").split("/", 1)[0] if self.kind == GCS else None

    @property
    def is_file(self) -> bool:
        return self.kind != HUB


class BadLocation(ValueError):
    """The value is none of the three forms; the message says which form it came closest to and why."""


def _format_of(path: str) -> str | None:
    return next((fmt for ext, fmt in FORMATS.items() if path.endswith(ext)), None)


def _looks_local(value: str) -> bool:
    return value.startswith(("/", "./", "../", "~/")) or _format_of(value) is not None


def parse_source(value: object) -> DataSource:
    """A dataset location, or BadLocation."""
    if not isinstance(value, str) or not value:
        raise BadLocation(f"{value!r} is not a Hub id, a gs:// path or a local path")
    if value.startswith("gs://"):
        bucket, _, path = value.removeprefix("gs://").partition("/")
        if not _BUCKET.fullmatch(bucket):
            raise BadLocation(f"{bucket!r} in {value!r} is not a Cloud Storage bucket name")
        fmt = _format_of(path)
        if not path or not _OBJECT.fullmatch(path) or fmt is None:
            raise BadLocation(f"{value!r} does not name .jsonl or .parquet objects (gs://BUCKET/PATH/*.jsonl)")
        return DataSource(GCS, value, fmt)
    if _looks_local(value):
        if not _PATH.fullmatch(value.replace("*", "")):
            raise BadLocation(f"{value!r} is not a plain path (letters, digits, '_', '.', '/', '~', '+', '-', '*')")
        fmt = _format_of(value)
        if fmt is None:
            raise BadLocation(f"{value!r} does not name .jsonl or .parquet files (a folder's: ./data/*.jsonl)")
        return DataSource(LOCAL, value, fmt)
    if _HUB_ID.fullmatch(value):
        return DataSource(HUB, value)
    raise BadLocation(f"{value!r} is not a Hub id (owner/name), a gs:// path or a local path (./data.jsonl)")


TEMPLATE_EXTENSIONS = (".jinja", ".j2")  # what MaxText's load_chat_template_from_file reads as a template's text


def parse_template(value: object) -> DataSource:
    """A chat template file: `gs://BUCKET/PATH.jinja` or a local path ending in .jinja or .j2, or BadLocation."""
    if not isinstance(value, str) or not value.endswith(TEMPLATE_EXTENSIONS):
        raise BadLocation(f"{value!r} is not a .jinja or .j2 file (gs://BUCKET/PATH.jinja or ./template.jinja)")
    if value.startswith("gs://"):
        bucket, _, path = value.removeprefix("gs://").partition("/")
        if not _BUCKET.fullmatch(bucket) or not _OBJECT.fullmatch(path) or "*" in path:
            raise BadLocation(f"{value!r} is not one Cloud Storage object (gs://BUCKET/PATH.jinja)")
        return DataSource(GCS, value)
    if not _PATH.fullmatch(value):
        raise BadLocation(f"{value!r} is not a plain path (letters, digits, '_', '.', '/', '~', '+', '-')")
    return DataSource(LOCAL, value)


def parse_share(value: object) -> float | None:
    """`5%` → 0.05: a share held out of the training file; None if the value is no share."""
    match = _SHARE.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        return None
    share = float(match.group(1)) / 100
    return share if 0 < share <= 0.5 else None


def held_out_rows(count: int, share: float) -> set[int]:
    """Which of `count` rows a share holds out: `share` of them, at least one, picked by the fixed seed, so the same
    file always splits the same way wherever it is cut (`pulumi up`, the data preflight)."""
    return set(random.Random(SHARE_SEED).sample(range(count), max(1, round(count * share))))

"""A local dataset, copied into the stack's bucket by content hash, and checked before anything is declared.

`tpu-sft:dataset ./chats.jsonl` (or `./data/*.parquet`, `~/…`, an absolute path) names files on the machine that
runs `pulumi up`, relative to the project directory. `resolve` reads them once and answers what the program
declares (infra/resources/data_access.py) and what every phase is handed:

- each file becomes an object `data/<hash>/<name>` of the stack's bucket, the hash of what is copied: the same file
  is the same object (Pulumi sends it once), a changed file a new one;
- the pipeline's `dataset` (and `evalData`) become those objects' `gs://` URL, so a changed file changes the train
  phase's inputs (`PipelineConfig.phase_settings`), re-running train and export, and the same file changes nothing;
- `evalData 5%` holds that share of the rows out, picked by a fixed seed (workload/core/data_source.py SHARE_SEED):
  two objects, the training rows and the held-out ones (JSON Lines only: cutting Parquet needs pyarrow, which the
  project's venv has not);
- a local `chatTemplate` is copied the same way;
- JSON Lines are checked row by row (the first `CHECKED_ROWS`; workload/core/conversations.py) with the stack's
  columns: the first bad row stops the preview in one line. Parquet is checked by `scripts/preflight --data`.

`plan` and `scripts/preflight` resolve the same way, so their answers are `pulumi up`'s.
"""

from __future__ import annotations

import glob
import hashlib
import os
from dataclasses import dataclass, replace
from pathlib import Path

from workload.core.config import ConfigError, PipelineConfig, set_hint, stack_key
from workload.core.conversations import columns_problem, first_bad_row
from workload.core.data_source import LOCAL, held_out_rows, parse_share, parse_source, parse_template

DATA_PREFIX = "data"  # where the copies go in the stack's bucket, beside runs/ and kept/ (no lifecycle rule)
CHECKED_ROWS = 10_000  # the preview reads at most this many rows of each JSON Lines file
_HASH_CHARS = 32  # of sha256's hex: 128 bits, ample to tell files apart


@dataclass(frozen=True)
class Upload:
    """One object the program declares: its name in the bucket and either a local file or the text to write."""

    object_name: str
    path: str | None = None
    content: str | None = None


@dataclass(frozen=True)
class LocalData:
    pipeline: PipelineConfig  # with every local location replaced by its copy's gs:// URL
    uploads: tuple[Upload, ...] = ()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:_HASH_CHARS]


def _file_sha(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:_HASH_CHARS]


def local_files(key: str, location: str) -> list[str]:
    """The files a local location names (a pattern's in name order), or ConfigError."""
    pattern = os.path.expanduser(location)
    files = sorted(f for f in glob.glob(pattern) if os.path.isfile(f))
    if not files:
        raise ConfigError(
            stack_key(key),
            f"{location} names no file here (relative to the project directory {Path.cwd()})",
            set_hint(key, "./data/chats.jsonl"),
        )
    names = [os.path.basename(f) for f in files]
    if len(set(names)) != len(names):
        raise ConfigError(stack_key(key), f"{location} names two files of one name", "name files of one folder")
    return files


def check_rows(key: str, files: list[str], columns: tuple[str, ...]) -> None:
    """The first bad row of each JSON Lines file, in one line naming the key, the file and the row."""
    problem = columns_problem(columns)
    if problem:
        raise ConfigError(stack_key("trainDataColumns"), problem, set_hint("trainDataColumns", "'[\"messages\"]'"))
    for path in files:
        if parse_source(path).format != "json":
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            _, bad = first_bad_row(f, columns, CHECKED_ROWS)
        if bad:
            raise ConfigError(stack_key(key), f"{path}: {bad}", f"fix the file, or {set_hint(key, 'another file')}")


def _copies(files: list[str]) -> tuple[str, tuple[Upload, ...]]:
    """(the folder the copies share, the uploads): each file keeps its name, under the hash of all names and hashes."""
    named = [(os.path.basename(f), _file_sha(f), f) for f in files]
    folder = f"{DATA_PREFIX}/{_sha(repr([(n, h) for n, h, _ in named]).encode())}"
    return folder, tuple(Upload(f"{folder}/{name}", path=path) for name, _, path in named)


def _url(bucket: str, folder: str, uploads: tuple[Upload, ...], extension: str) -> str:
    """One object's own URL; several objects' as the pattern MaxText's `datasets` expands."""
    if len(uploads) == 1:
        return f"gs://{bucket}/{uploads[0].object_name}"
    return f"gs://{bucket}/{folder}/*{extension}"


def split_share(files: list[str], share: float) -> tuple[str, str]:
    """(training rows, held-out rows) of JSON Lines files: `share` of the rows, at least one, picked by a fixed seed,
    each part in the files' own order."""
    rows = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            rows += [line.rstrip("\n") + "\n" for line in f if line.strip()]
    held = held_out_rows(len(rows), share)
    if len(held) == len(rows):
        raise ConfigError(
            stack_key("evalData"),
            f"holds out every one of the {len(rows)} rows",
            f"{set_hint('evalData', '5%')} with more rows, or give held-out files",
        )
    return (
        "".join(r for i, r in enumerate(rows) if i not in held),
        "".join(r for i, r in enumerate(rows) if i in held),
    )


def resolve(pipeline: PipelineConfig, bucket: str) -> LocalData:
    """The pipeline as the VM gets it and what to copy; unchanged (nothing to copy) without local files."""
    data = _resolve_data(pipeline, bucket)
    template = pipeline.chat_template
    if template is None or parse_template(template).kind != LOCAL:
        return data
    (path,) = local_files("chatTemplate", template)
    folder, uploads = _copies([path])
    return LocalData(replace(data.pipeline, chat_template=_url(bucket, folder, uploads, "")), data.uploads + uploads)


def _resolve_data(pipeline: PipelineConfig, bucket: str) -> LocalData:
    dataset = parse_source(pipeline.dataset)
    dataset_url, eval_url = pipeline.dataset, pipeline.eval_data
    uploads: tuple[Upload, ...] = ()
    extension = ".jsonl" if dataset.format == "json" else ".parquet"
    if dataset.kind == LOCAL:
        files = local_files("dataset", pipeline.dataset)
        check_rows("dataset", files, pipeline.train_data_columns)
        share = parse_share(pipeline.eval_data)
        if share is not None:
            return _held_out_share(pipeline, bucket, files, share, dataset.format)
        folder, uploads = _copies(files)
        dataset_url = _url(bucket, folder, uploads, extension)
    if pipeline.eval_data is not None and parse_source(pipeline.eval_data).kind == LOCAL:
        held_out_files = local_files("evalData", pipeline.eval_data)
        check_rows("evalData", held_out_files, pipeline.train_data_columns)
        held_out_folder, held_out_uploads = _copies(held_out_files)
        eval_url = _url(bucket, held_out_folder, held_out_uploads, extension)
        uploads += held_out_uploads
    return LocalData(replace(pipeline, dataset=dataset_url, eval_data=eval_url), uploads)


def _held_out_share(
    pipeline: PipelineConfig, bucket: str, files: list[str], share: float, fmt: str | None
) -> LocalData:
    if fmt != "json":
        raise ConfigError(
            stack_key("evalData"),
            "is a share, which is cut from JSON Lines only, and tpu-sft:dataset is Parquet",
            set_hint("evalData", "./held-out.parquet"),
        )
    train, held_out = split_share(files, share)
    folder = f"{DATA_PREFIX}/{_sha((_sha(train.encode()) + _sha(held_out.encode())).encode())}"
    uploads = (Upload(f"{folder}/train.jsonl", content=train), Upload(f"{folder}/held-out.jsonl", content=held_out))
    urls = [f"gs://{bucket}/{upload.object_name}" for upload in uploads]
    return LocalData(replace(pipeline, dataset=urls[0], eval_data=urls[1]), uploads)

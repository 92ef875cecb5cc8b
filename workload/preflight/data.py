"""python -m workload.preflight.data: read a bounded sample of the dataset here, before any VM exists, and say
whether MaxText's SFT will take it and what it will make of it (docs/data.md, "What is checked, and when").

Reads the pipeline's settings JSON (as `python -m workload` takes it; the dataset's local paths as the user gave
them), the dataset where this machine can (local files; `gs://` and the Hub with this machine's credentials), at
most `--rows` rows of the training data and of the held-out data, through `datasets` as MaxText reads them, and
the model's own tokenizer and chat template (the tiny profile's, built here). The Hugging Face token is
`$HF_TOKEN`: never an argument, and never printed. `--public-only` is a pull request's check (its test job holds
no credentials): it uses no token, and data it cannot reach without one (a bucket, a private Hub dataset, the full
profile's gated tokenizer) is said to be not checked, with why, rather than found wrong.

Each finding that would stop the run is one line on stderr naming the key and the fix (`ConfigError`'s); then a
table on stdout, and a JSON line last (`ok`, the findings as key, problem and fix, the table, `not_checked`), which
`scripts/preflight --data` keeps for `pulumi up` to refuse by (infra/preflight/data_preflight.py).
Exit 0: nothing stops the run; 1: a finding does; 2: bad input.
Needs .maxtext-venv's Python (datasets, transformers).
"""

from __future__ import annotations

import glob
import itertools
import json
import math
import os
import statistics
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from typing import Any

from workload.__main__ import load_config
from workload.core import hub_access, last_resort
from workload.core.config import ConfigError, PipelineConfig, set_hint, stack_key
from workload.core.contract import EXIT_BAD_INPUT, EXIT_UNEXPECTED
from workload.core.conversations import columns_problem, row_problem
from workload.core.data_source import LOCAL, held_out_rows, parse_share, parse_source
from workload.core.models import MODELS
from workload.core.one_line_parser import OneLineParser
from workload.core.run_length import sequence_length

EXIT_FINDING = 1
SAMPLE_ROWS = 2000


@dataclass
class Report:
    findings: list[ConfigError] = field(default_factory=list)  # each stops the run
    table: dict[str, Any] = field(default_factory=dict)
    public_only: bool = False  # `--public-only`: what needs a credential is not checked, not a finding
    not_checked: str | None = None  # why, when it was not
    # The training data's size in the run's tokens (workload/core/run_length.py): what `tpu-sft:epochs` counts in
    # (infra/config/data_size.py); exact when every row was read, else the rows in all x the sample's positions per row.
    epoch_tokens: int | None = None
    epoch_tokens_exact: bool = False

    def stop(self, key: str, problem: str, fix: str) -> None:
        self.findings.append(ConfigError(stack_key(key), problem, fix))


def _redacted(text: str, token: str | None) -> str:
    return text.replace(token, "<hf token>") if token else text


def _first_line(error: BaseException, token: str | None) -> str:
    lines = str(error).strip().splitlines()
    return _redacted(f"{type(error).__name__}: {lines[0] if lines else ''}", token)


def load_rows(location: str, split: str, token: str | None, limit: int | None) -> list[Any]:
    """The first `limit` rows (all, with None) of a location, read as MaxText reads it."""
    import datasets

    source = parse_source(location)
    if source.is_file:
        files = os.path.expanduser(location)
        rows = datasets.load_dataset(source.format, data_files=files, split="train", streaming=True)
    else:
        rows = datasets.load_dataset(location, split=split, streaming=True, token=token)
    return list(itertools.islice(rows, limit))


def read(report: Report, key: str, location: str, split: str, token: str | None, limit: int | None) -> list | None:
    """The rows, or None with the finding that says why they cannot be read."""
    try:
        return load_rows(location, split, token, limit)
    except StopIteration:  # what `datasets` 4.8 raises for a file with no rows: the caller says so
        return []
    except Exception as error:  # datasets raises many kinds; each becomes the key's one line
        split_key = "trainSplit" if key == "dataset" else "evalSplit"
        if "split" in str(error).lower() and not parse_source(location).is_file:
            report.stop(
                split_key,
                f"{location} has no split {split!r} ({_first_line(error, token)})",
                set_hint(split_key, "train"),
            )
        elif report.public_only and not parse_source(location).is_file:
            # Private, gated or absent: the Hub does not tell a request without a token which.
            report.not_checked = f"{location} cannot be read without an HF token ({_first_line(error, token)})"
        else:
            report.stop(
                key, f"{location} cannot be read ({_first_line(error, token)})", set_hint(key, "another location")
            )
        return None


def as_messages(row: dict, columns: tuple[str, ...]) -> list[dict]:
    """The conversation MaxText makes of a row: `messages`, or a pair of columns as one user and one assistant part."""
    if columns == ("messages",):
        return row["messages"]
    turns: list[dict] = []
    for column in sorted(columns, key=lambda c: c in ("completion", "answer")):  # the user's side first
        role = "assistant" if column in ("completion", "answer") else "user"
        value = row[column]
        turns += [{"role": role, "content": value}] if isinstance(value, str) else value
    return turns


def count_tokens(tokenizer: Any, messages: list[dict]) -> tuple[int, int]:
    """(tokens, completion tokens) of one conversation, round by round as MaxText's apply_chat_template cuts it:
    each user turn with what came before in its round and the generation prompt is prompt; each assistant turn is
    completion, the only tokens completion-only loss keeps."""

    def length(turns: list[dict], generation_prompt: bool) -> int:
        text = tokenizer.apply_chat_template(turns, add_generation_prompt=generation_prompt, tokenize=False)
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    total = completion = 0
    round_turns: list[dict] = []
    for turn in messages:
        round_turns.append(turn)
        if turn["role"] == "user":
            total += length(round_turns, True)
        elif turn["role"] == "assistant":
            answer = length(round_turns, False) - length(round_turns[:-1], True)
            total, completion = total + answer, completion + answer
            round_turns = []
    return total, completion


def packed_sequences(lengths: list[int], max_length: int) -> int:
    """How many sequences first-fit packing (sft.yml's `packing: True`, grain's first_fit) fills with these
    conversations, each cut at `max_length`."""
    free: list[int] = []
    for length in (min(n, max_length) for n in lengths):
        slot = next((i for i, room in enumerate(free) if room >= length), None)
        if slot is None:
            free.append(max_length - length)
        else:
            free[slot] -= length
    return len(free)


def _count_lines(location: str) -> int | None:
    """Every row of local JSON Lines, counted without parsing (a line a row, as `datasets` reads them); None
    elsewhere: the sample is all that is read."""
    source = parse_source(location)
    if source.kind != LOCAL or source.format != "json":
        return None
    count = 0
    for path in glob.glob(os.path.expanduser(location)):
        with open(path, "rb") as f:
            count += sum(1 for line in f if line.strip())
    return count


def _hub_rows(location: str, split: str, token: str | None) -> int | None:
    """A Hub split's rows as its card's metadata states them (nothing of the data is read); None where it does not."""
    import datasets

    try:
        splits = datasets.load_dataset_builder(location, token=token).info.splits or {}
        return splits[split].num_examples or None if split in splits else None
    except Exception:  # noqa: BLE001  no metadata is an unknown size, not a finding
        return None


def _key(row: Any) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def unreachable_without_credentials(config: PipelineConfig) -> str | None:
    """Why a job with no credentials (a pull request's test job) cannot check this data, or None where it can
    (local files, a public Hub dataset, the tiny profile's tokenizer, built here)."""
    if config.profile == "full":
        model = MODELS[config.model].hub_id
        return f"the full profile counts tokens with {model}'s tokenizer, which is gated: reading it needs an HF token"
    in_a_bucket = [v for v in (config.dataset, config.eval_data, config.chat_template) if v and v.startswith("gs://")]
    if in_a_bucket:
        return f"{in_a_bucket[0]} is in Cloud Storage: reading it needs Google credentials"
    return None


def check(config: PipelineConfig, tokenizer: Any, token: str | None, limit: int, public_only: bool = False) -> Report:
    report = Report(public_only=public_only)
    columns = config.train_data_columns
    problem = columns_problem(columns)
    if problem:
        report.stop("trainDataColumns", problem, set_hint("trainDataColumns", "'[\"messages\"]'"))
        return report
    source = parse_source(config.dataset)
    share = parse_share(config.eval_data)
    # A share is cut from every row, as `pulumi up` cuts it: the whole (local) file is read.
    rows = read(report, "dataset", config.dataset, config.train_split, token, None if share else limit)
    if rows is None or report.not_checked:
        return report
    held_out: list | None = None
    if share is not None and rows:
        held = held_out_rows(len(rows), share)
        held_out = [r for i, r in enumerate(rows) if i in held]
        rows = [r for i, r in enumerate(rows) if i not in held]
    every_row = share is not None or len(rows) < limit
    if every_row:
        total_rows: int | None = len(rows)
    elif source.is_file:
        total_rows = _count_lines(config.dataset)
    else:
        total_rows = _hub_rows(config.dataset, config.train_split, token)
    rows = rows[:limit]
    if not rows:
        report.stop("dataset", f"{config.dataset} has no rows", set_hint("dataset", "a file of conversations"))
        return report
    bad = next(((n, why) for n, row in enumerate(rows, 1) if (why := row_problem(row, columns))), None)
    if bad:
        report.stop("dataset", f"{config.dataset}: row {bad[0]} {bad[1]}", "fix the row, or name other data")
        return report
    if config.eval_interval:
        # A file dataset's held-out files (PipelineConfig requires them with a held-out loss), or a Hub split.
        key, where = ("evalData", config.eval_data or "") if source.is_file else ("evalSplit", config.dataset)
        if held_out is None:
            held_out = read(report, key, where, config.eval_split, token, limit)
        if report.not_checked:
            return report
        if held_out is not None and not held_out:
            hint = set_hint("evalData", "5%") if source.is_file else set_hint("evalSplit", "test")
            report.stop(key, "the held-out data has no rows", hint)
    sizes = [count_tokens(tokenizer, as_messages(row, columns)) for row in rows]
    lengths = [n for n, _ in sizes]
    max_length = sequence_length(config.max_target_length, config.profile)
    sequences = packed_sequences(lengths, max_length)
    kept = sum(min(n, max_length) for n in lengths)
    if total_rows is not None:
        # Packing's positions per row, from the rows read: all of them, or a sample of the first.
        report.epoch_tokens = round(total_rows * sequences * max_length / len(rows))
        report.epoch_tokens_exact = every_row
    held_keys = {_key(r) for r in held_out or []}
    report.table = {
        "rows read": len(rows),
        "rows in all": total_rows,
        "tokens per conversation (median, p95, max)": [
            int(statistics.median(lengths)),
            sorted(lengths)[max(0, math.ceil(0.95 * len(lengths)) - 1)],
            max(lengths),
        ],
        f"truncated at maxTargetLength {max_length}": round(sum(n > max_length for n in lengths) / len(lengths), 4),
        "packing density": round(kept / (sequences * max_length), 4),
        "completion tokens kept (completion-only loss)": round(sum(c for _, c in sizes) / max(1, sum(lengths)), 4),
        "tokens in an epoch (packed positions)": report.epoch_tokens,
        "epoch counted": None if total_rows is None else "exactly" if every_row else "estimated from the rows read",
        "held-out rows read": None if held_out is None else len(held_out),
        "held-out rows also in training": None if held_out is None else sum(_key(r) in held_keys for r in rows),
    }
    return report


def model_access(config: PipelineConfig, token: str | None, report: Report) -> None:
    """The full profile downloads the model's gated weights: the token must have been granted them."""
    if config.profile != "full":
        return
    repository = MODELS[config.model].hub_id
    access = hub_access.check(repository, token)
    report.table["model access"] = access.why
    if access.granted is False:
        report.stop(
            "hfToken",
            access.why,
            f"accept the licence at https://huggingface.co/{repository} signed in as the token's owner",
        )


def tokenizer_for(config: PipelineConfig, token: str | None, scratch: str) -> Any:
    """The model's tokenizer, with `tpu-sft:chatTemplate` in place of its own template where one is set (as MaxText's
    validate_and_configure_sft_columns sets it)."""
    import fsspec
    from transformers import AutoTokenizer

    if config.profile == "tiny":
        from workload.tiny import assets

        assets.build_tokenizer(scratch)
        tokenizer = AutoTokenizer.from_pretrained(scratch)
    else:
        tokenizer = AutoTokenizer.from_pretrained(MODELS[config.model].hub_id, token=token)
    if config.chat_template is not None:
        with fsspec.open(os.path.expanduser(config.chat_template), "r", encoding="utf-8") as f:
            tokenizer.chat_template = f.read()
    return tokenizer


def render(table: dict[str, Any]) -> str:
    width = max(map(len, table))
    return "\n".join(f"{name:<{width}}  {'—' if value is None else value}" for name, value in table.items())


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m workload.preflight.data", description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings", required=True, help="the pipeline's settings JSON")
    parser.add_argument("--rows", type=int, default=SAMPLE_ROWS, help="read at most this many rows of each part")
    parser.add_argument(
        "--public-only", action="store_true", help="use no credentials; say what needs one is not checked"
    )
    args = parser.parse_args(argv)
    token = None if args.public_only else os.environ.get("HF_TOKEN") or None
    try:
        config = load_config(args.settings)
    except ConfigError as error:
        print(f"preflight --data: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        report = preflight(config, token, args.rows, args.public_only)
    except Exception as error:  # noqa: BLE001  the last resort: one line and a log, never a traceback
        print(f"preflight --data: {last_resort.report('preflight-data', error, [token])}", file=sys.stderr)
        return EXIT_UNEXPECTED
    for finding in report.findings:
        print(f"preflight --data: {finding}", file=sys.stderr)
    if report.not_checked:
        print(f"preflight --data: not checked: {report.not_checked}", file=sys.stderr)
    elif report.table:
        print(render(report.table))
    stops = [{"key": f.key, "problem": f.problem, "fix": f.fix} for f in report.findings]
    answer = {"ok": not report.findings, "findings": stops, "table": report.table, "not_checked": report.not_checked}
    answer |= {"epoch_tokens": report.epoch_tokens, "epoch_tokens_exact": report.epoch_tokens_exact}
    print(json.dumps(answer), flush=True)
    return EXIT_FINDING if report.findings else 0


def preflight(config: PipelineConfig, token: str | None, rows: int, public_only: bool = False) -> Report:
    report = Report(public_only=public_only)
    if public_only:
        report.not_checked = unreachable_without_credentials(config)
        if report.not_checked:
            return report
    model_access(config, token, report)
    if not report.findings:
        with tempfile.TemporaryDirectory(prefix="tpu-sft-data-") as scratch:
            try:
                tokenizer = tokenizer_for(config, token, scratch)
            except Exception as error:  # a gated or missing tokenizer: the model's key names it
                report.stop(
                    "model", f"its tokenizer cannot be loaded ({_first_line(error, token)})", "see model access"
                )
            else:
                checked = check(config, tokenizer, token, rows, public_only)
                report.findings += checked.findings
                report.table |= checked.table
                report.not_checked = checked.not_checked
                report.epoch_tokens, report.epoch_tokens_exact = checked.epoch_tokens, checked.epoch_tokens_exact
    return report


if __name__ == "__main__":
    # The tokenizer's transformers imports torch, whose torch.cuda imports pynvml; the pynvml package MaxText 0.2.3
    # requires (13.0.1) warns on that import that it is deprecated and asks the user to report it (its
    # _pynvml_redirector.py). Nothing here uses NVML, and this stderr's lines are the check's answer: that one
    # warning is silenced, every other still shows.
    warnings.filterwarnings("ignore", "The pynvml package is deprecated", FutureWarning)
    sys.exit(main())

"""python -m workload.publish: push a kept model (the output of `keep`: files plus manifest.json with every
file's size and sha256) to a Cloud Storage path and/or a Hugging Face Hub repo.

Each file is checked against the manifest first: what is published is what was verified and kept. It is laid
out as a model repo (workload/publish/layout.py): the Hugging Face export at the root as a text-only model, so
`AutoModelForCausalLM.from_pretrained("OWNER/NAME")` loads it with every weight in place (workload/publish/
text_only.py: the config becomes the export's text_config, the weights keep their bytes under new names, written
to a copy under --staging-dir), a model card as README.md written from what the run recorded
(workload/publish/model_card.py), and the run's other files and the manifest under tpu-sft/. Per
destination: when the destination's tpu-sft/manifest.json is byte-for-byte this one, the model is already there
and nothing is sent; otherwise each file already there with the same content is skipped and the others are sent
(the Hub: in one commit; Cloud Storage: one object each, an interrupted upload resuming from what arrived), the
manifest with them or last, so a destination that has it has the whole model. The Hub write token comes from
--hf-token-file (mode 0600) or HF_TOKEN, never from argv, and is never printed. The last stdout line is a JSON
summary.

Before anything is sent, the quality gate (workload/eval/gate.py) reads the kept model's eval report: with
--eval-gate block (the default) a fine-tune worse than its base beyond --eval-margin points, or one with no report,
is refused in one line and nothing is sent; with warn it is published and the summary says so; off reads nothing.
The card carries the report's scores (workload/publish/model_card.py).

A LoRA run's adapter (kept as hf-adapter/) goes, with --hub-adapter OWNER/NAME, to a repo of its own: the PEFT files at
its root, where `AutoPeftModelForCausalLM.from_pretrained("OWNER/NAME")` finds them (peft hands `subfolder=` to the
base model's loading too, so the adapter under tpu-sft/ of the merged model's repo does not load that way), with a
card of its own and the kept manifest under tpu-sft/. Either may be published without the other, and each card says
which it is and where the other was published, if it was.

A model kept in Cloud Storage (a slice's: its hosts share no disk) is first copied to a directory of its own
under --staging-dir and checked there, so what is sent is what was kept; the copy is removed afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from typing import Any, Protocol

from workload.core.contract import EXIT_BAD_INPUT
from workload.eval import gate
from workload.launch.hf_token import TokenError, read_token, redactor
from workload.publish import layout, model_card, text_only
from workload.publish.gcs import split_uri
from workload.publish.layout import Item
from workload.run import kept, storage
from workload.run.fingerprint import manifest_mismatches

MANIFEST = "manifest.json"
STAGING_DIR = "/dev/shm/tpu-sft/publish"  # a v6e host's memory holds a 4B model's ~8 GB many times over
CARD_REFUSED = "Invalid metadata in README.md"  # huggingface_hub's create_commit, when /api/validate-yaml refuses
HUB_REPO = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")


class Destination(Protocol):
    def has_manifest(self, manifest: Item) -> bool: ...
    def present(self, items: list[Item]) -> set[str]: ...  # the paths already there with the same content
    def send(self, items: list[Item], manifest: Item) -> None: ...


class PublishError(RuntimeError):
    """One line: what is wrong and what to do."""


def load_manifest(model_dir: str) -> tuple[bytes, list[dict[str, Any]]]:
    path = os.path.join(model_dir, MANIFEST)
    try:
        with open(path, "rb") as f:
            data = f.read()
        files = json.loads(data)["files"]
    except (OSError, ValueError, KeyError) as error:
        raise PublishError(f"{path} is missing or not a tpu-sft manifest ({error}); run the keep step first") from None
    problems = manifest_mismatches(model_dir, files)
    if problems:
        raise PublishError(f"{model_dir} no longer matches its manifest ({problems[0]}); run the keep step again")
    return data, files


def published_model(model_dir: str, data: bytes, files: list[dict[str, Any]], staging: str) -> tuple[list[Item], bytes]:
    """The kept files where the repo layout puts them, the export as the text-only model (workload/publish/
    text_only.py: its rewritten weights are written under `staging`); and the manifest as published, which lists
    those files as published, so that a copy fetched back (`scripts/tpu-sft fetch-model`) matches it."""
    kept = [
        Item(layout.destination_path(e["path"]), os.path.join(model_dir, e["path"]), e["size"], e["sha256"])
        for e in files
    ]
    if any(item.path == layout.CARD for item in kept):
        raise PublishError(f"the export has its own {layout.CARD}, where the model card goes; remove it and keep again")
    try:
        items = text_only.published(kept, staging)
    except text_only.NotGemma3 as error:
        raise PublishError(str(error)) from None
    return items, text_only.published_manifest(data, kept, items)


def with_card(
    items: list[Item],
    model_dir: str,
    data: bytes,
    load_as: str,
    adapter_repo: str | None = None,
    gate_line: str | None = None,
) -> tuple[list[Item], Item]:
    """The files then the model card for a destination loaded by `load_as` (and naming the repo the run's adapter is
    published to, if any, and what the quality gate found); and the manifest (`data`)."""
    card = model_card.card(json.loads(data), model_dir, load_as, adapter_repo, gate_line).encode()
    return [*items, Item.of_bytes(layout.CARD, card)], Item.of_bytes(layout.MANIFEST, data)


def plan(
    model_dir: str, data: bytes, files: list[dict[str, Any]], load_as: str, staging: str
) -> tuple[list[Item], Item]:
    """What one destination gets: the kept files laid out, the card, the manifest."""
    items, published = published_model(model_dir, data, files, staging)
    return with_card(items, model_dir, published, load_as)


def adapter_plan(
    model_dir: str, data: bytes, files: list[dict[str, Any]], repo: str, merged_repo: str | None = None
) -> tuple[list[Item], Item]:
    """What the adapter's repo gets: the kept adapter's files at its root, its card (naming the repo the merged model
    is published to, if any), the kept manifest."""
    folder = kept.ADAPTER + "/"
    items = [
        Item(e["path"].removeprefix(folder), os.path.join(model_dir, e["path"]), e["size"], e["sha256"])
        for e in files
        if e["path"].startswith(folder)
    ]
    if not items:
        raise PublishError(f"{model_dir} keeps no {kept.ADAPTER}/: --hub-adapter is for a run with tpu-sft:tuning lora")
    card = model_card.adapter_card(json.loads(data), repo, merged_repo).encode()
    return [*items, Item.of_bytes(layout.CARD, card)], Item.of_bytes(layout.MANIFEST, data)


def publish(destination: Destination, items: list[Item], manifest: Item) -> dict[str, Any]:
    if destination.has_manifest(manifest):
        return {"unchanged": True, "uploaded": [], "skipped": len(items)}
    there = destination.present(items)
    missing = [item for item in items if item.path not in there]
    destination.send(missing, manifest)
    return {"unchanged": False, "uploaded": [item.path for item in missing], "skipped": len(items) - len(missing)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workload.publish", description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1]
    )
    parser.add_argument("model_dir", help="a kept model directory (with manifest.json), or its gs:// URL")
    parser.add_argument("--gcs", help="gs://BUCKET/PATH to publish to")
    parser.add_argument("--hub", help="Hugging Face Hub model repo OWNER/NAME to publish to (created if absent)")
    parser.add_argument("--hub-adapter", help="a Hub repo OWNER/NAME for a LoRA run's adapter (created if absent)")
    parser.add_argument("--public", action="store_true", help="create the Hub repo public (default: private)")
    parser.add_argument("--hf-token-file", help="file holding a Hub write token, mode 0600 (default: $HF_TOKEN)")
    parser.add_argument(
        "--staging-dir",
        default=STAGING_DIR,
        help=f"where a gs:// model is copied first, and the text-only weights are written (default: {STAGING_DIR})",
    )
    parser.add_argument(
        "--eval-gate",
        choices=gate.MODES,
        default=gate.DEFAULT_MODE,
        help="block: refuse a model its eval report finds worse than its base beyond the margin (or that has no "
        "report); warn: publish it and say so; off: publish without reading the report "
        f"(default: {gate.DEFAULT_MODE}; docs/publishing.md)",
    )
    parser.add_argument(
        "--eval-margin",
        type=float,
        default=gate.DEFAULT_MARGIN_POINTS,
        help=f"the drop, in points, the gate lets through (default: {gate.DEFAULT_MARGIN_POINTS:g})",
    )
    args = parser.parse_args(argv)
    try:
        token = _checked(args)
    except (PublishError, TokenError, ValueError) as error:
        return _failed(str(error), EXIT_BAD_INPUT)
    if not storage.is_remote(args.model_dir):
        return _publish(args, args.model_dir, token)
    os.makedirs(args.staging_dir, exist_ok=True)
    staged = tempfile.mkdtemp(prefix="publish-", dir=args.staging_dir)
    try:
        copy = f"copy of {args.model_dir}"
        print(json.dumps({"event": "phase", "phase": copy, "status": "start"}), flush=True)
        started = time.monotonic()
        try:
            storage.download(args.model_dir, staged)
        except Exception as error:  # noqa: BLE001  one line, whatever the storage client raised
            return _failed(f"could not copy {args.model_dir}: {type(error).__name__}: {error}".splitlines()[0], 1)
        if not os.listdir(staged):
            return _failed(
                f"{args.model_dir} holds no model: run the export phase first (its keep step)", EXIT_BAD_INPUT
            )
        seconds = round(time.monotonic() - started, 1)
        print(json.dumps({"event": "phase", "phase": copy, "status": "done", "seconds": seconds}), flush=True)
        return _publish(args, staged, token)
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def _checked(args: argparse.Namespace) -> str | None:
    """The destinations, checked before anything is read; the Hub write token, when the Hub is one."""
    low, high = gate.MARGIN_RANGE
    if not low <= args.eval_margin <= high:
        raise PublishError(f"--eval-margin {args.eval_margin:g} is out of range: give points from {low:g} to {high:g}")
    if not args.gcs and not args.hub and not args.hub_adapter:
        raise PublishError(
            "nothing to publish to: give --gcs gs://BUCKET/PATH, --hub OWNER/NAME and/or --hub-adapter OWNER/NAME"
        )
    if args.gcs:
        split_uri(args.gcs)
    for flag, repo in (("--hub", args.hub), ("--hub-adapter", args.hub_adapter)):
        if repo and not HUB_REPO.match(repo):
            raise PublishError(f"{flag} {repo!r} is not a Hub repo id: give OWNER/NAME")
    if not args.hub and not args.hub_adapter:
        return None
    token = read_token(args.hf_token_file, os.environ)
    if not token:
        raise PublishError("the Hub needs a write token: --hf-token-file FILE (0600) or HF_TOKEN")
    return token


def _failed(error: str, code: int, published: dict[str, Any] | None = None, verdict: gate.Verdict | None = None) -> int:
    print(
        json.dumps(
            {
                "event": "summary",
                "ok": False,
                **({} if published is None else {"published": published}),
                **({} if verdict is None else {"gate": verdict.to_json()}),
                "error": error,
            }
        )
    )
    return code


def _one_line(error: Exception) -> str:
    """The error's first line; for the Hub's refusal of the card's metadata (huggingface_hub's ValueError, the Hub's
    reasons on the lines below its first), the reasons too, since they say what was refused."""
    lines = [line.strip() for line in f"{type(error).__name__}: {error}".splitlines() if line.strip()]
    if isinstance(error, ValueError) and str(error).startswith(CARD_REFUSED):
        reasons = " ".join(lines[1:]) or "no reason given"
        return f"the Hub refused the model card's metadata ({reasons}); report it with the kept manifest.json"
    return lines[0] if lines else type(error).__name__


def _publish(args: argparse.Namespace, model_dir: str, token: str | None) -> int:
    try:
        data, files = load_manifest(model_dir)
    except PublishError as error:
        return _failed(str(error), EXIT_BAD_INPUT)
    # Before anything is sent: the kept model stays, whatever the gate says.
    verdict = gate.judge(model_dir, args.eval_gate, args.eval_margin, shown_dir=args.model_dir)
    if verdict.blocks:
        return _failed(verdict.line, EXIT_BAD_INPUT, {}, verdict)
    scrub = redactor(token)
    results: dict[str, Any] = {}
    os.makedirs(args.staging_dir, exist_ok=True)
    staging = tempfile.mkdtemp(prefix="text-only-", dir=args.staging_dir)
    try:
        # the adapter's files first: a run that kept none is refused before anything is sent
        adapter = adapter_plan(model_dir, data, files, args.hub_adapter, args.hub) if args.hub_adapter else None
        # the adapter alone needs no text-only model written
        items, published = published_model(model_dir, data, files, staging) if args.gcs or args.hub else ([], b"")
        if args.gcs:
            from workload.publish.gcs import GcsDestination

            sent = with_card(items, model_dir, published, args.gcs, args.hub_adapter, verdict.public_line)
            results[args.gcs] = publish(GcsDestination(args.gcs), *sent)
        if args.hub:
            from workload.publish.hub import HubDestination

            hub = HubDestination(args.hub, token=token, private=not args.public)
            results[f"hf://{args.hub}"] = publish(
                hub, *with_card(items, model_dir, published, args.hub, args.hub_adapter, verdict.public_line)
            )
        if adapter:
            from workload.publish.hub import HubDestination

            repo = HubDestination(args.hub_adapter, token=token, private=not args.public)
            results[f"hf://{args.hub_adapter}"] = publish(repo, *adapter)
    except PublishError as error:
        return _failed(str(error), EXIT_BAD_INPUT, results, verdict)
    except Exception as error:  # noqa: BLE001  one line, whatever the client library raised
        return _failed(scrub(_one_line(error)), 1, results, verdict)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(json.dumps({"event": "summary", "ok": True, "published": results, "gate": verdict.to_json()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""No page of the user guide (README.md, docs/, the example stack's comments) names a script, a flag or a setting the
code lacks: `scripts/X` exists, `scripts/X --flag` is one of X's flags, a backticked `--flag` is a flag of one of the
project's commands or of the outside tool this file names for it, `tpu-sft:key` is a setting."""

import argparse
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from infra.config.setting_table import BY_KEY as STACK_SETTINGS
from infra.config.setting_table import RETIRED
from infra.preflight.compile_step import parser as preflight_parser
from remote.cli import build_parser as remote_parser
from remote.stack.cli import build_parser as stack_parser
from workload.__main__ import parser as workload_parser
from workload.core.config import BY_KEY as PIPELINE_SETTINGS

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "Pulumi.dev.yaml"]
# Flags the pages name of tools outside the project, each with its tool.
OUTSIDE = {
    "--member": "gcloud projects add-iam-policy-binding",
    "--dist": "pytest-xdist (scripts/test)",
    "--request-valid-for-duration": "gcloud compute instance-groups managed resize-requests create",
    "--worker-id": "a field report's TPU runtime flag (docs/slices.md)",
    "--worker-hostnames": "a field report's TPU runtime flag (docs/slices.md)",
    "--experimental": "hf upload-large-folder (huggingface_hub's CLI)",
    "--name": "pulumi stack / gcloud",
    "--help": "every command",
    "--override": "uv pip install (workload/core/lock.py OVERRIDES)",
    "--experimental_orbax_use_distributed_barrier": "a JAX flag (docs/rehearsals.md)",
}
# Settings named as retired, to say what replaced them (infra/config/setting_table.py RETIRED).
RETIRED_NAMED = {f"tpu-sft:{key}" for key in RETIRED}


def flags_of(parser: argparse.ArgumentParser) -> set[str]:
    found = set()
    for action in parser._actions:
        found |= {o for o in action.option_strings if o.startswith("--")}
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= flags_of(sub)
    return found


def help_flags(module: str) -> set[str]:
    """The flags `python -m module --help` lists: for the commands whose parser is built inside their `main`."""
    said = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True)
    assert said.returncode == 0, said.stderr
    return set(re.findall(r"(--[a-z][a-z_-]*)", said.stdout))


@cache
def rehearse_flags() -> set[str]:
    """scripts/rehearse's: `python -m rehearsal`'s and, after --slice or --fresh-vm, `python -m rehearsal.slice`'s or
    `python -m rehearsal.fresh_vm`'s."""
    return {"--slice", "--fresh-vm"}.union(*map(help_flags, ("rehearsal", "rehearsal.slice", "rehearsal.fresh_vm")))


@cache
def script_flags() -> dict[str, set[str]]:
    return {
        "preflight": flags_of(preflight_parser()),
        "tpu-sft": flags_of(stack_parser()),
        "rehearse": rehearse_flags(),
    }


def passed_to_outside_tools() -> set[str]:
    """The flags the eval step's code gives vLLM and lm-eval (their argv is built in these two modules alone)."""
    code = "".join((ROOT / "workload" / "eval" / name).read_text() for name in ("server.py", "harness.py"))
    return set(re.findall(r'"(--[a-z][a-z_-]*)"', code))


@cache
def every_flag() -> set[str]:
    project = set().union(
        *script_flags().values(),
        flags_of(remote_parser()),
        flags_of(workload_parser()),
        help_flags("workload.publish"),
        help_flags("bench.tpu.run"),
        passed_to_outside_tools(),
    )
    pytest_options = {"--all-tiers"}  # tests/conftest.py's own pytest option
    return project | pytest_options | set(OUTSIDE)


def mentions(pattern: str) -> list[tuple[str, str]]:
    return [(page.name, m) for page in PAGES for m in re.findall(pattern, page.read_text())]


def test_every_script_named_exists():
    named = mentions(r"scripts/([a-z][a-z-]*)")
    assert {(page, name) for page, name in named if not (ROOT / "scripts" / name).exists()} == set()


def test_every_flag_given_to_a_script_is_one_of_its_flags():
    wrong = set()
    for page, (script, flags) in mentions(r"scripts/(preflight|tpu-sft|rehearse)((?: +(?:--[a-z][a-z-]*|[a-z]+))*)"):
        for flag in re.findall(r"--[a-z][a-z-]*", flags):
            if flag not in script_flags()[script]:
                wrong.add((page, f"scripts/{script} {flag}"))
    assert wrong == set()


def test_every_backticked_flag_exists_somewhere():
    assert {(page, flag) for page, flag in mentions(r"`(--[a-z][a-z_-]*)") if flag not in every_flag()} == set()


def test_every_setting_named_exists():
    known = {f"tpu-sft:{key}" for key in (*STACK_SETTINGS, *PIPELINE_SETTINGS)} | RETIRED_NAMED
    named = mentions(r"\b(tpu-sft:[a-z][a-zA-Z]*)\b(?!:)")  # not a resource type, tpu-sft:infra:Bucket
    assert {(page, key) for page, key in named if key not in known} == set()


@pytest.mark.parametrize(
    ("text", "check"),
    [
        ("raise `--rows-please` to count", test_every_backticked_flag_exists_somewhere),
        ("scripts/preflight --sweeps", test_every_flag_given_to_a_script_is_one_of_its_flags),
        ("run scripts/deploy first", test_every_script_named_exists),
        ("set tpu-sft:stepz", test_every_setting_named_exists),
    ],
)
def test_a_made_up_name_is_caught(text, check, tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text(text)
    monkeypatch.setattr(sys.modules[__name__], "PAGES", [page])
    with pytest.raises(AssertionError):
        check()

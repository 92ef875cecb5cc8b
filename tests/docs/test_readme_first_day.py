"""The README's cloud section, run top to bottom as a new user runs it, once per way of paying, against stand-ins that
refuse a command run before what it needs (tests/docs/first_day_tools.py): `pulumi`, `gcloud`, `scripts/venv`, the
real program under the mock engine, the Hub stand-in and the Compute Engine stand-in. Each walk is one bash script of
the section's commands in order, in an empty project folder and an empty home: it passes only if every command does,
and the preview and the update both ran the program with the token and the reservation checked."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.docs import first_day_tools
from tests.hub_download_standin import serving
from workload.core.models import MODELS

ROOT = Path(__file__).resolve().parents[2]
REPO = MODELS["gemma3-4b"].hub_id
TOKEN = "hf_" + "FirstDay7" * 4


def cloud_blocks(readme: str) -> list[str]:
    """The ```bash blocks of the section "On Google Cloud", in order."""
    section = readme.split("\n## On Google Cloud\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)```", section, re.S)


def walks(readme: str) -> dict[str, str]:
    """One script per way of paying: the blocks before the ways, one way, the blocks after it up to `pulumi up` (what
    follows asks a deployed stack: tests/remote/stack)."""
    blocks = cloud_blocks(readme)
    ways = [i for i, b in enumerate(blocks) if "tpu-sft:provisioningModel" in b]
    up = next(i for i, b in enumerate(blocks) if re.search(r"^pulumi up\b", b, re.M))
    before, after = blocks[: ways[0]], blocks[ways[-1] + 1 : up + 1]
    return {blocks[i].split("\n", 1)[0]: "".join([*before, blocks[i], *after]) for i in ways}


def reservations(readme: str) -> dict[str, str]:
    """What Compute Engine holds for the user: each way's reservation in the mode that way names."""
    held = {}
    for block in cloud_blocks(readme):
        named = re.search(r"tpu-sft:reservation (\S+)", block)
        if named:
            mode = "CALENDAR" if "RESERVATION_BOUND" in block else "DEFAULT"
            held[f"my-project/us-east5-b/{named.group(1)}"] = mode
    return held


def walk(tmp_path: Path, script: str, held: dict[str, str]) -> subprocess.CompletedProcess:
    project, home, state = tmp_path / "project", tmp_path / "home", tmp_path / "state"
    for folder in (project, home, state):
        folder.mkdir()
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml"):  # what a clone holds besides the code
        shutil.copy(ROOT / name, project / name)
    bin_dir = tmp_path / "bin"
    first_day_tools.install(bin_dir, project)
    with serving(REPO, {"config.json": b"{}"}, token=TOKEN) as hub:
        env = {
            "PATH": f"{bin_dir}:/usr/bin:/bin",
            "HOME": str(home),
            first_day_tools.STATE: str(state),
            first_day_tools.RESERVATIONS: json.dumps(held),
            "HF_ENDPOINT": hub.endpoint,
        }
        return subprocess.run(
            ["bash", "-e", "-u", "-o", "pipefail", "-c", script],
            cwd=project,
            env=env,
            input=TOKEN + "\n",  # what `pulumi config set --secret tpu-sft:hfToken` prompts for
            capture_output=True,
            text=True,
            timeout=600,
        )


README = (ROOT / "README.md").read_text()
WAYS = walks(README)


def test_the_section_offers_three_ways_of_paying():
    assert [w.split(":")[0] for w in WAYS] == [
        "# a calendar-mode (future) reservation",
        "# an ordinary specific reservation (STANDARD without one is on-demand, on your on-demand quota)",
        "# Spot, on your Spot quota",
    ]


@pytest.mark.parametrize("way", list(WAYS))
def test_each_way_runs_top_to_bottom_on_an_empty_project(tmp_path, way):
    done = walk(tmp_path, WAYS[way], reservations(README))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("would create ") == 1 and done.stdout.count("created ") == 1, done.stdout
    assert "not checked" not in done.stdout  # the token and the reservation were asked about, not skipped
    assert TOKEN not in done.stdout + done.stderr


def test_a_command_run_before_what_it_needs_fails_the_walk(tmp_path):
    """The stand-ins hold the order: `pulumi stack init` moved after the first `config set` stops the walk there."""
    script = next(iter(WAYS.values()))
    init = next(line for line in script.splitlines() if line.startswith("pulumi stack init"))
    first_set = next(line for line in script.splitlines() if line.startswith("pulumi config set"))
    early = script.replace(init + "\n", "").replace(first_set + "\n", f"{first_set}\n{init}\n")
    done = walk(tmp_path, early, reservations(README))
    assert done.returncode == 1 and first_day_tools.NO_STACK in done.stderr


@pytest.mark.parametrize(
    ("dropped", "said"),
    [
        ("gcloud auth login", first_day_tools.NO_ACCOUNT),
        ("pulumi login", first_day_tools.NOT_LOGGED_IN),
        ("export PULUMI_CONFIG_PASSPHRASE", first_day_tools.NO_PASSPHRASE),
        ("scripts/venv", first_day_tools.NO_VENV),
        ("gcloud auth application-default login", first_day_tools.NO_ADC),
    ],
)
def test_each_prerequisite_is_needed(tmp_path, dropped, said):
    script = next(iter(WAYS.values()))
    without = "\n".join(line for line in script.splitlines() if not line.startswith(dropped))
    done = walk(tmp_path, without, reservations(README))
    assert done.returncode != 0 and said in done.stderr


def test_a_reservation_in_the_wrong_mode_stops_the_preview_in_one_line(tmp_path):
    calendar = next(script for way, script in WAYS.items() if "calendar" in way)
    held = {key: "DEFAULT" for key in reservations(README)}  # the user's reservation is an ordinary one after all
    done = walk(tmp_path, calendar, held)
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.endswith("Fix: pulumi config set tpu-sft:provisioningModel STANDARD")


def test_the_readme_stays_short():
    assert len(README.splitlines()) <= 250

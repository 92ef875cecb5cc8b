"""Tiers, and the fixtures every folder gets.

A test's tier is what it needs, as markers (registered in pytest.ini):
  sshd     starts OpenSSH servers on loopback
  maxtext  runs MaxText in .maxtext-venv (scripts/maxtext-venv)
  root     needs root: the sshd tests' login user, namespaces, loop devices, debootstrap
  slow     needs none of these, but takes more than ~10 s
  chip     needs the TPU chip's smoke at this checkout's workload/launch (bench/tpu/runs/): fails, by design, after a
           change to it until someone with the chip runs the smoke (docs/development.md)
Markers are derived here wherever the need shows in a test's fixtures or folder, so that a new test cannot forget
its marker; a module whose need shows in neither marks itself (`pytestmark`).

Plain `pytest` runs the fast tier: every test with none of these markers. `--all-tiers` runs every tier
(scripts/test passes it); `-m EXPRESSION` picks tiers instead, e.g. `-m sshd` or `-m "not maxtext"`.
"""

from __future__ import annotations

import pytest

pytest_plugins = (
    "tests.fixtures.sshd",
    "tests.fixtures.mock_engine",
    "tests.fixtures.maxtext_venv",
    "tests.fixtures.cloud_storage",
)

TIERS = ("sshd", "maxtext", "root", "slow", "chip")
FAST_TIER = "not (" + " or ".join(TIERS) + ")"

# A fixture → what every test that uses it (directly or through other fixtures) needs.
FIXTURE_TIERS = {
    "remote_user": ("sshd", "root"),  # the account every test sshd logs in as: created with useradd
    "maxtext_python": ("maxtext",),
    "eval_python": ("maxtext",),  # lm-eval over the MaxText venv's packages
    "pulumi_up": ("sshd", "maxtext"),  # the whole tiny `pulumi up` against a local sshd (tests/e2e)
    "fresh_vm": ("sshd", "maxtext", "root"),  # a simulated new VM: namespaces, a loop device, debootstrap
}
# A folder of tests/ → what every test in it needs, where no shared fixture shows it.
FOLDER_TIERS = {
    "slice": ("sshd", "maxtext", "root"),  # the slice rehearsal: simulated hosts, each in its own namespaces
}
# The shared runs that take minutes, longest first. Under pytest-xdist (scripts/test: --dist loadgroup) a fixture is
# made once per worker, so every test of one of these goes to the same worker, and they start before the rest,
# which goes out module by module (so a module's own fixtures are made once too). A tuple is runs that share one
# worker, one after the other.
LONG_RUNS = (
    "fresh_vm",
    # Their module fixtures: the slice rehearsal, and a LoRA run on it restarted mid-train. Each runs two hosts'
    # MaxText; side by side, beside the other long runs, the kernel's OOM killer ended a host's trainer (2026-12-07).
    ("tests/slice/test_slice_rehearsal.py", "tests/slice/test_lora_slice.py"),
    "tiny_pipeline",
    "tests/workload/test_qlora_pipeline.py",  # its module fixture: a QLoRA run over two devices, killed and resumed
    "pulumi_up",
    "tests/workload/launch/test_token_lost_vm.py",  # a tiny pipeline of its own, lost mid-run
)
# After the long runs, the groups with a MaxText process among their tests go out before the rest: started late, one
# such module (minutes of compiles) ran on alone after every other test had ended (2026-12-07, 4b58ab5).
HEAVY_TIER = "maxtext"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--all-tiers",
        action="store_true",
        help="run every tier (sshd, maxtext, root, slow, chip), not only the fast one, unless -m picks some; "
        "scripts/test does",
    )


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("all_tiers") and not config.option.markexpr:
        config.option.markexpr = FAST_TIER


def pytest_report_header(config: pytest.Config) -> str:
    if not config.option.markexpr:
        return "tiers: all"
    return f"tiers: -m {config.option.markexpr!r}" + (
        " (the fast tier; --all-tiers runs every tier)" if config.option.markexpr == FAST_TIER else ""
    )


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m selection, which reads these markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests = config.rootpath / "tests"
    for item in items:
        needs = {tier for fixture in getattr(item, "fixturenames", ()) for tier in FIXTURE_TIERS.get(fixture, ())}
        folder = item.path.relative_to(tests).parts[0]
        needs.update(FOLDER_TIERS.get(folder, ()))
        for tier in sorted(needs - {mark.name for mark in item.iter_markers()}):
            item.add_marker(tier)
    if getattr(config.option, "loadgroup", False):  # an xdist worker of `--dist loadgroup`: it collects
        _group_for_workers(items)


def _group_for_workers(items: list[pytest.Item]) -> None:
    """Mark each test with the one worker's group it belongs to, and put the long runs' groups first, then the groups
    that run MaxText, then the rest (the scheduler deals groups out in the order of the items)."""
    group, position, heavy = {}, {}, set()
    for item in items:
        module = item.nodeid.partition("::")[0]
        names = {module, *getattr(item, "fixturenames", ())}
        runs = [i for i, run in enumerate(LONG_RUNS) if names & set(run if isinstance(run, tuple) else (run,))]
        group[item.nodeid] = f"long run {runs[0]}" if runs else module
        item.add_marker(pytest.mark.xdist_group(group[item.nodeid]))
        position[item.nodeid] = runs[0] if runs else len(LONG_RUNS)
        if item.get_closest_marker(HEAVY_TIER):
            heavy.add(group[item.nodeid])
    # Stable: the order within a group stays.
    items.sort(key=lambda item: (position[item.nodeid], group[item.nodeid] not in heavy))


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    # Exit 5 (nothing ran) stays exit 5; say why when it is the tier selection that left nothing.
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and terminalreporter.stats.get("deselected"):
        terminalreporter.write_line(
            f"every selected test was outside -m {config.option.markexpr!r}: add --all-tiers, or -m with its tier",
            yellow=True,
        )

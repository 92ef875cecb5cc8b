"""A detached bootstrap step (the seed spec's post-train extras): the bootstrap phase starts it and returns, so
convert runs beside it; train finishes the install first, waiting for it (its lock), and a detached step that
failed is run again there and stops train with its own error. Over a real sshd; the steps are small stand-ins
(the extras build from GitHub, unreachable here)."""

import dataclasses
import io
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from remote.pipeline.bootstrap.scheduler import BootstrapStepFailed, bootstrap, detached_log
from remote.pipeline.bootstrap.seed import spec_for
from remote.pipeline.bootstrap.spec import BootstrapSpec, Step
from remote.pipeline.request import PhaseRequest
from remote.pipeline.ship import finish_install, prepare
from remote.ssh.connection import connect
from remote.ssh.errors import BadInput
from tests.procs import processes
from tests.ssh_testbed import wait_until
from workload.core.config import PipelineConfig

SLOW_S = 4


def _spec(scratch: Path, detached_command: str) -> BootstrapSpec:
    return BootstrapSpec(
        (
            Step("base", 'mkdir -p "$COUNTS" && echo x >> "$COUNTS/base"', after=()),
            Step("extras", detached_command, after=("base",), detached=True),
        ),
        {"COUNTS": str(scratch / "counts")},
    )


def _slow(scratch: Path) -> BootstrapSpec:
    return _spec(scratch, f'sleep {SLOW_S} && echo built && echo x >> "$COUNTS/extras"')


def _lines(scratch: Path, name: str) -> int:
    path = scratch / "counts" / name
    return len(path.read_text().splitlines()) if path.exists() else 0


def _flocks(locks: str) -> set[int]:
    """The pids of flock processes on this machine (the test host's among them) holding or waiting for a lock in
    `locks`. Pids, not a count: one the first bootstrap left ending as the second starts would hide the second's."""
    return {p["pid"] for p in processes() if p["cmdline"].startswith("flock ") and locks in p["cmdline"]}


def _fingerprint(target) -> Path:
    return Path(target.state_dir) / "bootstrap/fingerprint"


def test_bootstrap_leaves_a_detached_step_running_and_the_next_bootstrap_waits_for_it(target, scratch):
    release = scratch / "release"  # the detached step runs until the test says so, however slow the machine
    spec = _spec(scratch, f'while [ ! -e {release} ]; do sleep 0.05; done; echo built; echo x >> "$COUNTS/extras"')
    with connect(target) as conn:
        left = bootstrap(conn, spec, leave_running=True)
        assert (left.steps_run, left.left_running) == (("base",), ("extras",))  # returned while it runs
        assert not _fingerprint(target).exists()  # the install is not complete yet
        locks = f"{target.state_dir}/bootstrap/locks/"
        before = _flocks(locks)
        with ThreadPoolExecutor(1) as pool:
            next_bootstrap = pool.submit(bootstrap, conn, spec)
            try:
                # Its own end ends the wait too, so a bootstrap that did not wait fails here, with its result.
                waiting = "the next bootstrap to wait for the step's locks"
                wait_until(lambda: _flocks(locks) - before or next_bootstrap.done(), 600, waiting)
                assert not next_bootstrap.done(), next_bootstrap.result()
                assert _lines(scratch, "extras") == 0
            finally:
                release.touch()
            finished = next_bootstrap.result(600)
    assert _lines(scratch, "extras") == 1  # waited for it; ran once, not twice
    assert (finished.steps_run, finished.left_running) == ((), ())  # both done by then
    assert _fingerprint(target).read_text() == spec.fingerprint
    assert "built" in Path(detached_log(target, "extras")).read_text()


def test_a_detached_step_outlives_the_connection_that_started_it(target, scratch):
    spec = _slow(scratch)
    with connect(target) as conn:
        bootstrap(conn, spec, leave_running=True)
    deadline = time.monotonic() + SLOW_S + 20
    while _lines(scratch, "extras") == 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _lines(scratch, "extras") == 1


def test_a_finished_install_leaves_nothing_running_and_costs_one_round_trip(target, scratch, channels):
    spec = _spec(scratch, 'echo x >> "$COUNTS/extras"')
    with connect(target) as conn:
        bootstrap(conn, spec)
        channels.clear()
        again = bootstrap(conn, spec, leave_running=True)
    assert (again.installed, again.left_running) == (False, ()) and sum(channels.values()) == 1


def test_a_detached_step_that_failed_stops_the_phase_that_needs_it_with_its_own_error(target, scratch):
    spec = _spec(scratch, 'echo "extras: no compiler for tpu-inference" >&2; exit 3')
    request = PhaseRequest(
        "train",
        dataclasses.replace(target, profile=dataclasses.replace(target.profile, bootstrap=spec.to_mapping())),
        PipelineConfig(),
    )
    with connect(request.target) as conn:
        assert bootstrap(conn, spec, leave_running=True).left_running == ("extras",)  # bootstrap itself succeeds
        out = io.StringIO()
        with pytest.raises(BootstrapStepFailed) as failed:
            finish_install(conn, request, out)
    assert failed.value.step == "extras" and "no compiler for tpu-inference" in str(failed.value)
    assert out.getvalue().startswith("waiting for the install steps bootstrap left running: extras (log: ")
    assert "no compiler for tpu-inference" in Path(detached_log(target, "extras")).read_text()
    assert not _fingerprint(target).exists()


@pytest.mark.parametrize("installed", ["by a bootstrap that waited", "never"])
def test_a_phase_touches_no_detached_step_that_bootstrap_did_not_leave_running(target, scratch, installed, channels):
    """Installed by `python -m remote bootstrap` (which waits for every step), or some other way: nothing to wait
    for, and nothing is installed by the phase. One round trip."""
    spec = _spec(scratch, 'echo x >> "$COUNTS/extras"')
    request = PhaseRequest(
        "train",
        dataclasses.replace(target, profile=dataclasses.replace(target.profile, bootstrap=spec.to_mapping())),
        PipelineConfig(),
    )
    with connect(request.target) as conn:
        if installed != "never":
            bootstrap(conn, spec)
        channels.clear()
        out = io.StringIO()
        finish_install(conn, request, out)
    assert out.getvalue() == "" and sum(channels.values()) == 1
    assert _lines(scratch, "extras") == (0 if installed == "never" else 1)


def test_a_phase_on_an_install_without_detached_steps_costs_no_round_trip(target, scratch, channels):
    spec = BootstrapSpec((Step("base", "true"),))
    request = PhaseRequest(
        "train",
        dataclasses.replace(target, profile=dataclasses.replace(target.profile, bootstrap=spec.to_mapping())),
        PipelineConfig(),
    )
    with connect(request.target) as conn:
        channels.clear()
        finish_install(conn, request, io.StringIO())
    assert channels == {}


def test_only_a_detached_step_may_need_a_detached_step():
    with pytest.raises(BadInput) as refused:
        BootstrapSpec((Step("extras", "true", after=(), detached=True), Step("after", "true")))
    assert str(refused.value) == (
        "bootstrap spec: step 'after' needs 'extras', which is detached: make 'after' detached too, or 'extras' not"
    )
    BootstrapSpec((Step("extras", "true", after=(), detached=True), Step("more", "true", detached=True)))


def test_detached_is_a_boolean_kept_through_json_and_not_part_of_the_fingerprint():
    spec = BootstrapSpec.from_json('{"steps": [{"name": "a", "command": "true", "detached": true}]}')
    assert spec.steps[0].detached and BootstrapSpec.from_mapping(spec.to_mapping()) == spec
    attached = BootstrapSpec.from_json('{"steps": [{"name": "a", "command": "true"}]}')
    assert attached.fingerprint == spec.fingerprint  # detaching a step installs nothing different
    with pytest.raises(BadInput) as refused:
        BootstrapSpec.from_json('{"steps": [{"name": "a", "command": "true", "detached": "yes"}]}')
    assert str(refused.value) == "bootstrap spec: step a's detached must be true or false"


def test_the_seed_leaves_only_the_post_train_extras_running():
    extras = PipelineConfig(install_post_train_extras=True)
    assert {s.name for s in spec_for(extras).steps if s.detached} == {"post-train-extras"}


@pytest.mark.parametrize(("phase", "waits"), [("convert", False), ("train", True), ("export", True)])
def test_convert_starts_beside_a_detached_step_and_the_later_phases_wait_for_it(target, scratch, phase, waits):
    spec = _slow(scratch)
    request = PhaseRequest(
        phase,
        dataclasses.replace(
            target, profile=dataclasses.replace(target.profile, bootstrap=spec.to_mapping(), required_mount=None)
        ),
        PipelineConfig(profile="tiny"),
    )
    with connect(request.target) as conn:
        bootstrap(conn, spec, leave_running=True)
        prepare(conn, request, None, io.StringIO())
    assert _lines(scratch, "extras") == (1 if waits else 0)

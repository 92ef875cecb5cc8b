"""Bootstrap installs once: a re-run with the same inputs is one round trip, a new version re-installs,
an interrupted run resumes where it stopped; independent steps run at once, and a failure in one branch
names its step. The steps install `six` from PyPI into a venv made by uv."""

import io
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from remote.pipeline.bootstrap.scheduler import BootstrapResult, BootstrapStepFailed, bootstrap, bootstrap_all
from remote.pipeline.bootstrap.seed import spec_for
from remote.pipeline.bootstrap.spec import BootstrapSpec, Step
from remote.ssh.connection import connect
from remote.ssh.errors import BadInput, CommandFailed
from tests.ssh_testbed import wait_until
from workload.core.config import PipelineConfig

UV = str(Path(sys.executable).parent / "uv")
HOLD = 'if [ ! -e "$COUNTS/held-once" ]; then : > "$COUNTS/held-once"; echo $$ > "$COUNTS/step.pid"; sleep 60; fi; '


def six_spec(scratch: Path, six: str = "1.16.0", hold: bool = False) -> BootstrapSpec:
    env = {
        "COUNTS": str(scratch / "counts"),
        "VENV": str(scratch / "venv"),
        "UV": UV,
        "UV_PYTHON_DOWNLOADS": "never",
        # The host is this machine: reach PyPI the way this machine does (e.g. through a TLS-inspecting proxy).
        **{
            k: os.environ[k] for k in ("SSL_CERT_FILE", "SSL_CERT_DIR", "HTTPS_PROXY", "https_proxy") if k in os.environ
        },
    }
    return BootstrapSpec(
        (
            Step("packages", 'mkdir -p "$COUNTS" && echo x >> "$COUNTS/packages"'),
            Step("venv", 'echo x >> "$COUNTS/venv" && "$UV" venv --quiet --python python3 --allow-existing "$VENV"'),
            Step(
                "install",
                'echo x >> "$COUNTS/install" && '
                + (HOLD if hold else "")
                + f'"$UV" pip install --quiet --python "$VENV/bin/python" six=={six}',
            ),
        ),
        env,
    )


def counts(scratch: Path) -> dict[str, int]:
    return {
        p.name: len(p.read_text().splitlines())
        for p in (scratch / "counts").iterdir()
        if p.name in ("packages", "venv", "install")
    }


def six_version(scratch: Path) -> str:
    return subprocess.run(
        [scratch / "venv/bin/python", "-c", "import six; print(six.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_second_run_installs_nothing_in_one_round_trip(target, scratch, channels):
    spec = six_spec(scratch)
    with connect(target) as conn:
        first = bootstrap(conn, spec)
    assert (first.installed, first.steps_run) == (True, ("packages", "venv", "install"))
    assert six_version(scratch) == "1.16.0"
    assert (scratch / "remote state/bootstrap/fingerprint").read_text() == spec.fingerprint
    channels.clear()
    with connect(target) as conn:
        second = bootstrap(conn, spec)
    assert (second.installed, second.steps_run) == (False, ())
    assert channels == {target.host: 1}
    assert counts(scratch) == {"packages": 1, "venv": 1, "install": 1}


def test_changed_version_reinstalls_only_what_depends_on_it(target, scratch):
    with connect(target) as conn:
        bootstrap(conn, six_spec(scratch, "1.16.0"))
        again = bootstrap(conn, six_spec(scratch, "1.17.0"))
    assert again.steps_run == ("install",)
    assert six_version(scratch) == "1.17.0"
    assert counts(scratch) == {"packages": 1, "venv": 1, "install": 2}


def test_interrupted_bootstrap_resumes_cleanly(target, scratch):
    spec = six_spec(scratch, hold=True)
    spec_file = scratch / "spec.json"
    spec_file.write_text(spec.to_json())
    client = subprocess.Popen(
        [sys.executable, "-m", "remote", "bootstrap", "--spec", str(spec_file)],
        env={**os.environ, "TPU_SFT_TARGET": target.to_json()},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    step_pid = int(
        wait_until(
            lambda: (p := scratch / "counts/step.pid").exists() and p.read_text().strip(),
            timeout=300,
            what="the install step to start",
        )
    )
    client.kill()  # the machine running the bootstrap dies mid-install…
    client.wait()
    os.killpg(os.getpgid(step_pid), signal.SIGKILL)  # …and so does the install on the host (its whole session)
    assert not (scratch / "remote state/bootstrap/fingerprint").exists()
    with connect(target) as conn:
        resumed = bootstrap(conn, spec)
        assert resumed.steps_run == ("install",)  # completed steps are not redone
        assert bootstrap(conn, spec).installed is False
    assert six_version(scratch) == "1.16.0"
    assert counts(scratch) == {"packages": 1, "venv": 1, "install": 2}


def test_a_failing_step_is_named_and_leaves_no_fingerprint(target, scratch):
    spec = BootstrapSpec((Step("fine", "true"), Step("broken", "echo why >&2; exit 7")))
    failing = r"bootstrap step 'broken' failed \(exit 7\): why"
    with connect(target) as conn, pytest.raises(CommandFailed, match=failing) as failed:
        bootstrap(conn, spec)
    assert failed.value.tail == ("why",)
    assert not (scratch / "remote state/bootstrap/fingerprint").exists()
    assert len(list((scratch / "remote state/bootstrap/done").iterdir())) == 1  # only the step that succeeded


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '{"env": {}}',  # no steps
        '{"steps": [{"name": "x"}]}',  # a step without its command
        '{"steps": [{"name": "x", "command": "true", "shell": "bash"}]}',  # a field a step does not have
        '["steps"]',
    ],
)
def test_a_malformed_spec_is_bad_input(text):
    with pytest.raises(BadInput, match=r"^bootstrap spec"):
        BootstrapSpec.from_json(text)


def test_every_host_rechecks_in_one_round_trip(cluster, scratch, channels):
    spec = BootstrapSpec((Step("mark", f"echo x >> {scratch}/marks"),))
    first = bootstrap_all(cluster.target(scratch), spec)
    assert all(isinstance(r, BootstrapResult) for r in first.values()), first
    channels.clear()
    results = bootstrap_all(cluster.target(scratch), spec)
    assert [r.installed for r in results.values()] == [False, False, False]
    assert channels == {"127.0.0.2": 1, "127.0.0.3": 1, "127.0.0.4": 1}
    # The three "hosts" share this machine's disk, so the step ran exactly once in all.
    assert (scratch / "marks").read_text() == "x\n"


def test_spec_for_follows_the_seed_and_the_settings():
    default = spec_for(PipelineConfig())
    assert [s.name for s in default.steps] == ["apt", "uv", "python", "venv", "maxtext", "eval-venv", "weights"]
    maxtext = default.steps[4].command
    assert "UV_TORCH_BACKEND=cpu" in maxtext and "'maxtext[tpu-post-train]==0.2.3' google-tunix==" in maxtext
    # MaxText 0.2.3 and Tunix 0.1.7 disagree on safetensors: the lock's version overrides both, from a file
    overrides = "maxtext_venv/tpu-sft-overrides.txt"
    assert maxtext.startswith(f"printf '%s\\n' safetensors==0.8.0 > {overrides} && UV_TORCH_BACKEND=cpu ")
    assert maxtext.endswith(f" --resolution=lowest --override {overrides}")
    extras = spec_for(PipelineConfig(install_post_train_extras=True))
    assert [s.name for s in extras.steps] == [
        *("apt", "uv", "python", "venv", "maxtext", "eval-venv", "post-train-extras", "weights")
    ]
    # The eval venv: vLLM TPU and lm-eval under the eval lock's constraints, CPU torch, punkt_tab inside it.
    evaluate = default.steps[5].command
    assert "UV_TORCH_BACKEND=cpu " in evaluate
    assert " vllm-tpu==0.26.0 'lm-eval[ifeval]==0.4.13' --constraint " in evaluate
    assert "eval_venv/bin/python -m nltk.downloader -d eval_venv/share/nltk_data punkt_tab" in evaluate
    lean = spec_for(PipelineConfig(maxtext_version="0.2.5", torch_backend="auto"))
    assert "==0.2.5" in lean.steps[4].command and "google-tunix" not in lean.steps[4].command
    assert lean.steps[4].command.startswith("UV_TORCH_BACKEND=auto ") and "--override" not in lean.steps[4].command
    assert lean.step_hashes()[:4] == default.step_hashes()[:4]  # a version change keeps apt, uv, python, venv
    assert lean.fingerprint != default.fingerprint
    assert lean.steps[5].command == evaluate  # the eval venv does not follow MaxText's version or torch backend


# ---- the steps as a graph: independent branches at once, hashes through what each step needs


def _stamp(name: str, edge: str) -> str:
    """Write the time to $DIR/<name>.<edge> whole or not at all: the shell creates a redirect's file before `date`
    writes into it, so another step that waits for the file to exist (`_meeting`) could read it empty, or stamp its
    own time first (a race a loaded machine lost)."""
    return f'date +%s.%N > "$DIR/{name}.{edge}.part" && mv "$DIR/{name}.{edge}.part" "$DIR/{name}.{edge}"'


def _timed(name: str, seconds: float) -> str:
    """A step that records when it started and ended (and its pid) under $DIR."""
    return f'{_stamp(name, "start")} && echo $$ > "$DIR/{name}.pid" && sleep {seconds} && {_stamp(name, "end")}'


def _at(scratch: Path, name: str, edge: str) -> float:
    return float((scratch / f"{name}.{edge}").read_text())


def _meeting(name: str, other: str) -> str:
    """A step that records when it started and ended under $DIR, and ends once `other` has started (or after 600 s,
    so that steps run one after the other end, and fail the test, instead of waiting for ever)."""
    return (
        f'{_stamp(name, "start")} && i=0; while [ ! -e "$DIR/{other}.start" ] && [ $i -lt 12000 ]; '
        f"do sleep 0.05; i=$((i+1)); done; {_stamp(name, 'end')}"
    )


def test_independent_steps_run_at_once_and_their_dependent_after_both(target, scratch):
    spec = BootstrapSpec(
        (
            Step("a", _meeting("a", "b"), after=()),
            Step("b", _meeting("b", "a"), after=()),
            Step("c", _timed("c", 0), after=("a", "b")),
        ),
        {"DIR": str(scratch)},
    )
    output = io.StringIO()
    with connect(target) as conn:
        result = bootstrap(conn, spec, stream=output)
    assert result.steps_run == ("a", "b", "c")
    # Each started before the other ended: at once, whatever the machine's load (each waits for the other to start;
    # one after the other, the first would end first).
    assert _at(scratch, "b", "start") < _at(scratch, "a", "end")
    assert _at(scratch, "a", "start") < _at(scratch, "b", "end")
    assert _at(scratch, "c", "start") >= max(_at(scratch, "a", "end"), _at(scratch, "b", "end"))


def test_each_line_of_steps_running_at_once_is_led_by_its_step(target, scratch):
    talk = 'for i in 1 2 3 4 5; do printf "%s-line-$i\\n" "$0"; sleep 0.1; done'
    spec = BootstrapSpec(
        (Step("one", f"sh -c '{talk}' one", after=()), Step("two", f"sh -c '{talk}' two >&2", after=()))
    )
    output = io.StringIO()
    with connect(target) as conn:
        bootstrap(conn, spec, stream=output)
    lines = output.getvalue().splitlines()
    assert sorted(lines) == sorted(f"{name} | {name}-line-{i}" for name in ("one", "two") for i in range(1, 6))


def test_a_failing_branch_names_its_step_lets_the_running_one_finish_and_starts_nothing_more(target, scratch):
    env = {"DIR": str(scratch)}
    slow = Step("slow", _timed("slow", 1.5), after=())
    dependents = (
        Step("after-slow", ': > "$DIR/after-slow.ran"', after=("slow",)),
        Step("after-broken", ': > "$DIR/after-broken.ran"', after=("broken",)),
    )
    spec = BootstrapSpec((slow, Step("broken", "echo 'E: no such package' >&2; exit 7", after=()), *dependents), env)
    with connect(target) as conn, pytest.raises(BootstrapStepFailed) as failed:
        bootstrap(conn, spec)
    assert str(failed.value).startswith(f"{target.host}: bootstrap step 'broken' failed (exit 7): E: no such package")
    # The branch already running was let finish (an install cut short breaks it), not left behind on the host…
    assert (scratch / "slow.end").exists()
    assert not Path(f"/proc/{(scratch / 'slow.pid').read_text().strip()}").exists()
    # …and nothing else started: not what needs the failed step, nor what needs the finished one.
    assert not (scratch / "after-slow.ran").exists() and not (scratch / "after-broken.ran").exists()
    state = scratch / "remote state/bootstrap"
    assert len(list((state / "done").iterdir())) == 1 and not (state / "fingerprint").exists()
    fixed = BootstrapSpec((slow, Step("broken", "true", after=()), *dependents), env)
    with connect(target) as conn:
        assert bootstrap(conn, fixed).steps_run == ("broken", "after-slow", "after-broken")  # slow is not redone


def test_a_change_reruns_its_step_and_what_needs_it_not_the_other_branch():
    def spec(apt: str) -> BootstrapSpec:
        return BootstrapSpec(
            (
                Step("apt", apt, after=()),
                Step("uv", "get uv", after=()),
                Step("maxtext", "install", after=("uv",)),
                Step("extras", "build", after=("apt", "maxtext")),
            )
        )

    before, after = spec("apt install cmake").step_hashes(), spec("apt install cmake ninja").step_hashes()
    names = ("apt", "uv", "maxtext", "extras")
    changed = [name for name, old, new in zip(names, before, after, strict=True) if old != new]
    assert changed == ["apt", "extras"]
    # Hashes follow what a step needs, not where it is listed: two independent steps may swap places.
    swapped = BootstrapSpec((Step("uv", "get uv", after=()), Step("apt", "apt install cmake", after=())))
    listed = BootstrapSpec((Step("apt", "apt install cmake", after=()), Step("uv", "get uv", after=())))
    assert swapped.fingerprint == listed.fingerprint


def test_a_step_is_not_redone_while_another_run_is_still_in_a_step_that_needs_it(target, scratch):
    """Two runs at once (or one and the remains of an interrupted one): while the first is still installing
    MaxText into the venv, a second run that must redo the venv waits for it; its independent step does not."""

    def spec(venv: str) -> BootstrapSpec:
        return BootstrapSpec(
            (
                Step("venv", _timed(venv, 0)),
                Step("maxtext", _timed(f"maxtext-after-{venv}", 2)),
                Step("apt", _timed(f"apt-{venv}", 0), after=()),
            ),
            {"DIR": str(scratch)},
        )

    def first_run() -> None:
        with connect(target) as conn:
            bootstrap(conn, spec("venv1"))

    first = threading.Thread(target=first_run)
    first.start()
    wait_until(lambda: (scratch / "maxtext-after-venv1.start").exists(), what="the first run's maxtext step")
    with connect(target) as conn:
        bootstrap(conn, spec("venv2"))
    first.join()
    assert _at(scratch, "venv2", "start") >= _at(scratch, "maxtext-after-venv1", "end")
    assert _at(scratch, "apt-venv2", "start") < _at(scratch, "maxtext-after-venv1", "end")


def test_after_round_trips_and_must_name_an_earlier_step():
    spec = BootstrapSpec((Step("a", "true", after=()), Step("b", "true"), Step("c", "true", after=("a",))))
    assert [s.after for s in spec.steps] == [(), ("a",), ("a",)]  # unset: the step listed before it
    assert BootstrapSpec.from_json(spec.to_json()) == spec
    refusals = {
        '["c"]': "step 'b' needs 'c', which is not a step listed before it",
        '["z"]': "step 'b' needs 'z', which is not a step listed before it",
        '"a"': "step b's after must be a list of step names",
    }
    for after, why in refusals.items():
        text = f'{{"steps": [{{"name": "a", "command": "true"}}, {{"name": "b", "command": ":", "after": {after}}}]}}'
        with pytest.raises(BadInput) as refused:
            BootstrapSpec.from_json(text)
        assert str(refused.value) == f"bootstrap spec: {why}"


def test_a_spec_written_before_after_existed_keeps_its_order_and_the_default_timeout():
    old = BootstrapSpec.from_json('{"steps": [{"name": "a", "command": "true"}, {"name": "b", "command": ":"}]}')
    assert [(s.after, s.timeout_s) for s in old.steps] == [((), 3600.0), (("a",), 3600.0)]


def test_the_seed_spec_runs_apt_beside_the_python_branch():
    spec = spec_for(PipelineConfig(install_post_train_extras=True))
    assert {s.name: s.after for s in spec.steps} == {
        "apt": (),
        "uv": (),
        "python": ("uv",),
        "venv": ("python",),
        "maxtext": ("venv",),
        "eval-venv": ("python",),
        "post-train-extras": ("apt", "maxtext"),
        "weights": ("python",),
    }


def _held(name: str, release: Path) -> str:
    """A step that records when it started and ended under $DIR, and ends only once `release` exists."""
    return f"{_stamp(name, 'start')} && while [ ! -e {release} ]; do sleep 0.05; done && {_stamp(name, 'end')}"


def test_an_interrupted_client_returns_at_once_leaving_the_step_to_the_next_run(target, scratch):
    """Ctrl-C while two steps run: the client stops now, while they still run (they cannot end before the test
    releases them: no clock decides it), and the next run waits for the steps still running on the host (their
    locks) instead of starting them a second time."""
    release = scratch / "release"
    spec = BootstrapSpec(
        (Step("a", _held("a", release), after=()), Step("b", _held("b", release), after=())),
        {"DIR": str(scratch)},
    )
    returned = threading.Event()

    def interrupt_once_both_run() -> None:
        wait_until(lambda: all((scratch / f"{n}.start").exists() for n in "ab"), 600, "both steps to start")
        # To the main thread itself: a process-wide signal may land on this thread, and then nothing wakes the main
        # thread's wait to run its handler (CI saw it wait until `release`, by which time the steps had ended).
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGALRM)
        if not returned.wait(600):  # a client that waits for its steps would wait for ever: end them
            release.touch()

    def interrupt(*_):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    interrupter = threading.Thread(target=interrupt_once_both_run)
    try:
        with connect(target) as conn, pytest.raises(KeyboardInterrupt):
            interrupter.start()
            bootstrap(conn, spec)
        still_running = [n for n in "ab" if not (scratch / f"{n}.end").exists()]
        returned.set()
    finally:
        returned.set()
        interrupter.join()
        signal.signal(signal.SIGALRM, previous)
    assert still_running == ["a", "b"]  # the client returned before either step could end
    release.touch()
    with connect(target) as conn:
        assert bootstrap(conn, spec).steps_run == ()  # both finished on the host meanwhile, as leftovers
    assert all((scratch / f"{n}.end").exists() for n in "ab")


SHAPE = '{"steps": [{"name": …, "command": …, "timeout_s": …, "after": [names], "detached": false}], "env": {…}}'


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({"steps": ["apt"]}, "step 1 must be an object with name, command, timeout_s, after and detached"),
        (
            {"steps": [{"name": "a", "command": "true"}, {"name": "b", "command": ":", "after": ["y", "z"]}]},
            "step 'b' needs 'y', which is not a step listed before it",
        ),
        ({"steps": []}, f"steps must be a non-empty list; expected {SHAPE}"),
        ({"steps": "apt"}, f"steps must be a non-empty list; expected {SHAPE}"),
        (
            {"steps": [{"name": "a", "command": "true", "timeout_s": True}]},
            "step a's timeout_s True is not a number of seconds in (0, 86400]",
        ),
        (
            {"steps": [{"name": "a", "command": "true", "timeout_s": "60"}]},
            "step a's timeout_s '60' is not a number of seconds in (0, 86400]",
        ),
        ({"steps": [{"name": 5, "command": "true"}]}, "step 1's name 5 is not 1–64 letters, digits, '.', '_', '-'"),
        (
            {"steps": [{"name": "a", "command": "true"}, {"name": "b c", "command": "true"}]},
            "step 2's name 'b c' is not 1–64 letters, digits, '.', '_', '-'",
        ),
        (
            {"steps": [{"name": "a", "command": "true", "timeout_s": 0}]},
            "step a's timeout_s 0 is not a number of seconds in (0, 86400]",
        ),
        (
            {"steps": [{"name": "a", "command": "true", "timeout_s": 86401}]},
            "step a's timeout_s 86401 is not a number of seconds in (0, 86400]",
        ),
        (
            {"steps": [{"name": "a", "command": "true"}], "env": [["A", "1"]]},
            f"env must be an object of names to string values; expected {SHAPE}",
        ),
        (
            {"steps": [{"name": "a", "command": "true"}], "env": {"A": 1}},
            f"env must be an object of names to string values; expected {SHAPE}",
        ),
    ],
)
def test_a_malformed_spec_says_which_step_and_what(spec, why):
    with pytest.raises(BadInput) as refused:
        BootstrapSpec.from_mapping(spec)
    assert str(refused.value) == f"bootstrap spec: {why}"


def test_a_timeout_may_be_a_fraction_of_a_second_or_a_whole_day():
    steps = [{"name": "a", "command": "true", "timeout_s": 0.5}, {"name": "b", "command": "true", "timeout_s": 86400}]
    assert [s.timeout_s for s in BootstrapSpec.from_mapping({"steps": steps}).steps] == [0.5, 86400.0]

"""Bootstrap installs once: a re-run with the same inputs is one round trip, a new version re-installs,
an interrupted run resumes where it stopped. The steps install `six` from PyPI into a venv made by uv."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from remote.bootstrap import BootstrapResult, BootstrapSpec, Step, bootstrap, bootstrap_all, spec_for
from remote.connection import connect
from remote.errors import BadInput, CommandFailed
from tests.remote.ssh_testbed import wait_until
from workload.config import PipelineConfig

UV = str(Path(sys.executable).parent / "uv")
HOLD = ('if [ ! -e "$COUNTS/held-once" ]; then : > "$COUNTS/held-once"; echo $$ > "$COUNTS/step.pid"; '
        "sleep 60; fi; ")


def six_spec(scratch: Path, six: str = "1.16.0", hold: bool = False) -> BootstrapSpec:
    env = {"COUNTS": str(scratch / "counts"), "VENV": str(scratch / "venv"), "UV": UV, "UV_PYTHON_DOWNLOADS": "never",
           # The host is this machine: reach PyPI the way this machine does (e.g. through a TLS-inspecting proxy).
           **{k: os.environ[k] for k in ("SSL_CERT_FILE", "SSL_CERT_DIR", "HTTPS_PROXY",
                                         "https_proxy") if k in os.environ}}
    return BootstrapSpec((
        Step("packages", 'mkdir -p "$COUNTS" && echo x >> "$COUNTS/packages"'),
        Step("venv", 'echo x >> "$COUNTS/venv" && "$UV" venv --quiet --python python3 --allow-existing "$VENV"'),
        Step("install", 'echo x >> "$COUNTS/install" && ' + (HOLD if hold else "")
             + f'"$UV" pip install --quiet --python "$VENV/bin/python" six=={six}'),
    ), env)


def counts(scratch: Path) -> dict[str, int]:
    return {p.name: len(p.read_text().splitlines()) for p in (scratch / "counts").iterdir()
            if p.name in ("packages", "venv", "install")}


def six_version(scratch: Path) -> str:
    return subprocess.run([scratch / "venv/bin/python", "-c", "import six; print(six.__version__)"],
                          capture_output=True, text=True, check=True).stdout.strip()


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
        env={**os.environ, "TPU_SFT_TARGET": target.to_json()}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    step_pid = int(wait_until(lambda: (p := scratch / "counts/step.pid").exists() and p.read_text().strip(),
                              timeout=60, what="the install step to start"))
    client.kill()  # the machine running the bootstrap dies mid-install…
    client.wait()
    os.killpg(step_pid, signal.SIGKILL)  # …and so does the install on the host
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


@pytest.mark.parametrize("text", [
    "not json",
    '{"env": {}}',  # no steps
    '{"steps": [{"name": "x"}]}',  # a step without its command
    '{"steps": [{"name": "x", "command": "true", "shell": "bash"}]}',  # a field a step does not have
    '["steps"]',
])
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
    assert [s.name for s in default.steps] == ["apt", "uv", "python", "venv", "maxtext", "post-train-extras"]
    maxtext = default.steps[4].command
    assert "UV_TORCH_BACKEND=cpu" in maxtext and "'maxtext[tpu-post-train]==0.2.2' --resolution=lowest" in maxtext
    lean = spec_for(PipelineConfig(maxtext_version="0.2.5", install_post_train_extras=False, torch_backend="auto"))
    assert [s.name for s in lean.steps][-1] == "maxtext" and "==0.2.5" in lean.steps[4].command
    assert "UV_TORCH_BACKEND=auto" in lean.steps[4].command
    assert lean.step_hashes()[:4] == default.step_hashes()[:4]  # a version change keeps apt, uv, python, venv
    assert lean.fingerprint != default.fingerprint

"""The seed's install steps on a first boot: a download that fails stops its step (and is never marked done),
apt waits for dpkg's lock instead of failing and never prompts, and a failing step says in one line which
step failed and why."""

import contextlib
import fcntl
import os
import shlex
import subprocess
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from remote.pipeline.bootstrap.scheduler import BootstrapStepFailed, bootstrap
from remote.pipeline.bootstrap.seed import APT_GET, UV_VERSION, apt_update, spec_for
from remote.pipeline.bootstrap.spec import BootstrapSpec, Step
from remote.ssh.connection import connect
from tests.procs import processes
from tests.ssh_testbed import wait_until
from workload.core.config import PipelineConfig

INSTALLER_OK = '#!/bin/sh\necho uv-installer-ran > "$HOME_MARK"\n'


class _Installers(BaseHTTPRequestHandler):
    """A real HTTP server standing in for astral.sh (unreachable here): /missing/… 404, /empty/… an empty
    200, /ok/… a script that leaves a mark."""

    def do_GET(self):
        kind = self.path.split("/")[1]
        if kind == "missing":
            self.send_error(404)
            return
        body = b"" if kind == "empty" else INSTALLER_OK.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def installers():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Installers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _seed_uv_step(base_url: str, kind: str) -> BootstrapSpec:
    """The seed spec's own uv step, unchanged but for astral.sh's address."""
    [uv] = [s for s in spec_for(PipelineConfig()).steps if s.name == "uv"]
    command = uv.command.replace("https://astral.sh/", f"{base_url}/{kind}/")
    assert command != uv.command
    return BootstrapSpec((Step(uv.name, command, 30),))


@pytest.mark.parametrize(("kind", "why"), [("missing", "404"), ("empty", "downloaded an empty file")])
def test_a_failed_download_fails_its_step_and_is_not_marked_done(target, scratch, installers, kind, why):
    spec = _seed_uv_step(installers, kind)
    with connect(target) as conn, pytest.raises(BootstrapStepFailed) as failed:
        bootstrap(conn, spec)
    message = str(failed.value)
    assert "bootstrap step 'uv' failed" in message and why in message and "\n" not in message
    state = Path(target.state_dir) / "bootstrap"
    assert list((state / "done").iterdir()) == [] and not (state / "fingerprint").exists()


def test_a_good_download_runs_and_is_marked_done(target, scratch, installers):
    spec = BootstrapSpec(_seed_uv_step(installers, "ok").steps, {"HOME_MARK": str(scratch / "mark")})
    with connect(target) as conn:
        assert bootstrap(conn, spec).steps_run == ("uv",)
    assert (scratch / "mark").read_text() == "uv-installer-ran\n"


def test_uv_is_pinned():
    [uv] = [s for s in spec_for(PipelineConfig()).steps if s.name == "uv"]
    assert f"https://astral.sh/uv/{UV_VERSION}/install.sh" in uv.command and "| sh" not in uv.command
    assert UV_VERSION in (Path(__file__).parents[4] / "requirements.txt").read_text()  # the project's own uv


def test_apt_never_prompts_and_waits_for_the_dpkg_lock():
    [apt] = [s for s in spec_for(PipelineConfig()).steps if s.name == "apt"]
    assert apt.command.count(shlex.join(APT_GET)) == 3  # update, upgrade, install
    assert apt_update(shlex.join(APT_GET)) in apt.command
    never_prompt = {
        "DEBIAN_FRONTEND=noninteractive",
        "Dpkg::Options::=--force-confdef",
        "Dpkg::Options::=--force-confold",
    }
    assert never_prompt <= set(APT_GET)
    assert any(option.startswith("DPkg::Lock::Timeout=") for option in APT_GET)


@pytest.mark.root  # apt-get takes the machine's own dpkg and archive locks
def test_apt_waits_while_another_process_holds_the_dpkg_lock(tmp_path):
    """Real apt-get with the spec's options, as root on this machine; a copy of dpkg's admin directory stands in
    for /var/lib/dpkg, and this test holds its lock-frontend as apt-daily/unattended-upgrades would on a first
    boot, until apt-get says it waits. Without DPkg::Lock::Timeout apt-get fails at once ("Could not get lock")."""
    admin = tmp_path / "dpkg"
    admin.mkdir()
    (admin / "status").write_bytes(Path("/var/lib/dpkg/status").read_bytes())
    apt_get = [arg for arg in APT_GET if arg != "sudo"]  # already root here
    out = tmp_path / "apt.out"
    with _held(admin / "lock-frontend") as release, open(out, "w") as stdout:
        waiting = subprocess.Popen(
            [*apt_get, "-o", f"Dir::State::status={admin}/status", "install", "-y"],
            stdout=stdout,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            wait_until(lambda: "Waiting for cache lock: Could not get lock" in out.read_text(), 300, "apt to wait")
            release()
            assert waiting.wait(120) == 0, out.read_text()
        finally:
            waiting.kill()
            waiting.wait()


def test_a_failing_step_names_itself_and_its_last_words(target, scratch):
    fails = "echo 'Reading package lists...'; echo 'E: Unable to locate package cmake' >&2; exit 100"
    spec = BootstrapSpec((Step("apt", fails),))
    with connect(target) as conn, pytest.raises(BootstrapStepFailed) as failed:
        bootstrap(conn, spec)
    assert str(failed.value).startswith(
        f"{target.host}: bootstrap step 'apt' failed (exit 100): E: Unable to locate package cmake. Fix"
    )


@contextlib.contextmanager
def _held(lock_file: Path) -> Iterator[Callable[[], None]]:
    """Hold an fcntl lock on `lock_file` (as apt does) from this process, until the function given is called."""
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o640)
    fcntl.lockf(fd, fcntl.LOCK_EX)
    try:
        yield lambda: fcntl.lockf(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def test_apt_update_waits_while_another_process_holds_the_lists_lock(tmp_path):
    """Real `apt-get update` through the spec's own retry, as root on this machine, on a lists directory of its
    own with no sources (nothing is downloaded); this test holds its lock as apt-daily would on a first boot, until
    the retry sleeps after a refusal. `apt-get update` alone fails at once on that lock, DPkg::Lock::Timeout or not."""
    lists = tmp_path / "lists"
    (lists / "partial").mkdir(parents=True)
    apt_get = [arg for arg in APT_GET if arg != "sudo"] + [
        "-o",
        f"Dir::State::Lists={lists}",
        "-o",
        "Dir::Etc::sourcelist=/dev/null",
        "-o",
        f"Dir::Etc::sourceparts={tmp_path}/none",
    ]
    with _held(lists / "lock") as release:
        alone = subprocess.run(apt_get + ["update"], capture_output=True, text=True, timeout=60)
        retried = subprocess.Popen(
            ["sh", "-c", apt_update(shlex.join(apt_get))], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            wait_until(lambda: _children(retried.pid) == ["sleep 5"], 300, "the retry to wait after a refusal")
            release()
            out, err = retried.communicate(timeout=120)
        finally:
            retried.kill()
            retried.wait()
    assert alone.returncode != 0 and "Could not get lock" in alone.stderr
    assert retried.returncode == 0, err


def _children(pid: int) -> list[str]:
    """The command lines of a process's children."""
    return [p["cmdline"] for p in processes() if p["ppid"] == pid]

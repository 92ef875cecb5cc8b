"""The IAP path's own failures reach the user: gcloud's error instead of minutes of "Error reading SSH protocol
banner", and a missing or logged-out gcloud found before the first connection.

`gcloud` here is a stand-in script put first on PATH (this machine has no Google Cloud CLI and no network
to Google): it answers `auth list` as a logged-in or logged-out gcloud does, and `compute start-iap-tunnel`
either fails as IAP does or relays to the local sshd like the real tunnel (tests/remote/ssh/stdio_relay.py)."""

import dataclasses
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from remote.ssh.connection import connect, run
from remote.ssh.errors import TargetError, Unreachable
from remote.ssh.gateway import GatewayProcess
from remote.ssh.wait import wait_for_ssh
from tests.ssh_testbed import wait_until

RELAY = Path(__file__).with_name("stdio_relay.py")
IAP_GATEWAY = "gcloud compute start-iap-tunnel %h %p --listen-on-stdin --zone=us-east5-b --project=my-project"
NOT_AUTHORIZED = "ERROR: (gcloud.compute.start-iap-tunnel) Error while connecting [4033: 'not authorized']."


def fake_gcloud(directory: Path, *, account: str, tunnel: str) -> Path:
    """A `gcloud` on PATH: `auth list` prints `account`; `compute start-iap-tunnel NAME PORT …` runs `tunnel`."""
    directory.mkdir(exist_ok=True)
    script = directory / "gcloud"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> "{directory}/calls"\n'
        'if [ "$1" = auth ]; then\n'
        f'  [ -n "{account}" ] && echo "{account}"\n'
        "  exit 0\n"
        "fi\n"
        f"{tunnel}\n"
    )
    script.chmod(0o755)
    return directory


@pytest.fixture
def via_iap(target, sshd_host, tmp_path):
    """The target as the Pulumi program writes it for IAP: host is the instance name, gcloud is the gateway."""
    known = tmp_path / "known_hosts"
    key_type, key = sshd_host.sshd.known_hosts_line.split()[1:3]
    known.write_text(f"[tpu-sft-dev]:{target.port} {key_type} {key}\n")
    return dataclasses.replace(
        target, host="tpu-sft-dev", known_hosts=str(known), gateway=IAP_GATEWAY, connect_timeout=5.0
    )


def test_gclouds_error_is_in_the_message_at_once(via_iap, tmp_path, monkeypatch):
    bin_dir = fake_gcloud(tmp_path / "bin", account="me@example.com", tunnel=f'echo "{NOT_AUTHORIZED}" >&2; exit 1')
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    started = time.monotonic()
    with pytest.raises(Unreachable) as failed:
        connect(dataclasses.replace(via_iap, connect_timeout=60.0))
    assert str(failed.value).count(NOT_AUTHORIZED) == 1 and "exited 1" in str(failed.value)
    assert "the gateway said" not in str(failed.value)  # paramiko's error already quotes it: said once
    assert "\n" not in str(failed.value)
    assert time.monotonic() - started < 30  # not the 60 s banner timeout: the tunnel's exit is noticed at once


def test_a_tunnel_that_never_relays_is_named_with_its_last_words(via_iap, tmp_path, monkeypatch):
    """gcloud still running but no SSH banner through it: paramiko's timeout does not say why; gcloud's stderr may."""
    said = "WARNING: IAP tunnel still waiting for the instance"
    bin_dir = fake_gcloud(tmp_path / "bin", account="me@example.com", tunnel=f'echo "{said}" >&2; exec sleep 30')
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    with pytest.raises(Unreachable) as failed:
        connect(dataclasses.replace(via_iap, connect_timeout=1.0))
    assert str(failed.value).endswith(f"; the gateway said: {said}")


def test_wait_names_the_gateway_error_at_its_deadline(via_iap, tmp_path, monkeypatch):
    bin_dir = fake_gcloud(tmp_path / "bin", account="me@example.com", tunnel=f'echo "{NOT_AUTHORIZED}" >&2; exit 1')
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    with pytest.raises(Unreachable, match="no SSH answer within 3 s") as failed:
        wait_for_ssh(via_iap, deadline_s=3, first_backoff_s=0.2)
    assert "4033: 'not authorized'" in str(failed.value)


def test_a_logged_out_gcloud_stops_before_any_connection(via_iap, tmp_path, monkeypatch):
    bin_dir = fake_gcloud(tmp_path / "bin", account="", tunnel="exit 1")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    started = time.monotonic()
    with pytest.raises(TargetError, match="gcloud has no active account.*gcloud auth login"):
        wait_for_ssh(via_iap, deadline_s=60)
    assert time.monotonic() - started < 10
    calls = (bin_dir / "calls").read_text().splitlines()
    assert calls == ["auth list --filter=status:ACTIVE --format=value(account)"]  # no tunnel was opened


def test_no_gcloud_on_path(via_iap, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(TargetError, match="gcloud is not on PATH"):
        wait_for_ssh(via_iap, deadline_s=60)


def test_a_working_tunnel_that_talks_on_stderr_still_connects(via_iap, sshd_host, tmp_path, monkeypatch):
    """gcloud warns on stderr while it relays; a full stderr pipe nobody reads must not stall the tunnel."""
    record = tmp_path / "asked"
    chatter = "for i in $(seq 4000); do echo 'WARNING: tunnel chatter line' >&2; done"
    tunnel = f'{chatter}; exec {sys.executable} {RELAY} {record} {sshd_host.sshd.address} "$3" "$4"'
    bin_dir = fake_gcloud(tmp_path / "bin", account="me@example.com", tunnel=tunnel)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    with wait_for_ssh(via_iap, deadline_s=30) as conn:
        assert run(conn, "echo through IAP").stdout == "through IAP\n"
    assert record.read_text() == f"tpu-sft-dev {sshd_host.sshd.port}\n"


def test_closed_from_two_threads_at_once_it_keeps_what_the_tunnel_said():
    """paramiko's transport thread and the caller both close the proxy; neither may read a file the other closed
    (seen in a suite run: `Bad file descriptor` in the transport thread)."""
    for _ in range(20):
        proxy = GatewayProcess("sh -c 'echo tunnel said this >&2; sleep 5'")
        wait_until(lambda p=proxy: p.stderr_tail() == "tunnel said this", what="the tunnel's stderr")
        start = threading.Barrier(2)
        failures: list[BaseException] = []

        def close(p=proxy, barrier=start, failed=failures):
            barrier.wait()
            try:
                p.close()
            except BaseException as e:  # noqa: BLE001  what the thread would have died of
                failed.append(e)

        threads = [threading.Thread(target=close) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == [] and proxy.stderr_tail() == "tunnel said this"

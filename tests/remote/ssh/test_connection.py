"""Connections pin host keys, time out instead of hanging, and never inherit Fabric's unsafe defaults."""

import contextlib
import dataclasses
import io
import subprocess
import sys
import threading
import time
from pathlib import Path

import paramiko
import pytest

from remote.ssh.connection import _known_hosts_name, connect, run
from remote.ssh.errors import AuthError, CommandFailed, HostKeyError, TargetError, Unreachable
from tests.ssh_testbed import free_port, held_by_another_thread, make_user_key, ssh_agent


def test_connects_with_pinned_key_and_keepalive(target):
    with connect(target) as conn:
        assert run(conn, "echo hello").stdout == "hello\n"
        assert conn.transport.packetizer._Packetizer__keepalive_interval == target.keepalive_s
        assert not isinstance(conn.client._policy, paramiko.AutoAddPolicy)
        assert conn.ssh_config == {"hostname": target.host}  # nothing from ~/.ssh/config or /etc/ssh/ssh_config


def test_unknown_host_key_is_refused(target, tmp_path):
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    with pytest.raises(HostKeyError, match="not in .*empty_known_hosts") as e:
        connect(dataclasses.replace(target, known_hosts=str(empty)))
    assert "trust_on_first_use" in str(e.value)
    assert empty.read_text() == ""


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"\xff\xfe not text", "is not a text file (not UTF-8)"),
        (None, "cannot be read as a known_hosts file (IsADirectoryError"),
    ],
)
def test_a_known_hosts_that_cannot_be_read_is_refused_before_connecting(target, tmp_path, content, problem):
    """One line naming the file, not a traceback, and no connection made to a host nothing can be checked against."""
    path = tmp_path / "known_hosts"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(TargetError) as e:
        connect(dataclasses.replace(target, known_hosts=str(path)))
    assert f"{path} {problem}" in str(e.value)


def test_trust_on_first_use_records_then_pins(target, tmp_path, sshd_host):
    known = tmp_path / "tofu_known_hosts"
    tofu = dataclasses.replace(target, known_hosts=str(known), trust_on_first_use=True)
    with connect(tofu) as conn:
        run(conn, "true")
    assert known.read_text() == sshd_host.sshd.known_hosts_line
    # Now pinned: the same file refuses a different key even with trust-on-first-use on.
    other = paramiko.Ed25519Key.from_private_key_file(str(make_user_key(tmp_path / "other").private))
    known.write_text(f"[{target.host}]:{target.port} ssh-ed25519 {other.get_base64()}\n")
    with pytest.raises(HostKeyError, match="CHANGED"):
        connect(tofu)


def test_changed_host_key_is_refused_with_the_fix(target, tmp_path):
    other = paramiko.Ed25519Key.from_private_key_file(str(make_user_key(tmp_path / "other").private))
    known = tmp_path / "stale_known_hosts"
    known.write_text(f"[{target.host}]:{target.port} ssh-ed25519 {other.get_base64()}\n")
    with pytest.raises(HostKeyError) as e:
        connect(dataclasses.replace(target, known_hosts=str(known)))
    message = str(e.value)
    assert "CHANGED" in message and str(known) in message
    assert f"ssh-keygen -R '[{target.host}]:{target.port}' -f {known}" in message


def test_the_fix_names_the_host_as_known_hosts_does():
    """On port 22, the real VM's, known_hosts and `ssh-keygen -R` name a host without brackets."""
    assert _known_hosts_name("tpu-sft-dev", 22) == "tpu-sft-dev"
    assert _known_hosts_name("127.0.0.1", 2222) == "[127.0.0.1]:2222"


def test_a_failed_command_keeps_its_output_tail_but_not_its_command_line(target):
    with connect(target) as conn, pytest.raises(CommandFailed) as failed:
        run(conn, ": hf_OnTheCommandLine0123456789; seq 1 25; echo err >&2; exit 3")
    assert failed.value.exited == 3
    assert failed.value.tail == (*(str(i) for i in range(7, 26)), "err")  # the last 20 lines
    assert "hf_OnTheCommandLine" not in str(failed.value) + repr(failed.value)


def test_refused_key_is_an_auth_error(target, tmp_path):
    stranger = make_user_key(tmp_path / "stranger").private
    with pytest.raises(AuthError, match="refused key"):
        connect(dataclasses.replace(target, key_path=str(stranger)))


def test_fabric_settings_files_are_not_read(target, tmp_path, monkeypatch):
    """A ~/.fabric.yml (here: an environment for every command) changes nothing."""
    (tmp_path / ".fabric.yml").write_text("run:\n  env:\n    FROM_FILE: leaked\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    with connect(target) as conn:
        assert run(conn, 'echo "${FROM_FILE:-unset}"').stdout == "unset\n"


def test_only_the_targets_own_key_is_offered(target, tmp_path, monkeypatch):
    """A key the server accepts, in ~/.ssh and loaded in a running ssh-agent, does not stand in for a wrong
    key_path: only the target's key is ever offered."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_bytes(Path(target.key_path).read_bytes())
    (home / ".ssh" / "id_ed25519").chmod(0o600)
    monkeypatch.setenv("HOME", str(home))
    socket_path = tmp_path / "agent.sock"
    with ssh_agent(socket_path):
        monkeypatch.setenv("SSH_AUTH_SOCK", str(socket_path))
        subprocess.run(["ssh-add", "-q", target.key_path], check=True, capture_output=True)
        stranger = make_user_key(tmp_path / "stranger").private
        with pytest.raises(AuthError, match="refused key"):
            connect(dataclasses.replace(target, key_path=str(stranger)))


def test_no_agent_is_forwarded_to_the_host(target):
    with connect(target) as conn:
        assert run(conn, 'echo "${SSH_AUTH_SOCK:-no agent}"').stdout == "no agent\n"


def test_output_is_captured_and_shown_only_where_asked(target, capfd):
    shown = io.StringIO()
    with connect(target) as conn:
        assert run(conn, "echo quiet").stdout == "quiet\n"
        assert run(conn, "echo shown; echo also >&2", stream=shown).stdout == "shown\n"
    out, err = capfd.readouterr()
    assert "quiet" not in out + err and "shown" not in out + err  # never printed here by itself
    # stdout and stderr come over separate channel streams, read by separate threads: their order is not fixed.
    assert sorted(shown.getvalue().splitlines()) == ["also", "shown"]


def test_a_commands_own_timeout_wins_over_the_targets(target):
    with connect(dataclasses.replace(target, command_timeout=60.0)) as conn:
        start = time.monotonic()
        with pytest.raises(Unreachable, match="within 0.5 s"):
            run(conn, "sleep 5", timeout=0.5)
    assert time.monotonic() - start < 30  # not the target's command_timeout (60 s)


def test_closed_port_fails_fast(target):
    start = time.monotonic()
    with pytest.raises(Unreachable, match="cannot connect"):
        connect(dataclasses.replace(target, port=free_port("127.0.0.1"), connect_timeout=60.0))
    assert time.monotonic() - start < 30  # a refusal ends it: no wait for the connect timeout (60 s)


def test_blackholed_host_hits_the_connect_timeout_instead_of_hanging(target, make_proxy, tmp_path, sshd_host):
    proxy = make_proxy((target.host, target.port))
    proxy.blackhole()  # accepts TCP, never says a word: the SSH banner never comes
    start = time.monotonic()
    with pytest.raises(Unreachable):
        connect(dataclasses.replace(target, port=proxy.port, connect_timeout=1.0))
    assert 0.9 < time.monotonic() - start < 10  # paramiko's own banner wait is 15 s, its channel's an hour


def test_command_timeout_on_a_link_that_dies_mid_session(target, make_proxy, tmp_path, sshd_host):
    proxy = make_proxy((target.host, target.port))
    known = tmp_path / "proxy_known_hosts"
    known.write_text(sshd_host.sshd.known_hosts_line.replace(f":{target.port} ", f":{proxy.port} "))
    via_proxy = dataclasses.replace(
        target, port=proxy.port, known_hosts=str(known), connect_timeout=1.0, command_timeout=1.5
    )
    conn = connect(via_proxy)
    assert run(conn, "echo up").stdout == "up\n"
    proxy.blackhole()
    start = time.monotonic()
    with pytest.raises(Unreachable):  # the channel-open timeout (1 s) or the command timeout (1.5 s)
        run(conn, "echo never")
    assert 0.9 < time.monotonic() - start < 10  # not paramiko's hour


def test_gateway_proxycommand_reaches_the_host_by_instance_name(target, tmp_path, sshd_host):
    """The IAP path: host is the instance name, which only the gateway command resolves (%h, %p)."""
    record = tmp_path / "asked"
    relay = Path(__file__).with_name("stdio_relay.py")
    known = tmp_path / "known_hosts"
    key_type, key = sshd_host.sshd.known_hosts_line.split()[1:3]
    known.write_text(f"[tpu-sft-dev]:{target.port} {key_type} {key}\n")
    via_gateway = dataclasses.replace(
        target,
        host="tpu-sft-dev",
        known_hosts=str(known),
        gateway=f"{sys.executable} {relay} {record} {sshd_host.sshd.address} %h %p",
    )
    with connect(via_gateway) as conn:
        assert run(conn, "echo through the tunnel").stdout == "through the tunnel\n"
    assert record.read_text() == f"tpu-sft-dev {target.port}\n"
    # The other ProxyCommand tokens: %r the user, %% a percent sign; an unknown one is left as written.
    with connect(dataclasses.replace(via_gateway, gateway=via_gateway.gateway + " %r %% %x")) as conn:
        run(conn, "true")
    assert record.read_text().splitlines()[-1] == f"tpu-sft-dev {target.port} {target.user} % %x"


def test_trust_on_first_use_creates_the_known_hosts_folder(target, tmp_path, sshd_host):
    """What the Pulumi program asks for: a file per VM under .tpu-sft/known_hosts/, absent on a first `up`."""
    known = tmp_path / ".tpu-sft" / "known_hosts" / "dev-1234567890"
    with connect(dataclasses.replace(target, known_hosts=str(known), trust_on_first_use=True)) as conn:
        run(conn, "true")
    assert known.read_text() == sshd_host.sshd.known_hosts_line
    assert oct(known.parent.stat().st_mode & 0o777) == "0o700"  # the pins are this user's alone


def test_home_relative_key_and_known_hosts_paths(target, tmp_path, monkeypatch, sshd_host):
    """The Pulumi program writes key_path as ~/.ssh/google_compute_engine: it must work as a shell would read it."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "google_compute_engine").write_bytes(Path(target.key_path).read_bytes())
    (home / ".ssh" / "google_compute_engine").chmod(0o600)
    (home / ".ssh" / "known").write_text(sshd_host.sshd.known_hosts_line)
    monkeypatch.setenv("HOME", str(home))
    tilde = dataclasses.replace(target, key_path="~/.ssh/google_compute_engine", known_hosts="~/.ssh/known")
    assert tilde.key_path == f"{home}/.ssh/google_compute_engine"
    with connect(tilde) as conn:
        assert run(conn, "echo ok").stdout == "ok\n"


def test_leaving_a_connection_on_ctrl_c_never_waits_for_a_send_lock_it_left_held(target):
    """A polite close would send the SFTP channel's close and wait for that lock forever; abandoning sends nothing."""
    conn = connect(target)
    conn.sftp()
    release = held_by_another_thread(conn.transport.clear_to_send_lock)
    ended = threading.Event()

    def interrupted() -> None:
        with contextlib.suppress(KeyboardInterrupt), conn:
            raise KeyboardInterrupt
        ended.set()

    threading.Thread(target=interrupted, daemon=True).start()
    try:
        assert ended.wait(60), "closing the connection after Ctrl-C hung on the transport's send lock"
        assert not conn.transport.is_active()
    finally:
        release.set()

"""A secret handed to a job is in no command line, log, exception or output, on either side."""

import hashlib
import subprocess

import pytest

from remote.ssh import jobs
from remote.ssh.connection import connect
from remote.ssh.errors import CommandFailed, Unreachable
from remote.ssh.secrets import place_secret, write_secret
from tests.ssh_testbed import wait_until

TOKEN = "hf_FAKEtokenTPUSFT0123456789abcdefXYZ"


def test_secret_reaches_the_job_and_nothing_else(sshd_host, scratch, capfd, caplog):
    target = sshd_host.target(scratch / "state")
    command = (
        f'printf %s "$HF_TOKEN" | sha256sum | cut -d" " -f1 > {scratch}/seen; echo working; '
        f"while [ ! -e {scratch}/release ]; do sleep 0.02; done; echo done"
    )
    with connect(target) as conn:
        jobs.start(conn, "secretive", command, secret_env={"HF_TOKEN": TOKEN})
        wait_until(lambda: (scratch / "seen").exists(), what="the job to read its token")
        process_table = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
        (scratch / "release").touch()
        lines = []
        assert jobs.follow(target, "secretive", lines.append) == 0
    expected = hashlib.sha256(TOKEN.encode()).hexdigest()
    assert (scratch / "seen").read_text().strip() == expected  # the job had the exact value
    assert "sh ./run.sh" in process_table and TOKEN not in process_table
    job = scratch / "state/jobs/secretive"
    assert not (job / "secret.env").exists()  # deleted once loaded
    for path in job.iterdir():
        assert TOKEN not in path.read_text(errors="replace"), path
    assert lines == ["working", "done"]
    assert TOKEN not in sshd_host.sshd.log_text()
    out, err = capfd.readouterr()
    assert TOKEN not in out + err + caplog.text


def test_secret_is_not_in_exception_text(sshd_host, scratch):
    unwritable = sshd_host.target("/proc/no-state-here")  # start fails on the host, after the secret was given
    with connect(unwritable) as conn, pytest.raises(CommandFailed) as failed:
        jobs.start(conn, "x", "true", secret_env={"HF_TOKEN": TOKEN})
    assert TOKEN not in str(failed.value) and TOKEN not in repr(failed.value)
    assert TOKEN not in "\n".join(failed.value.tail)
    with connect(sshd_host.target(scratch / "state")) as conn, pytest.raises(ValueError) as bad:
        jobs.start(conn, "x", "true", secret_env={"BAD NAME": TOKEN})
    assert TOKEN not in str(bad.value)


def modes_at_first_write(conn, monkeypatch) -> dict[str, int]:
    """File name → its permission bits when the first byte was written to it over this connection's SFTP."""
    modes: dict[str, int] = {}
    sftp = conn.sftp()
    open_file = sftp.open

    def watched_open(path, mode="r", *args, **kwargs):
        handle = open_file(path, mode, *args, **kwargs)
        write = handle.write

        def watched_write(data):
            modes.setdefault(path.rsplit("/", 1)[1], handle.stat().st_mode & 0o777)
            return write(data)

        handle.write = watched_write
        return handle

    monkeypatch.setattr(sftp, "open", watched_open)
    return modes


def test_job_secret_file_is_private_from_its_first_byte(sshd_host, scratch, monkeypatch):
    """The job's secret.env lives on the host only until the job sources it; it is 0600 before any byte of the
    secret reaches it, in a job directory only its owner can enter."""
    target = sshd_host.target(scratch / "state")
    with connect(target) as conn:
        modes = modes_at_first_write(conn, monkeypatch)
        jobs.start(conn, "private", "true", secret_env={"HF_TOKEN": TOKEN})
        assert jobs.follow(target, "private", lambda line: None) == 0
    assert oct(modes["secret.env"]) == "0o600"
    assert oct((scratch / "state/jobs/private").stat().st_mode & 0o777) == "0o700"


def test_stored_token_is_private_from_its_first_byte(sshd_host, scratch, monkeypatch):
    state = scratch / "state 'of' $(touch canary); x"  # every path on a command line is quoted
    target = sshd_host.target(state)
    secrets_dir = state / "secrets"
    with connect(target) as conn:
        modes = modes_at_first_write(conn, monkeypatch)
        assert place_secret(conn, "hf_token", None) is False  # nothing there yet, nothing given
        assert write_secret(conn, "hf_token", TOKEN) == f"{secrets_dir}/hf_token"
        assert place_secret(conn, "hf_token", None) is True  # placed earlier: found
        assert place_secret(conn, "hf_token", TOKEN + "2") is True
    assert oct(modes[f".hf_token.{target.host}.tmp"]) == "0o600"
    assert oct(secrets_dir.stat().st_mode & 0o777) == "0o700"
    assert (secrets_dir / "hf_token").read_text() == TOKEN + "2"
    assert oct((secrets_dir / "hf_token").stat().st_mode & 0o777) == "0o600"
    assert [p.name for p in secrets_dir.iterdir()] == ["hf_token"]  # replaced by rename: no temporary left
    assert not list(scratch.rglob("canary"))


def test_a_failed_upload_names_the_job_not_the_secret(sshd_host, scratch):
    state = scratch / "state"
    (state / "jobs").mkdir(parents=True)  # made by this test (root): the remote user cannot stage a job in it
    with connect(sshd_host.target(state)) as conn, pytest.raises(Unreachable, match="upload of job locked") as failed:
        jobs.start(conn, "locked", "true", secret_env={"HF_TOKEN": TOKEN})
    assert TOKEN not in str(failed.value)


def test_an_upload_cut_by_a_dropped_link_is_unreachable(sshd_host, scratch, monkeypatch):
    with connect(sshd_host.target(scratch / "state")) as conn:

        def dropped(*args, **kwargs):
            raise EOFError  # what paramiko raises when the link goes mid-transfer

        monkeypatch.setattr(conn.sftp(), "open", dropped)
        with pytest.raises(Unreachable, match="upload of job cut") as failed:
            jobs.start(conn, "cut", "true", secret_env={"HF_TOKEN": TOKEN})
        assert not conn.is_connected  # closed: the next command reconnects instead of using a dead link
    assert TOKEN not in str(failed.value)

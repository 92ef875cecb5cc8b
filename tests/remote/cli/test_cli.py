"""`python -m remote …` as scripts use it: help for every verb, JSON out, exit codes that mean one thing."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from remote.ssh.errors import (
    EXIT_BAD_INPUT,
    EXIT_HOST_KEY,
    EXIT_JOB_LOST,
    EXIT_NOT_FOUND,
    EXIT_SOME_HOSTS_FAILED,
    EXIT_UNREACHABLE,
)
from tests.ssh_testbed import free_port, wait_until

VERBS = ("wait", "bootstrap", "run", "start", "status", "follow", "cancel", "fetch", "phase", "start-run", "put-secret")
REPO = Path(__file__).resolve().parents[3]


def cli_env(target=None, env=None) -> dict[str, str]:
    full_env = {k: v for k, v in os.environ.items() if k != "TPU_SFT_TARGET"}
    if target is not None:
        full_env["TPU_SFT_TARGET"] = target.to_json()
    return {**full_env, **(env or {})}


def cli(*args, target=None, env=None, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "remote", *args],
        capture_output=True,
        text=True,
        env=cli_env(target, env),
        cwd=REPO,
        timeout=timeout,
    )


def test_help_for_every_verb():
    top = cli("--help")
    assert top.returncode == 0 and all(verb in top.stdout for verb in VERBS)
    for verb in VERBS:
        result = cli(verb, "--help")
        assert result.returncode == 0, verb
        assert "exit codes" in result.stdout and "TPU_SFT_TARGET" in result.stdout, verb


def test_start_follow_status_through_the_cli(target, scratch):
    release = scratch / "release"  # the job stays silent until the test has seen the follower say so
    job = f'echo "$GREETING"; while [ ! -e {release} ]; do sleep 0.05; done; echo bye; exit 3'
    started = cli("start", "job-1", job, "--env", "GREETING=hi there", target=target)
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout)["state"] == "running"
    out, err = scratch / "follow.out", scratch / "follow.err"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        follower = subprocess.Popen(
            [sys.executable, "-m", "remote", "follow", "job-1", "--heartbeat", "0.3"],
            stdout=stdout,
            stderr=stderr,
            env=cli_env(target),
            cwd=REPO,
        )
    try:
        wait_until(lambda: "job-1 still running" in err.read_text(), 300, "progress while the log is silent")
        release.touch()
        assert follower.wait(60) == 3
    finally:
        follower.kill()
        follower.wait()
    *lines, summary = out.read_text().splitlines()
    assert lines == ["hi there", "bye"]
    assert json.loads(summary)["exit_code"] == 3
    status = cli("status", "job-1", target=target)
    assert (status.returncode, json.loads(status.stdout)["state"]) == (0, "failed")


def test_secret_env_comes_from_the_callers_environment(target, scratch):
    token = "hf_cliFAKEtoken987654321"
    started = cli(
        "start",
        "secret-job",
        f'[ "$HF_TOKEN" = {token} ] && echo matched',
        "--secret-env",
        "HF_TOKEN",
        target=target,
        env={"HF_TOKEN": token},
    )
    assert started.returncode == 0 and token not in started.stdout + started.stderr
    # The command line above carries the token only because this test compares it; --secret-env never does.
    followed = cli("follow", "secret-job", target=target)
    assert followed.stdout.splitlines()[0] == "matched"
    missing = cli("start", "other", "true", "--secret-env", "TPU_SFT_UNSET_TOKEN", target=target)
    assert missing.returncode == EXIT_BAD_INPUT and "$TPU_SFT_UNSET_TOKEN is not set" in missing.stderr


def test_run_returns_the_commands_exit_code_and_output(target):
    result = cli("run", "echo out; echo err >&2; exit 5", target=target)
    assert (result.returncode, result.stdout, result.stderr) == (5, "out\n", "err\n")


def test_run_on_all_hosts_names_the_failing_one(cluster, scratch):
    result = cli(
        "run",
        "--all-hosts",
        'case "$SSH_CONNECTION" in *" 127.0.0.4 "*) exit 9;; esac; echo ok',
        target=cluster.target(scratch),
    )
    assert result.returncode == EXIT_SOME_HOSTS_FAILED
    assert result.stdout.splitlines() == ["127.0.0.2: ok", "127.0.0.3: ok"]
    assert "127.0.0.4: exited 9" in result.stderr


def test_cancel_then_follow_reports_the_job_lost(target):
    assert cli("start", "long", "sleep 60", target=target).returncode == 0
    cancelled = cli("cancel", "long", "--grace", "1", target=target)
    assert json.loads(cancelled.stdout)["state"] == "cancelled"
    followed = cli("follow", "long", target=target)
    assert followed.returncode == EXIT_JOB_LOST and "cancelled without an exit code" in followed.stderr


def test_fetch_prints_what_it_verified(target, scratch, tmp_path):
    (scratch / "result.json").write_text('{"loss": 1.5}')
    result = cli("fetch", str(scratch / "result.json"), "--to", str(tmp_path), target=target)
    assert result.returncode == 0, result.stderr
    [entry] = json.loads(result.stdout)
    assert entry["size"] == 13 and (tmp_path / "result.json").read_text() == '{"loss": 1.5}'


@pytest.mark.parametrize(
    "case, expected",
    [
        ("bad target", EXIT_BAD_INPUT),
        ("no such job", EXIT_NOT_FOUND),
        ("unknown host key", EXIT_HOST_KEY),
        ("nothing listening", EXIT_UNREACHABLE),
    ],
)
def test_exit_codes(target, tmp_path, case, expected):
    args, env, t = ["status", "some-job"], {}, target
    if case == "bad target":
        t, env = None, {"TPU_SFT_TARGET": target.to_json().replace(f'"port": {target.port}', '"port": 0')}
    elif case == "unknown host key":
        (tmp_path / "empty").write_text("")
        args += ["--known-hosts", str(tmp_path / "empty")]
    elif case == "nothing listening":
        args += ["--port", str(free_port("127.0.0.1"))]
    result = cli(*args, target=t, env=env)
    assert result.returncode == expected, result.stderr
    assert result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1


def test_phase_without_a_token_stops_before_starting_a_job(target, scratch):
    full = json.dumps({"profile": "full"})
    result = cli("phase", "convert", target=target, env={"TPU_SFT_PIPELINE": full, "HF_TOKEN": ""})
    assert result.returncode == EXIT_BAD_INPUT
    assert "no HF token on the host" in result.stderr and result.stderr.count("\n") <= 3
    assert not (Path(target.state_dir) / "jobs").exists()


def test_put_secret_stores_the_token_0600_without_printing_it(target, scratch):
    token = "hf_" + "Cl1Put" * 6
    stored = subprocess.run(
        [sys.executable, "-m", "remote", "put-secret", "hf_token"],
        input=token,
        text=True,
        capture_output=True,
        cwd=REPO,
        env={**os.environ, "TPU_SFT_TARGET": target.to_json()},
    )
    assert stored.returncode == 0, stored.stderr
    assert token not in stored.stdout + stored.stderr
    secret = Path(target.state_dir) / "secrets" / "hf_token"
    assert secret.read_text() == token and oct(secret.stat().st_mode & 0o777) == "0o600"


def test_the_model_is_kept_only_on_a_mounted_data_disk(target, scratch):
    from remote.pipeline.mount import require_mounted
    from remote.ssh.connection import connect
    from remote.ssh.errors import RemoteError

    with connect(target) as conn:
        require_mounted(conn, "/proc", 1)  # a mount point: returns at once
        started = time.monotonic()
        with pytest.raises(RemoteError, match=f"nothing is mounted at {scratch} after 2 s"):
            require_mounted(conn, str(scratch), 2)
        assert 1.5 < time.monotonic() - started < 10

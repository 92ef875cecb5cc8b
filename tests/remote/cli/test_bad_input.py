"""Bad input to `python -m remote`, case by case: one line on stderr naming the problem, the bad-input exit code,
never a traceback, and nothing reached over the network (the target's port 1 would refuse: exit 69)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from remote.ssh.errors import EXIT_BAD_INPUT

REPO = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    expect: str  # a part of the one error line that names the problem
    target: dict | str = field(default_factory=dict)  # merged into the good target; a str replaces it whole
    env: dict = field(default_factory=dict)
    stdin: bytes = b""


def c(id_, argv, expect, **kwargs) -> Case:
    return Case(id_, tuple(argv.split()) if isinstance(argv, str) else tuple(argv), expect, **kwargs)


GOOD_PIPELINE = json.dumps({"profile": "tiny", "steps": 2})
PHASE_ENV = {"TPU_SFT_PIPELINE": GOOD_PIPELINE}

CASES = [
    # the target, as $TPU_SFT_TARGET
    c("target-not-json", "status j", "not valid JSON", target="{"),
    c("target-list", "status j", "expected a JSON object, got list", target="[]"),
    c("target-number", "status j", "expected a JSON object, got int", target="5"),
    c("target-null", "status j", "expected a JSON object, got NoneType", target="null"),
    c("target-string", "status j", "expected a JSON object, got str", target='"10.0.0.2"'),
    c("target-unknown-field", "status j", "target.hots: is not a target field", target={"hots": "x"}),
    c("target-missing-user", "status j", "target.user: is missing", target={"user": None}),
    c("host-trailing-newline", "status j", "is not a host name", target={"host": "10.0.0.2\n"}),
    c("host-non-ascii", "status j", "is not a host name", target={"host": "ｈost"}),
    c("host-space", "status j", "is not a host name", target={"host": "a b"}),
    c("host-number", "status j", "is not a host name", target={"host": 10}),
    c("user-upper-case", "status j", "is not a login name", target={"user": "Root"}),
    c("user-trailing-newline", "status j", "is not a login name", target={"user": "ubuntu\n"}),
    c("user-non-ascii", "status j", "is not a login name", target={"user": "jösé"}),
    c("port-string", "status j", "target.port", target={"port": "22"}),
    c("port-zero", "status j", "target.port", target={"port": 0}),
    c("port-too-big", "status j", "target.port", target={"port": 70000}),
    c("port-bool", "status j", "target.port", target={"port": True}),
    c("port-float", "status j", "target.port", target={"port": 22.5}),
    c("connect-timeout-negative", "status j", "target.connect_timeout", target={"connect_timeout": -1}),
    c("connect-timeout-zero", "status j", "target.connect_timeout", target={"connect_timeout": 0}),
    c("connect-timeout-string", "status j", "target.connect_timeout", target={"connect_timeout": "10"}),
    c(
        "command-timeout-nan",
        "status j",
        "target.command_timeout",
        target='{"host": "127.0.0.1", "user": "t", "key_path": "k", "known_hosts": "h", "command_timeout": NaN}',
    ),
    c("keepalive-zero", "status j", "target.keepalive_s", target={"keepalive_s": 0}),
    c("keepalive-float", "status j", "target.keepalive_s", target={"keepalive_s": 1.5}),
    c("workers-string", "status j", "target.workers", target={"workers": "a,b"}),
    c("workers-number", "status j", "target.workers", target={"workers": [5]}),
    c("workers-repeat-host", "status j", "lists a host twice", target={"workers": ["127.0.0.1"]}),
    c("trust-string", "status j", "target.trust_on_first_use", target={"trust_on_first_use": "yes"}),
    c("state-dir-tilde", "status j", "target.state_dir", target={"state_dir": "~/x"}),
    c("state-dir-dash", "status j", "target.state_dir", target={"state_dir": "-rf"}),
    c("state-dir-newline", "status j", "target.state_dir", target={"state_dir": "a\nb"}),
    c("gateway-empty", "status j", "target.gateway", target={"gateway": " "}),
    c("key-path-empty", "status j", "target.key_path", target={"key_path": ""}),
    c("known-hosts-not-utf8", "status j", "is not a text file (not UTF-8)", target={"known_hosts": "{tmp}/binary"}),
    c("known-hosts-a-directory", "status j", "cannot be read as a known_hosts file", target={"known_hosts": "{tmp}"}),
    c("known-hosts-missing", "status j", "does not exist", target={"known_hosts": "{tmp}/none"}),
    c("key-a-directory", "status j", "is not a file", target={"key_path": "{tmp}"}),
    c("host-does-not-resolve", "wait --deadline 600", "does not resolve", target={"host": "no-such-host.invalid"}),
    # target flags
    c("flag-port-word", "status j --port abc", "--port: 'abc' is not a TCP port"),
    c("flag-port-arabic-digits", "status j --port ٢٢", "is not a TCP port"),
    c("flag-port-newline", ["status", "j", "--port", "22\n"], "is not a TCP port"),
    c("flag-port-zero", "status j --port 0", "is not a TCP port"),
    c("flag-host-newline", ["status", "j", "--host", "h\n"], "is not a host name"),
    c("flag-user-newline", ["status", "j", "--user", "u\n"], "is not a login name"),
    c("flag-connect-timeout-negative", "status j --connect-timeout -1", "--connect-timeout"),
    c("flag-connect-timeout-nan", "status j --connect-timeout nan", "is not a number of seconds"),
    c("flag-connect-timeout-inf", "status j --connect-timeout inf", "is not a number of seconds"),
    c("flag-command-timeout-zero", "status j --command-timeout 0", "is not more than 0"),
    c("flag-command-timeout-digits", "status j --command-timeout ١٠", "is not a number of seconds"),
    c("flag-state-dir-tilde", "status j --state-dir ~x", "target.state_dir"),
    # verbs' own flags
    c("wait-deadline-negative", "wait --deadline -5", "--deadline"),
    c("wait-deadline-zero", "wait --deadline 0", "is not more than 0"),
    c("wait-deadline-non-ascii", "wait --deadline ١٠", "is not a number of seconds"),
    c("run-timeout-zero", "run true --timeout 0", "is not more than 0"),
    c("run-timeout-negative", "run true --timeout -1", "--timeout"),
    c("run-timeout-underscore", "run true --timeout 1_0", "is not a number of seconds"),
    c("run-env-without-equals", "run true --env NAME", "expected NAME=VALUE"),
    c("run-env-bad-name", "run true --env BAD-NAME=x", "is not valid"),
    c("run-env-name-newline", ["run", "true", "--env", "A\n=x"], "is not valid"),
    c("follow-offset-negative", "follow j --offset -1", "--offset"),
    c("follow-offset-non-ascii", "follow j --offset ٣", "is not a byte offset"),
    c("follow-offset-float", "follow j --offset 1.5", "is not a byte offset"),
    c("follow-reconnect-deadline-zero", "follow j --reconnect-deadline 0", "is not more than 0"),
    c("follow-heartbeat-negative", "follow j --heartbeat -1", "--heartbeat"),
    c("cancel-grace-negative", "cancel j --grace -1", "--grace"),
    c("cancel-grace-nan", "cancel j --grace nan", "is not a number of seconds"),
    c("cancel-grace-too-long", "cancel j --grace 99999", "more than an hour"),
    c("job-id-escape", "status ../escape", "job id '../escape' is not valid"),
    c("job-id-newline", ["status", "job\n"], "is not valid"),
    c("job-id-non-ascii", "status jöb", "is not valid"),
    c("job-id-leading-dash", ["status", "--", "-job"], "is not valid"),
    c("start-empty-command", ["start", "j", " "], "the job's command is empty"),
    c("start-secret-env-unset", "start j true --secret-env TPU_SFT_UNSET_VAR", "is not set in this environment"),
    c("start-secret-env-bad-name", "start j true --secret-env 1BAD", "is not valid", env={"1BAD": "x"}),
    c("start-env-bad-name", "start j true --env 9X=1", "is not valid"),
    c("fetch-to-a-file", "fetch /etc/hostname --to {tmp}/binary", "is not a directory"),
    c("fetch-to-under-a-file", "fetch /etc/hostname --to {tmp}/binary/sub", "cannot create it"),
    c("fetch-same-base-name", "fetch /a/x /b/x --to {tmp}/out", "distinct base names"),
    c("fetch-dot-dot", "fetch /a/.. --to {tmp}/out", "distinct base names"),
    # bootstrap specs and settings
    c("spec-missing-file", "bootstrap --spec {tmp}/none.json", "cannot read"),
    c("spec-not-utf8", "bootstrap --spec {tmp}/binary", "is not UTF-8 text"),
    c("spec-not-json", "bootstrap --spec {tmp}/spec-not-json.json", "is not valid JSON"),
    c("spec-list", "bootstrap --spec {tmp}/spec-list.json", "must be a JSON object"),
    c("spec-steps-number", "bootstrap --spec {tmp}/spec-steps-number.json", "steps must be a non-empty list"),
    c("spec-step-not-object", "bootstrap --spec {tmp}/spec-step-string.json", "step 1 must be an object"),
    c("spec-step-extra-key", "bootstrap --spec {tmp}/spec-step-extra.json", "step 1 must be an object"),
    c("spec-step-name-newline", "bootstrap --spec {tmp}/spec-name-newline.json", "name 'a\\nb' is not"),
    c("spec-step-command-number", "bootstrap --spec {tmp}/spec-command-number.json", "command must be a non-empty"),
    c("spec-step-timeout-negative", "bootstrap --spec {tmp}/spec-timeout-negative.json", "timeout_s -1"),
    c("spec-env-list", "bootstrap --spec {tmp}/spec-env-list.json", "env must be an object"),
    c("spec-env-value-number", "bootstrap --spec {tmp}/spec-env-number.json", "env must be an object"),
    c("spec-env-bad-name", "bootstrap --spec {tmp}/spec-env-name.json", "is not valid"),
    c("spec-and-config", "bootstrap --spec {tmp}/spec-list.json --config {tmp}/config-list.json", "not both"),
    c("config-list", "bootstrap --config {tmp}/config-list.json", "must be a JSON object, got list"),
    c("config-steps-non-ascii", "bootstrap --config {tmp}/config-steps-arabic.json", "tpu-sft:steps: expected a whole"),
    c("config-steps-newline", "bootstrap --config {tmp}/config-steps-newline.json", "tpu-sft:steps: expected a whole"),
    c("config-version-newline", "bootstrap --config {tmp}/config-version-newline.json", "tpu-sft:maxtextVersion"),
    c("config-version-non-ascii", "bootstrap --config {tmp}/config-version-arabic.json", "tpu-sft:maxtextVersion"),
    c("config-learning-rate-nan", "bootstrap --config {tmp}/config-lr-nan.json", "tpu-sft:learningRate"),
    # phase: bad input still ends with the summary line (checked below)
    c("phase-unknown", "phase deploy", "invalid choice: 'deploy'"),
    c("phase-no-settings", "phase train", "TPU_SFT_PIPELINE is not set"),
    c("phase-settings-list", "phase train", "must be a JSON object, got list", env={"TPU_SFT_PIPELINE": "[]"}),
    c("phase-settings-null", "phase train", "must be a JSON object, got NoneType", env={"TPU_SFT_PIPELINE": "null"}),
    c("phase-settings-not-json", "phase train", "is not valid JSON", env={"TPU_SFT_PIPELINE": "{steps"}),
    c("phase-settings-steps-newline", "phase train", "tpu-sft:steps", env={"TPU_SFT_PIPELINE": '{"steps": "5\\n"}'}),
    c("phase-run-name-newline", "phase train", "tpu-sft:runName", env={"TPU_SFT_PIPELINE": '{"runName": "a\\n"}'}),
    c(
        "phase-profile-spec-steps-number",
        "phase bootstrap",
        "steps must be a non-empty list",
        env=PHASE_ENV,
        target={"profile": {"bootstrap": {"steps": 5}}},
    ),
    c(
        "phase-profile-spec-env-string",
        "phase train",
        "env must be an object",
        env=PHASE_ENV,
        target={"profile": {"bootstrap": {"steps": [{"name": "a", "command": "true"}], "env": "x"}}},
    ),
    c(
        "phase-profile-scratch-relative",
        "phase train",
        "target.profile.scratch_dir",
        env=PHASE_ENV,
        target={"profile": {"scratch_dir": "w"}},
    ),
    c(
        "phase-profile-kept-dir-newline",
        "phase train",
        "target.profile.kept_dir",
        env=PHASE_ENV,
        target={"profile": {"kept_dir": "/o\n"}},
    ),
    c(
        "phase-profile-list",
        "phase train",
        "target.profile: [] is not a host profile",
        env=PHASE_ENV,
        target={"profile": []},
    ),
    c(
        "phase-host-does-not-resolve",
        "phase train",
        "does not resolve",
        env=PHASE_ENV,
        target={"host": "no-such-host.invalid"},
    ),
    # the command line itself
    c("no-verb", "", "the following arguments are required: VERB"),
    c("unknown-verb", "deploy", "invalid choice: 'deploy'"),
    c("unknown-flag", "status j --colour", "unrecognized arguments: --colour"),
    c("put-secret-empty", "put-secret hf_token", "stdin was empty"),
    c("put-secret-not-utf8", "put-secret hf_token", "stdin is not UTF-8 text", stdin=b"\xff\xfe token"),
    c("put-secret-unknown-name", "put-secret aws_key", "invalid choice: 'aws_key'"),
]


def _write_inputs(tmp: Path) -> None:
    (tmp / "key").write_text("not a key, never read: nothing connects\n")
    (tmp / "known_hosts").write_text("")
    (tmp / "binary").write_bytes(b"\xff\xfe\x00binary")
    (tmp / "out").mkdir()
    files = {
        "spec-not-json.json": "{steps",
        "spec-list.json": "[]",
        "spec-steps-number.json": {"steps": 5},
        "spec-step-string.json": {"steps": ["true"]},
        "spec-step-extra.json": {"steps": [{"name": "a", "command": "true", "sudo": True}]},
        "spec-name-newline.json": {"steps": [{"name": "a\nb", "command": "true"}]},
        "spec-command-number.json": {"steps": [{"name": "a", "command": 5}]},
        "spec-timeout-negative.json": {"steps": [{"name": "a", "command": "true", "timeout_s": -1}]},
        "spec-env-list.json": {"steps": [{"name": "a", "command": "true"}], "env": [["A", "1"]]},
        "spec-env-number.json": {"steps": [{"name": "a", "command": "true"}], "env": {"A": 1}},
        "spec-env-name.json": {"steps": [{"name": "a", "command": "true"}], "env": {"A;rm": "1"}},
        "config-list.json": [],
        "config-steps-arabic.json": {"steps": "٣"},
        "config-steps-newline.json": {"steps": "3\n"},
        "config-version-newline.json": {"maxtextVersion": "0.2.2\n"},
        "config-version-arabic.json": {"maxtextVersion": "0.2.٢"},
        "config-lr-nan.json": {"learningRate": "nan"},
    }
    for name, content in files.items():
        (tmp / name).write_text(content if isinstance(content, str) else json.dumps(content))


def _run(case: Case, tmp: Path) -> tuple[subprocess.CompletedProcess, float]:
    good = {
        "host": "127.0.0.1",
        "port": 1,
        "user": "tester",
        "key_path": f"{tmp}/key",
        "known_hosts": f"{tmp}/known_hosts",
        "connect_timeout": 1,
        "command_timeout": 2,
    }
    if isinstance(case.target, str):
        target = case.target
    else:
        given = {k: v.replace("{tmp}", str(tmp)) if isinstance(v, str) else v for k, v in case.target.items()}
        merged = {**good, **given}
        target = json.dumps({k: v for k, v in merged.items() if v is not None})
    env = {k: v for k, v in os.environ.items() if not k.startswith("TPU_SFT_") and k != "HF_TOKEN"}
    env.update(TPU_SFT_TARGET=target, **case.env)
    argv = [a.replace("{tmp}", str(tmp)) for a in case.argv]
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "remote", *argv],
            input=case.stdin,
            capture_output=True,
            env=env,
            cwd=REPO,
            timeout=60,
        )
    except subprocess.TimeoutExpired as e:  # that case fails, the others still run
        done = subprocess.CompletedProcess(e.cmd, -1, b"", b"(still running after 60 s)")
    return done, time.monotonic() - started


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess, float]]:
    """Every case, run at once (each is a fresh interpreter: ~0.5 s of imports)."""
    tmp = tmp_path_factory.mktemp("bad-input")
    _write_inputs(tmp)
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip((case.id for case in CASES), pool.map(lambda case: _run(case, tmp), CASES), strict=True))


def test_the_table_covers_every_class_of_bad_input():
    assert len(CASES) >= 60 and len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_is_one_line_naming_the_problem(case, outcomes):
    done, seconds = outcomes[case.id]
    stderr = done.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert case.expect in lines[0], lines[0]
    assert done.returncode == EXIT_BAD_INPUT, (done.returncode, lines[0])
    assert seconds < 20  # nothing waits: not even for a name that does not resolve
    if case.argv[:1] == ("phase",) and case.argv[1] in ("train", "bootstrap"):
        summary = json.loads(done.stdout.decode().splitlines()[-1])  # a phase's last stdout line, even here
        assert summary["ok"] is False and summary["event"] == "summary" and summary["error"]

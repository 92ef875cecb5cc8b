"""`scripts/tpu-sft status | logs | cancel | fetch-model` against the stack's outputs (the mock engine's record, through
the `pulumi` stand-in) and a real sshd standing for the VM: a running run, a finished one, a cancelled one, a VM that
does not answer, and one line for each thing that is wrong."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from remote.pipeline.target import PipelineTarget
from remote.ssh import jobs
from remote.ssh.connection import connect
from remote.ssh.errors import EXIT_BAD_INPUT, EXIT_NOT_FOUND, EXIT_UNREACHABLE
from tests.remote.pulumi_standin import NO_STACK
from tests.remote.stack_commands import (
    FINISHED,
    REPO,
    RUNNING,
    SCRIPT,
    STACK_COMMANDS,
    follow_logs,
    standing_at,
    tpu_sft,
)
from tests.ssh_testbed import free_port, wait_until
from tests.standin_http import reply_json
from workload.core.contract import PROJECT_PYTHON

VERBS = (("status",), ("logs",), ("cancel",), ("fetch-model",))


def no_copy(recorded: dict, gcs, tmp_path: Path) -> dict:
    """The outputs with the VM's copy in the bucket at a prefix that holds none (a model kept before the VM copied it
    there): fetch-model goes to the VM."""
    target = json.loads(recorded["target"])
    target["profile"]["kept_copy_dir"] = gcs.gs(f"kept-{tmp_path.name}")
    return {**recorded, "target": json.dumps(target)}


@pytest.fixture
def nobody_there(recorded, gcs, tmp_path):
    """The outputs with the VM at a port nobody listens on: a VM that does not answer (and no copy in the bucket)."""
    target = json.loads(no_copy(recorded, gcs, tmp_path)["target"]) | {
        "host": "127.0.0.1",
        "port": free_port("127.0.0.1"),
        "known_hosts": str(tmp_path / "known_hosts"),
        "connect_timeout": 3,
    }
    return {**recorded, "target": json.dumps(target)}


def one_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_the_script_runs_the_commands_with_the_projects_python_in_its_directory(tmp_path):
    """From any directory, scripts/tpu-sft runs `python -m remote.stack` with its arguments as given, in the project
    directory, with the project's Python (the contract's PROJECT_PYTHON, which scripts/venv makes)."""
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    shutil.copy2(SCRIPT, project / "scripts" / "tpu-sft")
    python = project / PROJECT_PYTHON
    python.parent.mkdir(parents=True)
    python.write_text('#!/bin/sh\npwd -P\nprintf "%s\\n" "$@"\n')
    python.chmod(0o755)
    args = ["logs", "--stack", "my stack"]
    result = subprocess.run(
        [str(project / "scripts" / "tpu-sft"), *args], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert result.stdout.splitlines() == [str(project.resolve()), "-m", "remote.stack", *args]


def test_help_says_what_each_command_does():
    result = subprocess.run([*STACK_COMMANDS, "--help"], cwd=REPO, capture_output=True, text=True, check=True)
    assert all(verb in result.stdout for verb in ("status", "logs", "cancel", "fetch-model"))


def test_without_the_pulumi_cli_it_says_so(tmp_path):
    result = subprocess.run(
        [*STACK_COMMANDS, "status"], cwd=REPO, capture_output=True, text=True, env={"PATH": str(tmp_path)}
    )
    assert result.returncode == EXIT_BAD_INPUT
    assert "the pulumi CLI is not on PATH" in one_line(result)


@pytest.mark.parametrize("verb", VERBS)
def test_a_stack_without_a_vm_yet_says_so_in_one_line(tmp_path, verb):
    result = tpu_sft(tmp_path, {}, *verb)
    assert result.returncode == EXIT_NOT_FOUND
    assert one_line(result) == "error: the selected stack has no VM yet (no `target` output): run `pulumi up` first"


def test_no_stack_selected_says_so_in_one_line_with_the_fix(tmp_path):
    """scripts/tpu-sft reads the selected stack, never a file: with none selected, pulumi's own words and the fix."""
    result = tpu_sft(tmp_path, None, "status")
    assert result.returncode == EXIT_BAD_INPUT
    assert one_line(result) == (
        f"error: pulumi could not read the stack's outputs ({NO_STACK}); run this in the project directory, with a "
        "stack selected (`pulumi stack select`) or --stack NAME"
    )


def test_a_stack_pulumi_does_not_know_is_named(tmp_path, recorded):
    result = tpu_sft(tmp_path, recorded, "status", "--stack", "prod")
    assert result.returncode == EXIT_BAD_INPUT
    assert "(no stack named 'prod' found); run this in the project directory, with --stack prod" in one_line(result)


@pytest.mark.parametrize("verb", VERBS)
def test_a_missing_ssh_key_says_so_before_connecting(tmp_path, recorded, gcs, verb):
    target = json.loads(no_copy(recorded, gcs, tmp_path)["target"])
    target["key_path"] = str(tmp_path / "gone" / "id_ed25519")
    env = {"STORAGE_EMULATOR_HOST": gcs.url}
    result = tpu_sft(tmp_path, {**recorded, "target": json.dumps(target)}, *verb, env=env)
    assert result.returncode == EXIT_BAD_INPUT
    assert f"the stack's SSH private key {tmp_path}/gone/id_ed25519 is not on this machine" in one_line(result)


@pytest.mark.parametrize("verb", (("logs",), ("cancel",)))
def test_a_vm_that_does_not_answer_is_said_in_one_line(tmp_path, nobody_there, verb):
    result = tpu_sft(tmp_path, nobody_there, *verb)
    assert result.returncode == EXIT_UNREACHABLE
    line = one_line(result)
    assert "does not answer SSH" in line
    # Without a gcloud login, what Compute Engine would say is unknown, and said so: never a guess.
    assert "VM tpu-sft-rehearsal: its state is unknown (cannot ask gcloud for an access token" in line


class ComputeStandin:
    """Compute Engine's instances.get for the stack's VM, answering `status` (None: 404, the VM is gone) and its
    `scheduling.automaticRestart`, and a `gcloud` that prints a token: a stand-in for Google's API, which this machine
    cannot reach. A POST (a start) is recorded and refused, as Google refuses a stopped TPU VM's start
    (tests/workload/gce_standin.py)."""

    def __init__(self, bin_dir, status: str | None, automatic_restart: bool = True):
        self.status, self.automatic_restart = status, automatic_restart
        self.asked: list[tuple[str, str | None]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                outer.asked.append((self.path, self.headers.get("Authorization")))
                if outer.status is None:
                    reply_json(self, 404, {"error": {"code": 404, "message": "not found"}})
                else:
                    scheduling = {"automaticRestart": outer.automatic_restart}
                    reply_json(self, 200, {"status": outer.status, "scheduling": scheduling})

            def do_POST(self):
                outer.asked.append((self.path, self.headers.get("Authorization")))
                reply_json(self, 400, {"error": {"code": 400, "message": "TPU instances cannot be restarted"}})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        bin_dir.mkdir(parents=True, exist_ok=True)
        (bin_dir / "gcloud").write_text("#!/bin/sh\necho ya29.standin\n")
        (bin_dir / "gcloud").chmod(0o755)
        self.env = {"TPU_SFT_COMPUTE_API": f"http://127.0.0.1:{self.server.server_address[1]}"}


# Without the bucket's copy of the run's log (this stack's bucket is not reachable here), the line says no step.
STOPPED_FOR_GOOD = (
    "VM tpu-sft-rehearsal stopped for good ({}): `pulumi up` replaces it; the run resumes from its last checkpoint"
)
RESTARTING = "VM tpu-sft-rehearsal: Google is restarting it ({}): the run resumes by itself"


@pytest.mark.parametrize(
    ("status", "automatic_restart", "says"),
    [
        (None, True, "VM tpu-sft-rehearsal is gone (autostop deletes an idle VM; the data disk and bucket stay)"),
        ("TERMINATED", True, STOPPED_FOR_GOOD.format("TERMINATED")),
        ("TERMINATED", False, STOPPED_FOR_GOOD.format("TERMINATED")),
        ("STOPPING", True, RESTARTING.format("STOPPING")),
        ("REPAIRING", True, RESTARTING.format("REPAIRING")),
        ("PROVISIONING", False, RESTARTING.format("PROVISIONING")),
        (
            "STOPPING",
            False,
            "VM tpu-sft-rehearsal stopped for good (STOPPING, no automatic restart): `pulumi up` replaces it once it "
            "has stopped; the run resumes from its last checkpoint",
        ),
    ],
)
def test_status_of_a_vm_that_does_not_answer_asks_compute_engine(
    tmp_path, nobody_there, gcs, status, automatic_restart, says
):
    google = ComputeStandin(tmp_path / "bin", status, automatic_restart)
    result = tpu_sft(tmp_path, nobody_there, "status", env=google.env)
    assert result.returncode == EXIT_UNREACHABLE
    first = result.stdout.splitlines()[0]
    assert first.startswith("VM: 127.0.0.1 does not answer SSH") and says in first
    assert google.asked == [
        (
            "/compute/v1/projects/rehearsal-project/zones/us-east5-b/instances/tpu-sft-rehearsal",
            "Bearer ya29.standin",
        )
    ]
    storage = {"STORAGE_EMULATOR_HOST": gcs.url}  # the bucket holds no copy: the model is on the VM's data disk
    fetched = tpu_sft(tmp_path, nobody_there, "fetch-model", str(tmp_path / "model"), env={**google.env, **storage})
    assert fetched.returncode == EXIT_UNREACHABLE
    if status == "TERMINATED":  # never started: a person cannot start a TPU VM; `pulumi up` replaces it
        assert one_line(fetched).endswith(
            "the model is on the data disk of VM tpu-sft-rehearsal, which is stopped for good (TERMINATED; a person "
            "cannot start a TPU VM): run `pulumi up`, which replaces it with the same data disk, then fetch-model again"
        )
    else:
        assert "the model is on the VM's data disk, and" in one_line(fetched) and says in fetched.stderr
    assert not (tmp_path / "model").exists()
    assert all(path.endswith("/instances/tpu-sft-rehearsal") for path, _ in google.asked)  # gets only, no start
    flag = tpu_sft(tmp_path, nobody_there, "fetch-model", "--start-vm", env=google.env)
    assert flag.returncode == EXIT_BAD_INPUT and "unrecognized arguments: --start-vm" in flag.stderr  # not offered


@pytest.mark.parametrize(
    ("status", "says"),
    [
        (
            "TERMINATED",
            "VM tpu-sft-rehearsal stopped for good (TERMINATED): `pulumi up` replaces it; the run resumes from step 40",
        ),
        ("STOPPING", "VM tpu-sft-rehearsal: Google is restarting it (STOPPING): the run resumes by itself"),
    ],
)
def test_status_says_from_which_step_a_new_vm_resumes(tmp_path, recorded, gcs, status, says):
    """The step is the last checkpoint the run finished in the bucket, beside its log's copy: 60's commit marker is
    not written yet (orbax writes it last), so a new VM resumes from 40."""
    runs = f"status-{status.lower()}/runs"  # this test's own runs: another's log copy is never the latest here
    run_dir = f"{runs}/gemma3-4b/post-train/run-a"
    gcs.put(f"{run_dir}/run-log/20261201T000000Z.jsonl", b"".join(f"{line}\n".encode() for line in RUNNING))
    for step in (20, 40):
        gcs.put(f"{run_dir}/checkpoints/{step}/commit_success.txt", b"ok")
    gcs.put(f"{run_dir}/checkpoints/60/items/_METADATA", b"{}")
    target = json.loads(recorded["target"]) | {
        "host": "127.0.0.1",
        "port": free_port("127.0.0.1"),
        "connect_timeout": 3,
    }
    target["profile"]["runs_dir"] = gcs.gs(runs)
    google = ComputeStandin(tmp_path / "bin", status)
    result = tpu_sft(
        tmp_path,
        {**recorded, "target": json.dumps(target)},
        "status",
        env={**google.env, "STORAGE_EMULATOR_HOST": gcs.url},
    )
    assert result.returncode == EXIT_UNREACHABLE, result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith("VM: 127.0.0.1 does not answer SSH") and first.endswith(says)


def started(target, job_id: str, command: str) -> None:
    with connect(target) as conn:
        jobs.start(conn, job_id, command)


def test_status_logs_and_cancel_of_a_running_run(tmp_path, target, scratch, recorded):
    outputs = standing_at(recorded, target)
    events = scratch / "events.jsonl"
    events.write_text("".join(f"{line}\n" for line in RUNNING))
    started(target, "zz-older", "echo an earlier job")  # started first, though its name sorts last
    started(target, "run-7", f"cat {events}; while true; do sleep 0.05; done")
    wait_until(lambda: "step" in (jobs_dir(target) / "run-7" / "log").read_text(), what="the run's step line")

    status = tpu_sft(tmp_path, outputs, "status")
    assert status.returncode == 0, status.stderr
    assert status.stdout.splitlines() == [
        f"VM tpu-sft-rehearsal: running (answers SSH at {target.host})",
        "run run-7: running · train running · step 3/10 · loss 1.2345 · ETA 1 min 10 s",
    ]
    logs = tpu_sft(tmp_path, outputs, "logs")
    assert logs.stdout.splitlines() == [
        "✓ convert done in 12 s",
        "▶ train",
        "train step 3/10 · loss 1.2345 · 1.00 s/step · ETA 1 min 10 s",
    ]
    assert tpu_sft(tmp_path, outputs, "logs", "--json").stdout.splitlines() == RUNNING

    cancelled = tpu_sft(tmp_path, outputs, "cancel", "--grace", "1")
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.startswith("run run-7 cancelled: done steps and saved checkpoints stay")
    assert "run run-7: cancelled · train running" in tpu_sft(tmp_path, outputs, "status").stdout
    again = tpu_sft(tmp_path, outputs, "cancel")
    assert again.stdout.strip() == "run run-7 already cancelled: nothing to cancel"


def test_logs_follow_a_run_to_its_end_then_status_says_finished(tmp_path, target, scratch, recorded):
    outputs = standing_at(recorded, target)
    first, rest, go = scratch / "first.jsonl", scratch / "rest.jsonl", scratch / "go"
    first.write_text("".join(f"{line}\n" for line in RUNNING))
    rest.write_text("".join(f"{line}\n" for line in FINISHED))
    started(target, "run-1", f"cat {first}; while [ ! -e {go} ]; do sleep 0.05; done; cat {rest}")
    code, shown_text, err = follow_logs(tmp_path, outputs, "train step 3/10", go.touch)
    assert code == 0, err
    shown = shown_text.splitlines()
    assert shown[-3:] == ["✓ train done in 30 s", "✓ keep done in 1 s", f"summary: {FINISHED[-1]}"]
    assert err.strip() == "the run ended (exit code 0)"
    status = tpu_sft(tmp_path, outputs, "status").stdout.splitlines()[-1]
    assert status == (
        "run run-1: succeeded · finished: every step up to keep done (step 10, loss 1.1000, model kept in /kept/run-a)"
    )


def test_a_vm_without_a_run_yet(tmp_path, target, recorded):
    outputs = standing_at(recorded, target)
    assert tpu_sft(tmp_path, outputs, "status").stdout.splitlines()[-1] == (
        "run: none started on the VM yet (`pulumi up` starts it)"
    )
    result = tpu_sft(tmp_path, outputs, "cancel")
    assert result.returncode == EXIT_NOT_FOUND
    assert one_line(result) == f"error: no run has started on {target.host}: nothing to cancel"


def jobs_dir(target) -> Path:
    return Path(jobs.jobs_root(target))


def test_the_target_in_the_outputs_round_trips(recorded, target):
    """What the stand-in serves is what a test sshd's target says, field for field."""
    assert PipelineTarget.from_json(standing_at(recorded, target)["target"]) == target

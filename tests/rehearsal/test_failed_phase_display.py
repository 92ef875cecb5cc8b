"""A phase that fails for real, shown as the rehearsal shows `pulumi up` (rehearsal/run.py `up_as_pulumi_shows`,
through pulumi-command's display, rehearsal/pulumi_display.py): the program's recorded bootstrap task, run against a
local sshd whose install step prints hundreds of progress lines and then fails, as an apt step does on a bad package
name. What `pulumi up` leaves on screen of it is its reason and the path of its whole log, in at most 5 lines; the
progress is in that log. Nothing of MaxText runs."""

from __future__ import annotations

import json

import pytest

from rehearsal.__main__ import CONFIG
from rehearsal.local_host import LocalHost
from rehearsal.run import record, up_as_pulumi_shows
from remote.pipeline.bootstrap.spec import BootstrapSpec, Step
from workload.core.contract import TARGET_ENV

pytestmark = pytest.mark.sshd  # the VM is a LocalHost: an sshd on loopback

REASON = "E: Unable to locate package tpu-sft-no-such-package"
PROGRESS = 'for n in $(seq 1 300); do echo "Get:$n http://deb.example stable/main pkg$n"; done'
INSTALL = f"{PROGRESS}; echo '{REASON}' >&2; exit 100"


@pytest.fixture
def vm(tmp_path):
    host = LocalHost.start(tmp_path / "vm")
    yield host
    host.stop()


def test_a_failed_phase_ends_pulumi_up_with_its_reason_and_log_path(vm, tmp_path, capsys):
    _, commands = record(CONFIG, vm.config_overrides())
    bootstrap = next(c for c in commands if c.name.endswith("-bootstrap"))
    task_logs = tmp_path / "task-logs"

    def environment(command):
        env = vm.environment(command.environment, tmp_path / "run", task_logs=task_logs)
        target = json.loads(env[TARGET_ENV])
        target["profile"]["bootstrap"] = BootstrapSpec((Step("apt", INSTALL, 60),)).to_mapping()  # the bad package
        return {TARGET_ENV: json.dumps(target)}

    assert up_as_pulumi_shows([bootstrap], environment) is None  # failed
    shown = capsys.readouterr().out
    end = shown.split("`pulumi up` would end with:\n", 1)[1]
    error = end.split("Diagnostics:\n", 1)[1].split("Outputs:", 1)[0].splitlines()[1:]  # under the resource's name
    log = task_logs / "bootstrap.log"
    assert 0 < len(error) <= 5, "\n".join(error)
    assert any(REASON in line for line in error) and any(str(log) in line for line in error), "\n".join(error)
    whole = log.read_text()
    assert "Get:1 http" in whole and "Get:300 http" in whole  # every progress line is in the whole log instead

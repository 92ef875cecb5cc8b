"""The one real `pulumi up` the end-to-end tests share (it runs the tiny pipeline: minutes)."""

from __future__ import annotations

import pytest

from rehearsal.__main__ import CONFIG
from rehearsal.local_host import MAXTEXT_VENV, LocalHost
from rehearsal.run import execute, record
from tests.e2e.pulumi_up import TOKEN, PsSampler, PulumiUp, close_the_laptop_after_convert_starts


@pytest.fixture(scope="session")
def pulumi_up(tmp_path_factory) -> PulumiUp:
    if not (MAXTEXT_VENV / "bin" / "python").exists():
        pytest.fail(f"{MAXTEXT_VENV} is missing: run scripts/maxtext-venv (scripts/test does)")
    directory = tmp_path_factory.mktemp("pulumi-up")
    host = LocalHost.start(directory / "vm")
    sampler = PsSampler(TOKEN)
    sampler.start()
    try:
        overrides = {**host.config_overrides(), "tpu-sft:hfToken": TOKEN}
        stack, commands = record(CONFIG, overrides, secret_keys=("tpu-sft:hfToken",))
        up = PulumiUp(host, directory, stack, commands)
        for command in commands:
            if command.name == up.phase("convert"):
                close_the_laptop_after_convert_starts(up, command)
            done = execute(command, up.env(command), echo=False)
            assert done.returncode == 0, f"{command.name}:\n{done.stdout}\n{done.stderr[-4000:]}"
            up.first[command.name] = done
        up.second = {c.name: execute(c, up.env(c), echo=False) for c in commands}
        host.sshd.stop()  # the VM gone: nothing answers at its address (the stack's key is still here)
        up.ask("status gone", "status")
    finally:
        host.stop()
    # A new VM after the first was lost: another host, empty state and scratch, the same data disk.
    new_vm = LocalHost.start(directory / "new-vm")
    try:
        up.new_vm_host = new_vm
        up.new_vm = {c.name: execute(c, up.new_vm_env(c), echo=False) for c in commands}
    finally:
        sampler.stop()
        new_vm.stop()
    up.ps_samples = sampler.samples
    up.command_lines_holding_token = sampler.holding_secret
    return up

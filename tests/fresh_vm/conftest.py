"""The one fresh-VM rehearsal the tests share: a new simulated VM, the whole tiny `pulumi up`, a second `up`,
then delete and recreate (minutes: it installs MaxText on the VM)."""

from __future__ import annotations

import io
from dataclasses import dataclass

import pytest

from rehearsal.fresh_vm.rehearse import FreshVmRun, RehearsalFailed, rehearse

USER = "tpu-sft"  # the rehearsal stack's ssh user (the settings' default)


@dataclass
class FreshVmRehearsal:
    run: FreshVmRun
    output: str
    directory: object


@pytest.fixture(scope="session")
def fresh_vm(tmp_path_factory) -> FreshVmRehearsal:
    directory = tmp_path_factory.mktemp("fresh-vm")
    out = io.StringIO()
    try:
        run = rehearse(directory, out=out)
    except RehearsalFailed as e:
        pytest.fail(f"{e}\n{out.getvalue()[-6000:]}")
    return FreshVmRehearsal(run, out.getvalue(), directory)

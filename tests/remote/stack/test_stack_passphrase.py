"""`scripts/tpu-sft status | logs | cancel | fetch-model` on a stack whose secrets provider is a passphrase: they read
the stack's outputs with `pulumi stack output`, stdin closed, which needs PULUMI_CONFIG_PASSPHRASE or
PULUMI_CONFIG_PASSPHRASE_FILE, as `pulumi up` does. Without either, or with a wrong one, the command says so in one
line naming both, never a traceback or a hang, and never prints the passphrase. The `pulumi` stand-in asks for the
passphrase as the CLI's source does (tests/remote/pulumi_standin.py: pkg/secrets/passphrase/manager.go)."""

from __future__ import annotations

import pytest

from remote.ssh.errors import EXIT_BAD_INPUT, EXIT_NOT_FOUND
from tests.remote.stack_commands import tpu_sft

VERBS = (("status",), ("logs",), ("cancel",), ("fetch-model",))
PASSPHRASE = "correct horse battery staple 7f3a"
NO_VM_YET = "error: the selected stack has no VM yet (no `target` output): run `pulumi up` first"


def one_line(result) -> str:
    assert PASSPHRASE not in result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.mark.parametrize("verb", VERBS)
def test_without_the_passphrase_each_command_names_both_variables(tmp_path, verb):
    result = tpu_sft(tmp_path, {}, *verb, passphrase=PASSPHRASE, timeout=60)
    assert result.returncode == EXIT_BAD_INPUT
    assert one_line(result) == (
        "error: the selected stack keeps its secrets under a passphrase, which `pulumi stack output` needs: set "
        "PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE (a file holding it) in this shell, as for "
        "`pulumi up`, and run this again"
    )


def test_another_stack_is_named(tmp_path):
    result = tpu_sft(tmp_path, {}, "status", "--stack", "(selected)", passphrase=PASSPHRASE)
    assert one_line(result).startswith("error: stack (selected) keeps its secrets under a passphrase")


def test_the_passphrase_in_either_variable_reads_the_stack(tmp_path):
    """Past the outputs, the stack has no VM yet: the passphrase reached pulumi, from the variable or the file."""
    given = tpu_sft(tmp_path, {}, "status", passphrase=PASSPHRASE, env={"PULUMI_CONFIG_PASSPHRASE": PASSPHRASE})
    assert (given.returncode, one_line(given)) == (EXIT_NOT_FOUND, NO_VM_YET)
    phrase_file = tmp_path / "passphrase"
    phrase_file.write_text(PASSPHRASE + "\n")
    from_file = tpu_sft(
        tmp_path, {}, "status", passphrase=PASSPHRASE, env={"PULUMI_CONFIG_PASSPHRASE_FILE": str(phrase_file)}
    )
    assert (from_file.returncode, one_line(from_file)) == (EXIT_NOT_FOUND, NO_VM_YET)


def test_a_wrong_passphrase_is_said_without_printing_it(tmp_path):
    wrong = "not-the-stack-passphrase-93c1"
    result = tpu_sft(tmp_path, {}, "status", passphrase=PASSPHRASE, env={"PULUMI_CONFIG_PASSPHRASE": wrong})
    assert result.returncode == EXIT_BAD_INPUT
    assert one_line(result) == (
        "error: the passphrase that PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE gives is not the "
        "selected stack's: give the one `pulumi up` uses, and run this again"
    )
    assert wrong not in result.stdout + result.stderr


def test_a_passphrase_file_that_cannot_be_read_is_said(tmp_path):
    env = {"PULUMI_CONFIG_PASSPHRASE_FILE": str(tmp_path / "nowhere")}
    result = tpu_sft(tmp_path, {}, "status", passphrase=PASSPHRASE, env=env)
    assert result.returncode == EXIT_BAD_INPUT
    assert one_line(result).startswith("error: pulumi cannot read the file PULUMI_CONFIG_PASSPHRASE_FILE names")


def test_a_stack_without_a_passphrase_needs_neither(tmp_path):
    result = tpu_sft(tmp_path, {}, "status")
    assert (result.returncode, one_line(result)) == (EXIT_NOT_FOUND, NO_VM_YET)

"""scripts/preflight reads the stack the user chose: the file named, else --stack's, else the one `pulumi` has
selected; never Pulumi.dev.yaml unless that stack is selected. Asked of the `pulumi` CLI stand-in."""

import pytest

from infra.config.stack_file import chosen_stack_file
from infra.preflight import compile_step
from tests.remote import pulumi_standin
from workload.core.config import ConfigError
from workload.core.contract import EXIT_BAD_INPUT


@pytest.fixture
def pulumi_selecting(tmp_path, monkeypatch):
    def select(stack):
        bin_dir = pulumi_standin.install(tmp_path / f"bin-{stack}", {}, selected=stack)
        monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")

    return select


def test_the_selected_stack_is_read_not_the_example(tmp_path, pulumi_selecting):
    pulumi_selecting("v6e-spot")
    assert chosen_stack_file(tmp_path, None) == tmp_path / "Pulumi.v6e-spot.yaml"


def test_a_named_stack_is_read_without_asking_pulumi(tmp_path, pulumi_selecting):
    pulumi_selecting(None)
    assert chosen_stack_file(tmp_path, "mine") == tmp_path / "Pulumi.mine.yaml"


def test_no_stack_selected_is_one_line_with_the_fix(tmp_path, pulumi_selecting, capsys):
    pulumi_selecting(None)
    with pytest.raises(ConfigError) as raised:
        chosen_stack_file(tmp_path, None)
    assert str(raised.value) == (
        f"the stack: none is selected ({pulumi_standin.NO_STACK}). Fix: pulumi stack select NAME (pulumi stack ls "
        "lists them; pulumi stack init NAME makes one), or pass --stack NAME"
    )
    assert compile_step.main([]) == EXIT_BAD_INPUT
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("preflight: the stack: none is selected")


def test_a_selected_stack_without_its_file_names_the_file(pulumi_selecting, capsys):
    pulumi_selecting("nowhere")
    assert compile_step.main([]) == EXIT_BAD_INPUT
    (line,) = capsys.readouterr().err.splitlines()
    assert "Pulumi.nowhere.yaml: cannot be read" in line

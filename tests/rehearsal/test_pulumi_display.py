"""The rehearsal's stand-in for what pulumi-command and the engine leave on screen (rehearsal/pulumi_display.py)."""

from rehearsal.pulumi_display import StatusLine, end, failure


def test_the_status_keeps_only_the_last_line():
    status = StatusLine()
    for line in ("▶ train\n", "train step 1/2\n", "\n", "train step 2/2\n"):
        status.line(line)
    assert status.text == "train step 2/2"


def test_a_failed_commands_error_repeats_all_it_printed():
    error = failure("python -m remote phase train", 1, "a\nb\n", "c\n")
    assert error.splitlines() == ['exit status 1: running "python -m remote phase train":', "a", "b", "c"]


def test_the_end_holds_each_phases_line_and_the_error():
    shown = end({"phases": {"train": "✓ train: 10 tokens/s"}}, {"tpu-sft-dev-pipeline-export": "exit status 1: x\ny"})
    assert shown.splitlines() == [
        "Diagnostics:",
        "  command:local:Command (tpu-sft-dev-pipeline-export):",
        "    error: exit status 1: x",
        "    y",
        "Outputs:",
        "    phases: {",
        '        train: "✓ train: 10 tokens/s"',
        "    }",
    ]

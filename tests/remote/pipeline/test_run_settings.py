"""The run's whole settings reach the task that starts it without being any task's input: the program writes them
while it updates, named by the convert settings they extend, and a task takes them only where they agree with its
own phase's settings."""

from __future__ import annotations

import json

from remote.pipeline import run_settings
from workload.core.config import PipelineConfig


def _own(phase: str, config: PipelineConfig) -> PipelineConfig:
    """What a phase task is given: its phase's settings and the ones before it (infra/phases.py)."""
    return PipelineConfig.from_mapping(config.phase_settings(phase))


def test_each_task_finds_the_whole_runs_settings_by_its_own():
    whole = PipelineConfig(step_count=2000, learning_rate=1e-4)
    run_settings.record(whole)
    for phase in ("convert", "train", "export"):
        found = run_settings.whole_run(phase, _own(phase, whole))
        assert found is not None and found.phase_settings("export") == whole.phase_settings("export"), phase


def test_settings_that_disagree_with_the_tasks_own_are_not_taken():
    run_settings.record(PipelineConfig(step_count=2000))
    assert run_settings.whole_run("train", _own("train", PipelineConfig(step_count=3000))) is None
    assert run_settings.whole_run("convert", _own("convert", PipelineConfig(step_count=3000))) is not None
    assert run_settings.whole_run("convert", _own("convert", PipelineConfig(model="gemma3-12b"))) is None


def test_a_missing_or_unreadable_file_gives_none(tmp_path, monkeypatch):
    monkeypatch.setenv(run_settings.DIR_ENV, str(tmp_path))
    own = _own("convert", PipelineConfig())
    assert run_settings.whole_run("convert", own) is None
    for text in ("not json", "[1]", json.dumps({"steps": "many"})):
        run_settings.path_for(own).write_text(text)
        assert run_settings.whole_run("convert", own) is None, text


def test_the_file_is_named_by_the_convert_settings_only():
    assert run_settings.path_for(PipelineConfig(step_count=1)) == run_settings.path_for(PipelineConfig(step_count=2))
    assert run_settings.path_for(PipelineConfig()) != run_settings.path_for(PipelineConfig(model="gemma3-12b"))

"""`scripts/preflight --data --rows N` hands N to the data check (workload/preflight/data.py `--rows`), as
docs/run-length.md says; without it the check's own default stands."""

import json
import stat

from infra.config import read_settings
from infra.config.stack_file import read_stack_config
from infra.preflight.data_preflight import check_data
from rehearsal.engine import ROOT


def fake_python(tmp_path):
    """A Python that records its argv and answers as the data check does when it could check nothing."""
    python = tmp_path / "python"
    python.write_text(
        f"#!/bin/sh\necho \"$@\" > {tmp_path}/argv\necho '{json.dumps({'findings': [], 'not_checked': 'x'})}'\n"
    )
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    return str(python)


def test_rows_reaches_the_data_check_and_is_left_out_unless_given(tmp_path):
    settings = read_settings.parse(read_stack_config(ROOT / "Pulumi.dev.yaml"), stack="dev")
    python = fake_python(tmp_path)
    assert check_data(settings, lambda: python, str(ROOT), rows=50000) == 0
    assert (tmp_path / "argv").read_text().split()[-2:] == ["--rows", "50000"]
    assert check_data(settings, lambda: python, str(ROOT)) == 0
    assert "--rows" not in (tmp_path / "argv").read_text()

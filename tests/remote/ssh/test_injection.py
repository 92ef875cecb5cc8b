"""Values and paths with shell metacharacters arrive verbatim and execute nothing."""

import pytest

from remote.ssh import jobs
from remote.ssh.connection import connect, run

NASTY = [
    "two words",
    'it\'s "quoted"',
    "a; touch {canary}",
    "$(touch {canary})",
    "`touch {canary}`",
    "line one\nline two; touch {canary}",
    "$HOME ${{PATH}} \\ * ? ~",
    "-n",
    "",
]


@pytest.mark.parametrize("template", NASTY)
def test_env_value_through_run_arrives_verbatim(target, scratch, template):
    canary = scratch / "canary"
    value = template.format(canary=canary)
    with connect(target) as conn:
        out = run(conn, 'printf %s "$VALUE"', env={"VALUE": value}).stdout
    assert out == value
    assert not canary.exists()


def test_job_env_cwd_and_state_dir_with_metacharacters(sshd_host, scratch):
    canary = scratch / "canary"
    values = {f"V{i}": t.format(canary=canary) for i, t in enumerate(NASTY)}
    workdir = scratch / "it's a $(touch canary) dir;`x`"
    workdir.mkdir()
    workdir.chmod(0o777)
    target = sshd_host.target(scratch / "state 'with' $(quotes) ;")
    command = "pwd > where; " + "; ".join(f'printf %s "${name}" > {name}' for name in values)
    with connect(target) as conn:
        jobs.start(conn, "nasty", command, env=values, cwd=str(workdir))
    assert jobs.follow(target, "nasty", lambda line: None) == 0
    assert (workdir / "where").read_text() == f"{workdir}\n"
    for name, value in values.items():
        assert (workdir / name).read_text() == value
    assert not canary.exists() and not (workdir / "canary").exists()


def test_bad_env_name_is_refused(target):
    with connect(target) as conn, pytest.raises(ValueError, match="not valid"):
        run(conn, "true", env={"A;B": "x"})

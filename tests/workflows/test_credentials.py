"""Every workflow job that can get cloud credentials runs in a GitHub environment.

A `pull_request` run uses the branch's own workflow files, so no test can stop a branch from editing them. What
stops it is outside the repository: the workload identity provider admits only GitHub's OIDC tokens whose
`environment` claim names the `preview` environment of this repository, and that environment has required
reviewers (docs/review.md). A job without `environment` gets a token with no such claim; this test
keeps the workflows here from relying on that by accident, and fails on any job that asks for an OIDC token
(`id-token: write`, or `write-all`, itself or from the workflow's top level) without naming an environment.
"""

from pathlib import Path
from typing import Any

import pytest
import yaml

WORKFLOWS = Path(__file__).resolve().parents[2] / ".github" / "workflows"


def can_get_an_oidc_token(permissions: Any) -> bool:
    if permissions == "write-all":
        return True
    return isinstance(permissions, dict) and permissions.get("id-token") == "write"


def jobs_with_oidc_tokens(workflow: dict) -> dict[str, dict]:
    """The jobs that may request GitHub's OIDC token: a job's own `permissions` replace the workflow's."""
    top = workflow.get("permissions")
    return {
        name: job
        for name, job in workflow.get("jobs", {}).items()
        if can_get_an_oidc_token(job["permissions"] if "permissions" in job else top)
    }


def environment_name(job: dict) -> str | None:
    environment = job.get("environment")
    return environment.get("name") if isinstance(environment, dict) else environment


def test_every_job_with_an_oidc_token_runs_in_an_environment():
    unguarded = [
        f"{path.name}: {name}"
        for path in sorted(WORKFLOWS.glob("*.y*ml"))
        for name, job in jobs_with_oidc_tokens(yaml.safe_load(path.read_text())).items()
        if not environment_name(job)
    ]
    assert unguarded == [], "jobs with id-token: write and no environment (docs/review.md)"


@pytest.mark.parametrize(
    ("workflow", "unguarded"),
    [
        ({"permissions": {}, "jobs": {"a": {"permissions": {"id-token": "write"}}}}, ["a"]),
        ({"permissions": {"id-token": "write"}, "jobs": {"a": {}, "b": {"permissions": {"contents": "read"}}}}, ["a"]),
        ({"permissions": "write-all", "jobs": {"a": {}}}, ["a"]),
        ({"jobs": {"a": {"permissions": {"id-token": "write"}, "environment": {"name": "preview"}}}}, []),
        ({"jobs": {"a": {"permissions": {"id-token": "write"}, "environment": "preview"}}}, []),
        ({"jobs": {"a": {"permissions": {"id-token": "none"}}}}, []),
    ],
)
def test_finds_each_way_a_job_gets_an_oidc_token(workflow, unguarded):
    found = [name for name, job in jobs_with_oidc_tokens(workflow).items() if not environment_name(job)]
    assert found == unguarded

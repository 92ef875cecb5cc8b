"""The pull-request workflow: what it runs, with which credentials and permissions, and how its two shell
steps (the phase plan, and the one PR comment it keeps updated) behave — run here with stand-ins for
`python -m infra.plan` and `gh`."""

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PATH = ROOT / ".github" / "workflows" / "preview.yml"
WORKFLOW = yaml.safe_load(PATH.read_text())
JOBS = WORKFLOW["jobs"]
MARKER = "<!-- tpu-sft:phase-plan -->"


def step(job: str, name: str) -> dict:
    [found] = [s for s in JOBS[job]["steps"] if s.get("name") == name or s.get("uses", "").startswith(name + "@")]
    return found


def run_step(script: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    # GitHub runs a `run:` step as `bash --noprofile --norc -eo pipefail {0}`.
    path = cwd / "step.sh"
    path.write_text(script)
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(path)],
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def test_runs_on_pull_requests_to_main():
    assert WORKFLOW[True] == {"pull_request": {"branches": ["main"]}}  # YAML 1.1 reads the key `on` as True


def test_permissions_are_granted_per_job_and_no_more():
    assert WORKFLOW["permissions"] == {}
    assert JOBS["test"]["permissions"] == {"contents": "read"}
    assert JOBS["preview"]["permissions"] == {"contents": "read", "id-token": "write", "pull-requests": "write"}


def test_only_the_preview_job_gets_credentials_and_only_in_its_reviewed_environment():
    # The name is what the workload identity provider's condition admits (docs/review.md).
    assert JOBS["preview"]["environment"] == "preview"
    assert "environment" not in JOBS["test"] and "id-token" not in JOBS["test"]["permissions"]


def test_every_action_is_pinned_to_a_commit_with_its_release_named():
    uses = [line.strip() for line in PATH.read_text().splitlines() if re.match(r"\s*(- )?uses:", line)]
    assert len(uses) == sum("uses" in s for job in JOBS.values() for s in job["steps"])
    for line in uses:
        assert re.fullmatch(r"(- )?uses: [\w.-]+/[\w.-]+@[0-9a-f]{40} # v\d+(\.\d+)*", line), line


def test_tests_run_the_readme_command_as_root_with_both_pythons():
    assert step("test", "actions/setup-python")["with"]["python-version"].split() == ["3.12", "3.11"]
    runs = [s["run"] for s in JOBS["test"]["steps"] if "run" in s]
    assert runs == ['sudo env "PATH=$PATH" "MAXTEXT_PYTHON=$(command -v python3.12)" scripts/test']
    assert "scripts/test" in (PATH.parents[2] / "README.md").read_text()


def test_preview_runs_after_the_tests_with_keyless_google_credentials():
    assert JOBS["preview"]["needs"] == "test"
    auth = step("preview", "google-github-actions/auth")["with"]
    assert auth == {
        "workload_identity_provider": "${{ vars.GCP_WORKLOAD_IDENTITY_PROVIDER }}",
        "service_account": "${{ vars.GCP_SERVICE_ACCOUNT }}",
    }
    assert "secrets." not in PATH.read_text() and "credentials_json" not in PATH.read_text()


def test_preview_diffs_stack_dev_with_the_policy_pack_in_one_updated_comment():
    pulumi = step("preview", "pulumi/actions")["with"]
    assert pulumi["command"] == "preview" and pulumi["stack-name"] == "dev" and pulumi["diff"] is True
    assert pulumi["policyPacks"] == "policy" and (ROOT / pulumi["policyPacks"] / "PulumiPolicy.yaml").is_file()
    assert pulumi["comment-on-pr"] is True and pulumi["edit-pr-comment"] is True
    requirements = (ROOT / "requirements.txt").read_text()
    assert f"pulumi=={pulumi['pulumi-version']}\n" in requirements  # the CLI and the SDK stay in step


class TestPhasePlan:
    SCRIPT = step("preview", "Plan which pipeline phases re-run")["run"]

    @pytest.fixture
    def repo(self, tmp_path):
        def git(*args):
            identity = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
            subprocess.run(["git", *identity, *args], cwd=tmp_path, check=True, capture_output=True)

        git("init", "-q", "-b", "main")
        (tmp_path / "README").write_text("base\n")
        git("add", "README")
        git("commit", "-q", "-m", "base")
        # A stand-in for the project's venv: records how `python -m infra.plan` was called.
        stand_in = '#!/bin/sh\necho "$@" > args.txt\necho "| train | steps changed |"\n'
        executable(tmp_path / ".venv" / "bin" / "python", stand_in)
        return tmp_path, git

    def env(self, repo):
        return {"BASE_REF": "main", "GITHUB_STEP_SUMMARY": str(repo / "summary.md")}

    def test_compares_the_base_branch_config_with_the_head_one(self, repo):
        repo, git = repo
        (repo / "Pulumi.dev.yaml").write_text("config: {tpu-sft:steps: '1000'}\n")
        git("add", "Pulumi.dev.yaml")
        git("commit", "-q", "-m", "stack")
        git("update-ref", "refs/remotes/origin/main", "HEAD")
        (repo / "Pulumi.dev.yaml").write_text("config: {tpu-sft:steps: '2000'}\n")

        result = run_step(self.SCRIPT, repo, self.env(repo))
        assert result.returncode == 0, result.stderr
        assert (repo / "base.yaml").read_text() == "config: {tpu-sft:steps: '1000'}\n"
        called = (repo / "args.txt").read_text().split()
        assert called == ["-m", "infra.plan", "--base", "base.yaml", "--head", "Pulumi.dev.yaml"]
        assert (repo / "plan.md").read_text() == "| train | steps changed |\n"
        assert (repo / "summary.md").read_text() == "| train | steps changed |\n"

    def test_says_so_when_the_base_branch_has_no_stack_config(self, repo):
        repo, git = repo
        git("update-ref", "refs/remotes/origin/main", "HEAD")
        result = run_step(self.SCRIPT, repo, self.env(repo))
        assert result.returncode == 0, result.stderr
        assert "every pipeline phase runs for the first time" in (repo / "plan.md").read_text()
        assert not (repo / "args.txt").exists()


class TestPlanComment:
    SCRIPT = step("preview", "Post the phase plan on the pull request")["run"]
    # A stand-in for `gh`: lists the PR's comments from a file through the real jq filter, records the rest.
    FAKE_GH = """#!/bin/bash
if [ "$2" = "--paginate" ]; then jq -r "$5" "$FAKE_COMMENTS"; exit; fi
printf '%s %s\\n' "$3" "$4" >> "$FAKE_LOG"
printf '%s' "${6#body=}" > "$FAKE_BODY"
"""

    def post(self, tmp_path, comments):
        executable(tmp_path / "bin" / "gh", self.FAKE_GH)
        (tmp_path / "comments.json").write_text(json.dumps(comments))
        (tmp_path / "plan.md").write_text("| train | steps changed |\n")
        env = {
            "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin",
            "GH_TOKEN": "t",
            "PR_NUMBER": "7",
            "GITHUB_REPOSITORY": "o/r",
            "FAKE_COMMENTS": str(tmp_path / "comments.json"),
            "FAKE_LOG": str(tmp_path / "log"),
            "FAKE_BODY": str(tmp_path / "body"),
        }
        result = run_step(self.SCRIPT, tmp_path, env)
        assert result.returncode == 0, result.stderr
        return (tmp_path / "log").read_text().splitlines(), (tmp_path / "body").read_text()

    def test_first_push_posts_the_comment(self, tmp_path):
        calls, body = self.post(tmp_path, [{"id": 1, "body": "### Pulumi preview"}])
        assert calls == ["POST repos/o/r/issues/7/comments"]
        assert body.startswith(MARKER + "\n### Pipeline phases this change re-runs (stack dev)")
        assert "| train | steps changed |" in body

    def test_later_pushes_edit_the_same_comment(self, tmp_path):
        comments = [{"id": 1, "body": "### Pulumi preview"}, {"id": 42, "body": MARKER + "\nold plan"}]
        calls, body = self.post(tmp_path, comments)
        assert calls == ["PATCH repos/o/r/issues/comments/42"]
        assert "| train | steps changed |" in body

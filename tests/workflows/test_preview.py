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
    assert runs[0] == 'sudo env "PATH=$PATH" "MAXTEXT_PYTHON=$(command -v python3.12)" scripts/test'
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

    @staticmethod
    def base_branch_with_a_stack(repo, git):
        (repo / "Pulumi.dev.yaml").write_text("config: {tpu-sft:steps: '1000'}\n")
        git("add", "Pulumi.dev.yaml")
        git("commit", "-q", "-m", "stack")
        git("update-ref", "refs/remotes/origin/main", "HEAD")

    def test_compares_the_base_branch_config_with_the_head_one(self, repo):
        repo, git = repo
        self.base_branch_with_a_stack(repo, git)
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

    def test_hands_the_test_jobs_preflight_record_to_the_plan(self, repo):
        repo, git = repo
        self.base_branch_with_a_stack(repo, git)
        assert (
            step("preview", "Plan which pipeline phases re-run")["env"]["PREFLIGHT"]
            == "${{ needs.test.outputs.preflight }}"
        )
        assert JOBS["test"]["outputs"]["preflight"] == "${{ steps.preflight.outputs.record }}"
        result = run_step(self.SCRIPT, repo, {**self.env(repo), "PREFLIGHT": '{"fits": true}'})
        assert result.returncode == 0, result.stderr
        called = (repo / "args.txt").read_text().split()
        assert called[-2:] == ["--preflight", "preflight.json"]
        assert (repo / "preflight.json").read_text() == '{"fits": true}\n'

    def test_hands_the_test_jobs_data_record_to_the_plan(self, repo):
        repo, git = repo
        self.base_branch_with_a_stack(repo, git)
        assert step("preview", "Plan which pipeline phases re-run")["env"]["DATA"] == "${{ needs.test.outputs.data }}"
        assert JOBS["test"]["outputs"]["data"] == "${{ steps.data.outputs.record }}"
        env = {**self.env(repo), "PREFLIGHT": '{"fits": true}', "DATA": '{"findings": []}'}
        result = run_step(self.SCRIPT, repo, env)
        assert result.returncode == 0, result.stderr
        called = (repo / "args.txt").read_text().split()
        assert called[-4:] == ["--preflight", "preflight.json", "--data", "data.json"]
        assert (repo / "data.json").read_text() == '{"findings": []}\n'


class TestPreflightStep:
    """The test job's preflight: only when train re-runs (infra.plan's JSON rows, read by the real jq), as root
    like the tests; its last line (the JSON record) becomes the job's output."""

    SCRIPT = step("test", "Preflight the training step when train re-runs")["run"]

    @pytest.fixture
    def repo(self, tmp_path):
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=tmp_path, check=True)
        (tmp_path / "Pulumi.dev.yaml").write_text("config: {tpu-sft:steps: '1000'}\n")
        identity = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
        subprocess.run(["git", *identity, "add", "."], cwd=tmp_path, check=True)
        subprocess.run(["git", *identity, "commit", "-q", "-m", "base"], cwd=tmp_path, check=True)
        subprocess.run(["git", "update-ref", "refs/remotes/origin/main", "HEAD"], cwd=tmp_path, check=True)
        executable(tmp_path / ".venv" / "bin" / "python", '#!/bin/sh\necho "$@" > plan-args.txt\ncat "$ROWS"\n')
        executable(tmp_path / "bin" / "sudo", '#!/bin/sh\nexec "$@"\n')
        preflight = '#!/bin/sh\necho "$@" > preflight-args.txt\necho "fits: 17.90 GiB"\necho \'{"fits": true}\'\n'
        executable(tmp_path / "scripts" / "preflight", preflight)
        return tmp_path

    def run(self, repo, rows):
        (repo / "rows-given.json").write_text(json.dumps(rows))
        env = {
            "PATH": f"{repo / 'bin'}:/usr/bin:/bin",
            "BASE_REF": "main",
            "ROWS": str(repo / "rows-given.json"),
            "GITHUB_OUTPUT": str(repo / "output"),
            "GITHUB_STEP_SUMMARY": str(repo / "summary.md"),
        }
        return run_step(self.SCRIPT, repo, env)

    def test_compiles_when_train_reruns_and_outputs_the_record(self, repo):
        result = self.run(repo, [{"task": "train", "reruns": True, "why": "steps"}])
        assert result.returncode == 0, result.stderr
        assert (repo / "plan-args.txt").read_text().split()[-1] == "--json"
        assert (repo / "preflight-args.txt").read_text().split() == ["Pulumi.dev.yaml"]
        assert (repo / "output").read_text() == 'record={"fits": true}\n'

    def test_compiles_when_the_base_branch_has_no_stack_config(self, repo):
        subprocess.run(["git", "rm", "-q", "--cached", "Pulumi.dev.yaml"], cwd=repo, check=True)
        identity = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
        subprocess.run(["git", *identity, "commit", "-q", "-m", "no stack"], cwd=repo, check=True)
        subprocess.run(["git", "update-ref", "refs/remotes/origin/main", "HEAD"], cwd=repo, check=True)
        result = self.run(repo, [])
        assert result.returncode == 0, result.stderr
        assert not (repo / "plan-args.txt").exists()  # every phase runs for the first time: nothing to ask
        assert (repo / "output").read_text() == 'record={"fits": true}\n'

    def test_an_auto_stacks_sweep_goes_to_the_preview_job_as_one_json_line(self, repo):
        sweep = (  # a sweep's answer kept over several lines, as scripts/preflight keeps it, then the record
            "#!/bin/sh\nmkdir -p .tpu-sft/preflight\n"
            "printf '{\\n \"largest_per_device_batch_size\": 2\\n}\\n' > .tpu-sft/preflight/sweep-ab.json\n"
            "echo '{\"fits\": true}'\n"
        )
        executable(repo / "scripts" / "preflight", sweep)
        result = self.run(repo, [{"task": "train", "reruns": True, "why": "auto"}])
        assert result.returncode == 0, result.stderr
        assert (repo / "output").read_text() == 'record={"fits": true}\nsweep={"largest_per_device_batch_size":2}\n'

    def test_compiles_nothing_when_train_does_not_rerun(self, repo):
        result = self.run(repo, [{"task": "train", "reruns": False, "why": ""}])
        assert result.returncode == 0, result.stderr
        assert not (repo / "preflight-args.txt").exists() and not (repo / "output").exists()
        assert "nothing compiled" in (repo / "summary.md").read_text()

    def test_a_step_that_does_not_fit_fails_the_check(self, repo):
        executable(
            repo / "scripts" / "preflight", '#!/bin/sh\necho "tpu-sft:perDeviceBatchSize: does not fit" >&2\nexit 1\n'
        )
        result = self.run(repo, [{"task": "train", "reruns": True, "why": "steps"}])
        assert result.returncode == 1 and "does not fit" in result.stderr
        assert not (repo / "output").exists()


class TestDataStep:
    """The test job's data preflight: after a compile that fits (train re-runs), with no credentials; a finding
    does not fail the check but goes to the plan comment, whose head it is (tests/infra/plan/test_plan.py)."""

    STEP = step("test", "Check the data when train re-runs")

    @pytest.fixture
    def repo(self, tmp_path):
        executable(tmp_path / "bin" / "sudo", '#!/bin/sh\nexec "$@"\n')
        return tmp_path

    def run(self, repo, status: int):
        preflight = f"#!/bin/sh\necho \"$@\" > args.txt\necho 'rows read  36'\necho '{{\"ok\": true}}'\nexit {status}\n"
        executable(repo / "scripts" / "preflight", preflight)
        env = {"PATH": f"{repo / 'bin'}:/usr/bin:/bin", "GITHUB_OUTPUT": str(repo / "output")}
        return run_step(self.STEP["run"], repo, env)

    def test_runs_after_the_compile_only_when_it_gave_a_record(self):
        names = [s.get("name") for s in JOBS["test"]["steps"]]
        assert names.index(self.STEP["name"]) == names.index("Preflight the training step when train re-runs") + 1
        assert self.STEP["id"] == "data" and self.STEP["if"] == "steps.preflight.outputs.record != ''"

    def test_holds_no_credentials_and_reads_only_what_needs_none(self, repo):
        assert "env" not in self.STEP and "HF_TOKEN" not in PATH.read_text()
        result = self.run(repo, 0)
        assert result.returncode == 0, result.stderr
        assert (repo / "args.txt").read_text().split() == ["--data", "--public-only", "Pulumi.dev.yaml"]
        assert (repo / "output").read_text() == 'record={"ok": true}\n'
        assert "rows read  36" in result.stdout  # the table is in the job's log too

    def test_a_finding_goes_to_the_comment_rather_than_failing_the_check(self, repo):
        result = self.run(repo, 1)
        assert result.returncode == 0, result.stderr
        assert (repo / "output").read_text() == 'record={"ok": true}\n'

    def test_bad_input_fails_the_check(self, repo):
        result = self.run(repo, 2)
        assert result.returncode == 2 and not (repo / "output").exists()


def test_the_preview_job_takes_the_sweep_as_data_checked_before_it_plans_or_previews(tmp_path):
    """The sweep came from a job that ran the pull request's code: it reaches the credentialed job as a file that
    `--take-sweep` checks (tests/infra/preflight/test_batch_auto.py), never as script text."""
    names = [s.get("name") or s.get("uses") for s in JOBS["preview"]["steps"]]
    take = step("preview", "Take the test job's sweep (perDeviceBatchSize auto)")
    assert names.index(take["name"]) < names.index("Plan which pipeline phases re-run")
    assert "${{" not in take["run"] and take["env"]["SWEEP"] == "${{ needs.test.outputs.sweep }}"
    executable(tmp_path / ".venv" / "bin" / "python", '#!/bin/sh\necho "$@" > args.txt\n')
    result = run_step(take["run"], tmp_path, {"SWEEP": '{"largest_per_device_batch_size": 2}'})
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "sweep.json").read_text() == '{"largest_per_device_batch_size": 2}\n'
    assert (tmp_path / "args.txt").read_text().split() == [
        "-m",
        "infra.preflight",
        "--take-sweep",
        "sweep.json",
        "Pulumi.dev.yaml",
    ]


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

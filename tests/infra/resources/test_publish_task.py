"""Publishing in the program: opt-in, after the export phase, with the Hub write token travelling like the read
token (a secret piped over stdin by its own task), never in a phase's environment, a plain output or state."""

import json

import pytest

from rehearsal.engine import MIG_ID, plain, run_program
from rehearsal.storage_iam import host_identity
from workload.core.contract import HF_WRITE_TOKEN_SECRET, PHASES, PUBLISH_ENV, TARGET_ENV

COMMAND = "command:local:Command"
WRITE_TOKEN = "hf_" + "Wr1teCanary" * 4


def commands(stack):
    return {c.name.removeprefix("tpu-sft-dev-pipeline-"): c for c in stack.of_type(COMMAND)}


def test_off_by_default(mock_stack):
    assert "publish" not in commands(mock_stack())
    assert "published" not in mock_stack().outputs


def test_after_the_last_phase_with_the_destinations_and_private_by_default(mock_stack):
    stack = mock_stack(
        {
            "tpu-sft:publishGcsUri": "gs://models/team/gemma",
            "tpu-sft:publishHubRepo": "team/gemma-sft",
            "tpu-sft:hfWriteToken": WRITE_TOKEN,
        },
        secret_keys=("tpu-sft:hfWriteToken",),
    )
    tasks = commands(stack)
    publish = tasks["publish"]
    assert publish.inputs["create"] == ".venv/bin/python -m remote publish"
    assert json.loads(publish.inputs["environment"][PUBLISH_ENV]) == {
        "gcs": "gs://models/team/gemma",
        "hub": "team/gemma-sft",
        "public": False,
        "evalGate": "block",
        "evalMargin": 2.0,
    }
    assert tasks[PHASES[-1]].urn in publish.dependencies  # after the eval: the gate reads its report
    token_task = tasks["publish-hf-write-token"]
    assert token_task.inputs["create"] == f".venv/bin/python -m remote put-secret {HF_WRITE_TOKEN_SECRET}"
    assert token_task.urn in publish.dependencies
    # The token: only in the secret stdin of its own task; nowhere readable in state or outputs.
    assert token_task.inputs["stdin"]["value"] == WRITE_TOKEN
    for r in stack.resources:
        assert WRITE_TOKEN not in json.dumps(plain(r.inputs))
    assert WRITE_TOKEN not in json.dumps(plain(stack.outputs))


def test_a_new_destination_or_model_re_runs_it_a_price_change_does_not(mock_stack):
    def inputs(overrides):
        return commands(mock_stack({"tpu-sft:publishGcsUri": "gs://models/m", **overrides}))["publish"].inputs

    base = inputs({})
    assert inputs({"tpu-sft:publishGcsUri": "gs://models/other"})["triggers"] != base["triggers"]
    assert inputs({"tpu-sft:steps": "2000"})["triggers"] != base["triggers"]
    assert inputs({"tpu-sft:pricePerChipHour": "1.5"}) == base


@pytest.mark.parametrize(
    ("overrides", "secret_keys", "key"),
    [
        ({"tpu-sft:publishGcsUri": "s3://models/m"}, (), "tpu-sft:publishGcsUri"),
        ({"tpu-sft:publishHubRepo": "no-owner"}, (), "tpu-sft:publishHubRepo"),
        ({"tpu-sft:publishHubPublic": "maybe"}, (), "tpu-sft:publishHubPublic"),
        ({"tpu-sft:hfWriteToken": "not-a-secret-value"}, (), "tpu-sft:hfWriteToken"),
        ({"tpu-sft:hfWriteToken": WRITE_TOKEN}, (), "tpu-sft:hfWriteToken"),
    ],
)
def test_malformed_publish_settings_are_one_line_before_anything(mock_stack, overrides, secret_keys, key):
    import pulumi

    with pytest.raises(pulumi.RunError) as raised:
        mock_stack(overrides, secret_keys=secret_keys)
    message = str(raised.value)
    assert message.startswith(f"{key}: ") and "Fix: " in message and "\n" not in message
    assert WRITE_TOKEN not in message


def test_an_update_publishing_to_the_hub_needs_a_write_token(dev_config, monkeypatch):
    import pulumi

    monkeypatch.setenv("HF_TOKEN", "hf_" + "Tok3n" * 8)
    monkeypatch.delenv("HF_WRITE_TOKEN", raising=False)
    with pytest.raises(pulumi.RunError, match=r"^tpu-sft:hfWriteToken: is not set"):
        run_program({**dev_config, "tpu-sft:publishHubRepo": "team/gemma-sft"}, preview=False)


PUBLISHING = {"tpu-sft:publishGcsUri": "gs://models/m"}
# Each publish input (target, export's settings, destinations) and changes that touch none of them.
PUBLISH_CHANGES = [
    {"tpu-sft:publishGcsUri": "gs://models/other"},
    {"tpu-sft:publishHubRepo": "team/gemma-sft"},
    {"tpu-sft:evalGate": "warn"},
    {"tpu-sft:evalMargin": "3"},
    {"tpu-sft:steps": "2000"},
    {"tpu-sft:model": "gemma3-12b"},
    {"tpu-sft:access": "direct"},
    {"tpu-sft:checkpointPeriod": "50"},
    {"tpu-sft:pricePerChipHour": "1.5"},
    {"tpu-sft:labels": '{"owner": "x"}'},
]
# A LoRA run that publishes its adapter alone, and changes of its adapter's repo and shape.
LORA = {"tpu-sft:trainer": "tunix", "tpu-sft:tuning": "lora"}
ADAPTER_REPO = {**LORA, "tpu-sft:publishHubAdapterRepo": "team/gemma-sft-lora"}
ADAPTER_CHANGES = [
    {"tpu-sft:publishHubAdapterRepo": "team/other-lora"},
    {"tpu-sft:publishHubRepo": "team/gemma-sft"},
    {"tpu-sft:loraRank": "8"},
    {"tpu-sft:idleMinutes": "45"},
]
CASES = [(PUBLISHING, c) for c in PUBLISH_CHANGES] + [(ADAPTER_REPO, c) for c in ADAPTER_CHANGES]


@pytest.mark.parametrize(("publishing", "change"), CASES, ids=[next(iter(c)) for _, c in CASES])
def test_the_plan_says_whether_the_publish_task_re_runs(mock_stack, dev_config, publishing, change):
    from infra.config.read_settings import parse
    from infra.plan.reruns import plan

    def recorded(overrides):
        task = commands(mock_stack({**publishing, **overrides}))["publish"]
        return {k: task.inputs.get(k) for k in ("create", "environment", "triggers")}

    base, head = ({**dev_config, **publishing, **c} for c in ({}, change))
    (row,) = [r for r in plan(parse(base, stack="dev"), parse(head, stack="dev")) if r[0] == "publish"]
    assert row[1] == (recorded({}) != recorded(change)), row


def test_a_new_gate_or_margin_re_runs_publishing_alone(dev_config):
    """`pulumi config set tpu-sft:evalGate warn` then `pulumi up` publishes a blocked model with nothing retrained."""
    from infra.config.read_settings import parse
    from infra.plan.reruns import plan

    base = parse({**dev_config, **PUBLISHING}, stack="dev")
    warn = parse({**dev_config, **PUBLISHING, "tpu-sft:evalGate": "warn", "tpu-sft:evalMargin": "3"}, stack="dev")
    rows = plan(base, warn)
    assert [(task, reruns) for task, reruns, _ in rows[:-1]] == [(p, False) for p in PHASES]
    assert rows[-1] == ("publish", True, '`evalGate`: "block" → "warn", `evalMargin`: 2.0 → 3.0')


def test_the_plan_lists_publishing_turned_on_and_off(dev_config):
    from infra.config.read_settings import parse
    from infra.plan.reruns import plan

    off, on = parse(dev_config, stack="dev"), parse({**dev_config, **PUBLISHING}, stack="dev")
    assert [r[0] for r in plan(off, off)] == ["bootstrap", "convert", "train", "export", "eval"]
    assert plan(off, on)[-1] == ("publish", True, 'publishing turned on: `gcs`: null → "gs://models/m"')
    assert plan(on, off)[-1] == ("publish", False, "publishing turned off: what was published stays")


def test_a_slice_publishes_from_worker_0_what_it_kept_in_the_bucket(slice_stack):
    """The same task, with the slice's target: `remote publish` runs on its main host (worker 0), and the kept dir
    it reads is the bucket's (workload/publish/__main__.py copies it to the host first)."""
    stack = slice_stack("v6e-16", {"tpu-sft:publishGcsUri": "gs://models/team/gemma"})
    tasks = commands(stack)
    publish = tasks["publish"]
    assert publish.inputs["create"] == ".venv/bin/python -m remote publish"
    assert publish.inputs["environment"][TARGET_ENV] == tasks["export"].inputs["environment"][TARGET_ENV]
    target = json.loads(publish.inputs["environment"][TARGET_ENV])
    assert target["host"] == "tpu-sft-dev-01" and target["profile"]["kept_dir"].startswith("gs://")
    assert tasks[PHASES[-1]].urn in publish.dependencies
    assert tasks[PHASES[-1]].inputs["triggers"][0] in publish.inputs["triggers"]  # the phases' identity: a new host
    assert publish.inputs["triggers"][0].startswith(f"{MIG_ID}/")  # or group publishes again


def test_a_lora_stack_publishes_its_adapter_alone_with_the_write_token_kept_secret(mock_stack):
    stack = mock_stack({**ADAPTER_REPO, "tpu-sft:hfWriteToken": WRITE_TOKEN}, secret_keys=("tpu-sft:hfWriteToken",))
    tasks = commands(stack)
    where = json.loads(tasks["publish"].inputs["environment"][PUBLISH_ENV])
    assert where == {
        "gcs": None,
        "hub": None,
        "public": False,
        "hubAdapter": "team/gemma-sft-lora",
        "evalGate": "block",
        "evalMargin": 2.0,
    }
    assert tasks["publish-hf-write-token"].urn in tasks["publish"].dependencies
    for r in stack.resources:
        assert WRITE_TOKEN not in json.dumps(plain(r.inputs))
    assert WRITE_TOKEN not in json.dumps(plain(stack.outputs))
    both = commands(mock_stack({**ADAPTER_REPO, "tpu-sft:publishHubRepo": "team/gemma-sft"}))["publish"]
    assert json.loads(both.inputs["environment"][PUBLISH_ENV])["hub"] == "team/gemma-sft"


def test_an_adapter_repo_without_lora_is_refused_in_one_line_before_anything(mock_stack):
    import pulumi

    with pytest.raises(pulumi.RunError) as raised:
        mock_stack({"tpu-sft:publishHubAdapterRepo": "team/gemma-sft-lora"})  # the dev stack trains every weight
    assert str(raised.value) == (
        "tpu-sft:publishHubAdapterRepo: is team/gemma-sft-lora, but tpu-sft:tuning is full, which trains every weight "
        "and keeps no adapter to publish. Fix: pulumi config rm tpu-sft:publishHubAdapterRepo (tpu-sft:publishHubRepo "
        "publishes the model), or pulumi config set tpu-sft:tuning lora"
    )


def test_a_qlora_run_publishes_its_adapter_as_a_lora_run_does(mock_stack):
    qlora = {**ADAPTER_REPO, "tpu-sft:tuning": "qlora"}
    task = commands(mock_stack(qlora))["publish"]
    assert json.loads(task.inputs["environment"][PUBLISH_ENV])["hubAdapter"] == "team/gemma-sft-lora"


def test_an_update_publishing_the_adapter_needs_a_write_token(dev_config, monkeypatch):
    import pulumi

    monkeypatch.setenv("HF_TOKEN", "hf_" + "Tok3n" * 8)
    monkeypatch.delenv("HF_WRITE_TOKEN", raising=False)
    with pytest.raises(pulumi.RunError, match=r"but tpu-sft:publishHubAdapterRepo is team/gemma-sft-lora\. Fix: "):
        run_program({**dev_config, **ADAPTER_REPO}, preview=False)


def test_a_new_adapter_repo_re_runs_the_publish_task(dev_config):
    from infra.config.read_settings import parse
    from infra.plan.reruns import plan

    base = parse({**dev_config, **ADAPTER_REPO}, stack="dev")
    head = parse({**dev_config, **ADAPTER_REPO, "tpu-sft:publishHubAdapterRepo": "team/other-lora"}, stack="dev")
    assert plan(base, head)[-1] == ("publish", True, '`hubAdapter`: "team/gemma-sft-lora" → "team/other-lora"')


def test_the_vms_account_is_granted_object_user_on_the_destination_bucket_before_publishing(mock_stack):
    """Publishing writes as the VM's service account, and replacing an older model's objects needs delete as well as
    create: roles/storage.objectUser, on that bucket alone, declared before the task runs."""
    stack = mock_stack({"tpu-sft:publishGcsUri": "gs://models/team/gemma"})
    (grant,) = [
        g for g in stack.of_type("gcp:storage/bucketIAMMember:BucketIAMMember") if g.inputs["bucket"] == "models"
    ]
    assert grant.name == "tpu-sft-dev-pipeline-publish-writer-models"
    assert grant.inputs["role"] == "roles/storage.objectUser"
    assert grant.inputs["member"] == host_identity(stack)  # the VM's account, as the Cloud Storage stand-in reads it
    assert grant.urn in commands(stack)["publish"].dependencies


def test_the_stacks_own_bucket_and_the_hub_need_no_grant(mock_stack):
    own = mock_stack({"tpu-sft:publishGcsUri": "gs://my-tpu-project-tpu-sft-dev-runs/published/m"})
    hub = mock_stack({"tpu-sft:publishHubRepo": "team/gemma-sft"})
    for stack in (own, hub):
        grants = stack.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
        assert [g.name for g in grants if "-publish-writer-" in g.name] == []  # the stack's own grants only


def test_publishing_with_no_vm_says_the_bucket_publishes_with_none(mock_stack, caplog):
    """Autostop deleted the VM; a destination set now would make a TPU VM to publish from: one line says so, with the
    command that publishes the kept model from the bucket instead. With the VM there, nothing is said."""
    mock_stack({"tpu-sft:publishHubRepo": "team/gemma-sft"}, instance_ids={"tpu-sft-dev": None})
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("no VM tpu-sft-dev now")]
    assert said == [
        "no VM tpu-sft-dev now: this update makes a TPU VM (billed) to publish from; a model already kept is published "
        "from the bucket with no VM by `scripts/tpu-sft publish --hub team/gemma-sft` (docs/publishing.md)"
    ]
    caplog.clear()
    mock_stack({"tpu-sft:publishHubRepo": "team/gemma-sft"}, statuses={"tpu-sft-dev": "RUNNING"})
    assert not [r for r in caplog.records if r.getMessage().startswith("no VM")]

"""`pulumi up` on a slice: the same post-deploy tasks as on the VM, run against every host of the slice.

Under the mock engine, for v6e-16 and v6e-256: each task's target (the hosts in worker order, worker 0 the main
host, all through the same IAP gateway with the stack's one identity, a host profile keeping to the bucket), what
it waits for (the MIG), its environment (only its phase's settings) and triggers, and the PR plan's answer."""

import json

import pytest

from rehearsal.engine import MIG_ID, instance_id_of, is_secret, plain, run_program
from remote.pipeline.target import PipelineTarget
from tests.fixtures.mock_engine import DISK_KEYS, OWN_INPUTS, recorded_inputs, tasks_of
from workload.core.config import PipelineConfig
from workload.core.contract import PHASES, RUN_TASK
from workload.spend.bill import total

COMMAND = "command:local:Command"
GROUP = "gcp:compute/instanceGroupManager:InstanceGroupManager"
RESIZE_REQUEST = "gcp:compute/resizeRequest:ResizeRequest"
FLEX_START = {"tpu-sft:provisioningModel": "FLEX_START"}
FIREWALL = "gcp:compute/firewall:Firewall"
BUCKET = "gs://my-tpu-project-tpu-sft-dev-runs"
GATEWAY = (
    "gcloud compute start-iap-tunnel %h %p --listen-on-stdin --zone=us-east5-b --project=my-tpu-project "
    "--verbosity=warning"
)
TOKEN = "hf_" + "Sl1ce" * 7
SHAPES = [("v6e-16", 4), ("v6e-256", 64)]


def tasks(stack):
    """Task name's last part (bootstrap, convert, …, token) → what was declared."""
    return {r.name.rsplit("-", 1)[1]: r for r in tasks_of(stack)}


def names(hosts):
    return [f"tpu-sft-dev-{n:02d}" for n in range(1, hosts + 1)]


def slice_identity(hosts, changed_ids=None):
    """The phases' identity: the group's id and each host's instance id, as Compute Engine gives them."""
    return "/".join([str(MIG_ID), *((changed_ids or {}).get(n, instance_id_of(n)) for n in names(hosts))])


@pytest.mark.parametrize(("accelerator", "hosts"), SHAPES, ids=[s[0] for s in SHAPES])
def test_every_task_targets_every_host_in_worker_order(slice_stack, accelerator, hosts):
    declared = tasks(slice_stack(accelerator, {"tpu-sft:hfToken": TOKEN}, secret_keys=("tpu-sft:hfToken",)))
    assert sorted(declared) == sorted([*PHASES, RUN_TASK, "token"])  # hf-token, bootstrap, the run, the phases
    for name, task in declared.items():
        target = json.loads(task.inputs["environment"]["TPU_SFT_TARGET"])
        assert (
            target
            == {
                "host": "tpu-sft-dev-01",  # worker 0, the host the phases follow
                "workers": names(hosts)[1:],  # workers 1 … N-1, in the MIG's numbering
                "user": "tpu-sft",
                "key_path": "~/.ssh/google_compute_engine",  # the stack's one identity, a path, never the key
                "known_hosts": f".tpu-sft/known_hosts/dev-slice-{MIG_ID}",  # pinned per MIG: a new one is new hosts
                "task_logs": f".tpu-sft/logs/dev-slice-{MIG_ID}",
                "gateway": GATEWAY,  # %h: each host's instance name
                "trust_on_first_use": True,
                "host_ids": {n: instance_id_of(n) for n in names(hosts)},  # what lets a recreated host's new key in
                "profile": {
                    "name": "slice-host",
                    "bootstrap": None,  # the seed's install, as on the VM
                    "scratch_dir": "/dev/shm/tpu-sft",
                    "kept_dir": f"{BUCKET}/kept",  # no data disk: the model is kept in the bucket
                    "runs_dir": f"{BUCKET}/runs",
                    "required_mount": None,  # nothing to wait for
                },
            }
        ), name
        parsed = PipelineTarget.from_json(task.inputs["environment"]["TPU_SFT_TARGET"])  # as the remote CLI reads it
        assert parsed.hosts == tuple(names(hosts)) and parsed.profile.kept_dir == f"{BUCKET}/kept"


@pytest.mark.parametrize(("accelerator", "hosts"), SHAPES, ids=[s[0] for s in SHAPES])
def test_tasks_wait_for_the_stable_group_and_run_in_order(slice_stack, accelerator, hosts):
    stack = slice_stack(accelerator, {"tpu-sft:hfToken": TOKEN}, secret_keys=("tpu-sft:hfToken",))
    declared = tasks(stack)
    group = stack.one(GROUP)
    assert group.inputs["waitForInstancesStatus"] == "STABLE"  # created = every host exists (infra/resources/slice.py)
    firewalls = {r.name: r.urn for r in stack.of_type(FIREWALL)}
    bucket = stack.one("gcp:storage/bucket:Bucket").urn
    grants = {m.urn for m in stack.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")}
    for first in (declared["token"], declared["bootstrap"]):
        assert group.urn in first.dependencies
        needed = {firewalls["tpu-sft-dev-ssh"], firewalls["tpu-sft-dev-slice"], bucket, *grants}
        assert needed <= set(first.dependencies)
    assert declared["token"].urn in declared["bootstrap"].dependencies  # the token is on every host before convert
    chain = ["bootstrap", RUN_TASK, *PHASES[1:]]
    for before, after in zip(chain, chain[1:], strict=False):
        assert declared[before].urn in declared[after].dependencies


@pytest.mark.parametrize(("accelerator", "hosts"), SHAPES, ids=[s[0] for s in SHAPES])
def test_flex_start_tasks_fill_the_empty_group_and_reach_its_hosts(slice_stack, accelerator, hosts):
    """The group starts empty: every task names it, so the first fills it and waits for its hosts
    (remote/pipeline/capacity.py), and the hosts it reaches are named from the slice's size, not the group's target
    size (0)."""
    stack = slice_stack(
        accelerator,
        {**FLEX_START, "tpu-sft:hfToken": TOKEN},
        remove=("tpu-sft:reservation",),
        secret_keys=("tpu-sft:hfToken",),
    )
    declared = tasks(stack)
    group = stack.one(GROUP)
    assert group.inputs["targetSize"] == 0 and stack.of_type(RESIZE_REQUEST) == []
    for first in (declared["token"], declared["bootstrap"]):
        assert group.urn in first.dependencies
    for task in declared.values():
        target = json.loads(task.inputs["environment"]["TPU_SFT_TARGET"])
        assert [target["host"], *target["workers"]] == names(hosts)
        assert target["known_hosts"] == f".tpu-sft/known_hosts/dev-slice-{MIG_ID}"  # pinned per group, as before
        assert target["host_ids"] == {}  # not read: the first task makes the hosts after they would be
        group_path = "projects/my-tpu-project/zones/us-east5-b/instanceGroupManagers/tpu-sft-dev"
        assert target["flex_start_group"] == group_path  # what the first task fills and waits on
        assert PipelineTarget.from_json(task.inputs["environment"]["TPU_SFT_TARGET"]).flex_start_group
        assert task.inputs["triggers"][0] == str(MIG_ID)
    assert stack.outputs["hostNames"] == names(hosts)


@pytest.mark.parametrize(("accelerator", "hosts"), SHAPES, ids=[s[0] for s in SHAPES])
def test_each_phase_holds_only_its_settings_and_the_group_identity(slice_stack, accelerator, hosts):
    declared = tasks(slice_stack(accelerator))
    assert "token" not in declared  # no hfToken in the stack: the phases use $HF_TOKEN of `pulumi up`
    for phase in PHASES:
        task = declared[phase]
        assert task.inputs["create"] == f".venv/bin/python -m remote phase {phase}"
        env = task.inputs["environment"]
        assert set(env) == {"TPU_SFT_TARGET", "TPU_SFT_PIPELINE"}
        settings = json.loads(env["TPU_SFT_PIPELINE"])
        assert PipelineConfig.from_mapping(settings).phase_settings(phase) == settings  # only its phase's
        assert OWN_INPUTS[phase] <= set(settings)
        # The slice's type feeds train (and so export), as on the VM; convert and bootstrap never see it.
        assert settings.get("acceleratorType") == (accelerator if phase in ("train", "export", "eval") else None)
        identity, inputs = task.inputs["triggers"]
        assert identity == slice_identity(hosts)  # a replaced group or host is new hosts: every phase re-runs
        assert inputs == settings


def test_the_token_task_pipes_a_secret_to_every_host(slice_stack):
    stack = slice_stack(overrides={"tpu-sft:hfToken": TOKEN}, secret_keys=("tpu-sft:hfToken",))
    token = tasks(stack)["token"]
    assert token.inputs["create"] == ".venv/bin/python -m remote put-secret hf_token"
    assert is_secret(token.inputs["stdin"])
    assert set(token.inputs["environment"]) == {"TPU_SFT_TARGET"}
    assert json.loads(token.inputs["environment"]["TPU_SFT_TARGET"])["workers"] == names(4)[1:]
    assert token.inputs["triggers"][0] == slice_identity(4)
    assert TOKEN not in json.dumps([plain(r.inputs) for r in stack.resources])


def test_the_host_names_follow_the_groups_base_name(slice_stack):
    stack = slice_stack("v6e-32", {"tpu-sft:instanceName": "team-a", "tpu-sft:checkpointBucket": "team-a-runs"})
    assert stack.one(GROUP).inputs["baseInstanceName"] == "team-a-##"
    target = json.loads(tasks(stack)["bootstrap"].inputs["environment"]["TPU_SFT_TARGET"])
    assert [target["host"], *target["workers"]] == [f"team-a-{n:02d}" for n in range(1, 9)]
    assert stack.outputs["hostNames"] == [target["host"], *target["workers"]]


def test_what_a_user_needs_to_reach_the_slice(slice_stack):
    out = slice_stack("v6e-16").outputs
    assert out["hostNames"] == names(4)  # worker 0 first
    assert out["sshCommand"] == (
        "ssh -i ~/.ssh/google_compute_engine -o 'ProxyCommand=gcloud compute start-iap-tunnel tpu-sft-dev-01 22 "
        "--listen-on-stdin --zone=us-east5-b --project=my-tpu-project --verbosity=warning' tpu-sft@tpu-sft-dev-01"
    )
    assert out["gcloudSshCommand"] == (
        "gcloud compute ssh tpu-sft@tpu-sft-dev-01 --zone=us-east5-b --project=my-tpu-project --tunnel-through-iap"
    )
    assert out["hourlyCostUsd"] == pytest.approx(16 * 2.70)


def test_the_measured_bill_of_a_slice_is_every_hosts(dev_config, monkeypatch):
    """The export phase's summary on a slice carries the hosts' readings added up (remote/pipeline/slice_phase.py);
    the stack outputs are that sum, at the stack's price."""
    monkeypatch.setenv("HF_TOKEN", "hf_" + "Tok3n" * 8)
    config = {
        **{k: v for k, v in dev_config.items() if k not in DISK_KEYS},
        "tpu-sft:acceleratorType": "v6e-16",
        "tpu-sft:autostop": "off",
    }
    bill = total(
        [{"vm_up_s": 3600, "chips": 4, "chip_hours": 4.0}] * 3 + [{"vm_up_s": 1800, "chips": 4, "chip_hours": 2.0}]
    )
    export = {"event": "summary", "ok": True, "final_step": 10, "bill": bill}
    outputs = run_program(config, preview=False, command_stdout={"export": json.dumps(export) + "\n"}).outputs
    assert outputs["chipHoursUsed"] == 14.0
    assert outputs["costUsd"] == round(14.0 * 2.70, 2)


def test_the_single_vm_keeps_its_own_target(mock_stack):
    """v6e-8 is unchanged: one host, pinned per instance id, the data disk's profile
    (tests/infra/resources/test_phases.py checks its target field by field)."""
    for task in tasks(mock_stack()).values():
        target = json.loads(task.inputs["environment"]["TPU_SFT_TARGET"])
        assert "workers" not in target and target["host"] == "tpu-sft-dev"
        assert target["profile"]["name"] == "vm" and target["profile"]["required_mount"] == "/mnt/tpu-sft-data"
        assert task.inputs["triggers"][0] == "tpu-sft-dev-id"


# (what changes from a v6e-16 stack, the phases whose recorded inputs change)
SLICE_CHANGES = [
    ({"tpu-sft:acceleratorType": "v6e-32"}, set(PHASES)),  # more hosts in the target
    (
        {"tpu-sft:instanceName": "tpu-sft-b", "tpu-sft:checkpointBucket": "my-tpu-project-tpu-sft-dev-runs"},
        set(PHASES),
    ),  # new host names
    ({"tpu-sft:steps": "2000"}, {"train", "export", "eval"}),
    ({"tpu-sft:bootDiskSizeGb": "300"}, set()),  # the template changes; no host is recreated by it
    ({"tpu-sft:maxRunHours": "2"}, set()),
    ({"tpu-sft:labels": '{"owner": "someone-else"}'}, set()),
]


@pytest.mark.parametrize(("change", "rerun"), SLICE_CHANGES, ids=[next(iter(c)) for c, _ in SLICE_CHANGES])
def test_the_plan_answers_what_a_slices_tasks_record(slice_stack, dev_config, change, rerun):
    from infra.config.read_settings import parse
    from infra.plan.reruns import plan

    before, after = recorded_inputs(slice_stack()), recorded_inputs(slice_stack(overrides=change))
    recorded = {phase for phase in PHASES if before[phase] != after[phase]}
    assert recorded == rerun
    base = {
        k: v
        for k, v in {**dev_config, "tpu-sft:acceleratorType": "v6e-16", "tpu-sft:autostop": "off"}.items()
        if k not in DISK_KEYS
    }
    planned = {
        phase for phase, reruns, _ in plan(parse(base, stack="dev"), parse({**base, **change}, stack="dev")) if reruns
    }
    assert planned == recorded


def test_the_plan_says_when_the_hosts_change(dev_config):
    from infra.config.read_settings import parse
    from infra.plan.reruns import plan, render

    single = parse(dev_config, stack="dev")
    sliced = parse(
        {
            **{k: v for k, v in dev_config.items() if k not in DISK_KEYS},
            "tpu-sft:acceleratorType": "v6e-32",
            "tpu-sft:autostop": "off",
        },
        stack="dev",
    )
    rows = plan(single, sliced)
    assert [(task, reruns) for task, reruns, _ in rows] == [(phase, True) for phase in PHASES]
    assert {why for _, _, why in rows} == {'the hosts change: `tpu-sft:acceleratorType`: "v6e-8" → "v6e-32"'}
    text = render(single, sliced)
    assert "($86.40/h while the slice exists).\nThroughput: native loop, 4 × 2,048 tokens a chip on v6e-32" in text
    assert "\nPrice model: RESERVATION_BOUND" in text


# (base's overrides, head's overrides, the plan's reason, or None where only train and export re-run)
FLEX_CHANGES = [
    (
        {**FLEX_START, "tpu-sft:maxRunHours": "4"},
        {**FLEX_START, "tpu-sft:maxRunHours": "8"},
        "the slice is replaced: `tpu-sft:maxRunHours`: 4 → 8",
    ),
    (
        {"tpu-sft:provisioningModel": "SPOT"},
        FLEX_START,
        'the slice is replaced: `tpu-sft:provisioningModel`: "SPOT" → "FLEX_START"',
    ),
    (
        FLEX_START,
        {"tpu-sft:provisioningModel": "STANDARD"},
        'the slice is replaced: `tpu-sft:provisioningModel`: "FLEX_START" → "STANDARD"',
    ),
    (FLEX_START, {**FLEX_START, "tpu-sft:steps": "500"}, None),  # twice the stack's 250 steps: the same 4 h cap
]


@pytest.mark.parametrize(("base", "head", "why"), FLEX_CHANGES, ids=["run-cap", "to-flex", "from-flex", "steps"])
def test_the_plan_says_when_a_flex_start_slice_is_made_anew(slice_stack, dev_config, base, head, why):
    """Another run cap reaches a flex-start group's hosts only when they are made anew, so the program replaces the
    group when its description changes (replace_on_changes) and the plan says every phase re-runs."""
    from infra.config.read_settings import parse
    from infra.plan.reruns import plan

    common = {
        k: v
        for k, v in {**dev_config, "tpu-sft:acceleratorType": "v6e-16", "tpu-sft:autostop": "off"}.items()
        if k not in (*DISK_KEYS, "tpu-sft:reservation")
    }
    rows = plan(parse({**common, **base}, stack="dev"), parse({**common, **head}, stack="dev"))
    groups = [slice_stack(overrides=o, remove=("tpu-sft:reservation",)).one(GROUP) for o in (base, head)]
    replaced = groups[0].inputs.get("description") != groups[1].inputs.get("description")
    assert replaced == (why is not None) and "description" in groups[1].replace_on_changes
    if why is None:
        assert {task for task, reruns, _ in rows if reruns} == {"train", "export", "eval"}
    else:
        assert rows == [(phase, True, why) for phase in PHASES]


def test_a_host_the_group_recreated_reruns_every_phase_on_every_host_and_lets_in_only_its_new_key(slice_stack):
    """The MIG recreated worker 1: same name, new instance id (read on the next preview or `up`). Every task's
    triggers change, so every phase re-runs on every worker (train resumes from the bucket); the target says which
    host is new, and nothing else changes: the other hosts' keys stay pinned (remote/ssh/host_ids.py)."""
    before = tasks(slice_stack(overrides={"tpu-sft:hfToken": TOKEN}, secret_keys=("tpu-sft:hfToken",)))
    after = tasks(
        slice_stack(
            overrides={"tpu-sft:hfToken": TOKEN},
            secret_keys=("tpu-sft:hfToken",),
            instance_ids={"tpu-sft-dev-02": "7999999999"},
        )
    )
    for name, task in after.items():
        assert (
            task.inputs["triggers"][0]
            == slice_identity(4, {"tpu-sft-dev-02": "7999999999"})
            != (before[name].inputs["triggers"][0])
        )
        assert task.inputs["triggers"][1:] == before[name].inputs["triggers"][1:]
        target, old = (json.loads(t.inputs["environment"]["TPU_SFT_TARGET"]) for t in (task, before[name]))
        assert target["host_ids"] == {**old["host_ids"], "tpu-sft-dev-02": "7999999999"}
        assert {k: v for k, v in target.items() if k != "host_ids"} == {k: v for k, v in old.items() if k != "host_ids"}


def test_after_autostop_emptied_the_group_a_preview_shows_every_phase_again_and_up_reads_the_new_hosts(
    dev_config, slice_stack, monkeypatch
):
    """Autostop resized the group to 0 (workload/spend/autostop.py): its hosts are gone, and the refresh of the next
    `pulumi up` reads the size back as 0, which the update sets back. Its preview cannot read ids of hosts that the
    update has yet to make: it must still succeed and show every phase re-running; the update itself, once the group
    is stable again, reads the new hosts' ids. (The mock engine answers getInstance for a missing host as pulumi-gcp
    does: "… not found".)"""
    before = tasks(slice_stack())
    gone = {name: None for name in names(4)}
    preview = tasks(slice_stack(instance_ids=gone))
    for name, task in preview.items():
        assert task.inputs["triggers"][0] != before[name].inputs["triggers"][0]
        assert task.inputs["triggers"][0] == "/".join([str(MIG_ID), *["none yet: made by this update"] * 4])
        assert task.inputs["triggers"][1:] == before[name].inputs["triggers"][1:]
    monkeypatch.setenv(
        "HF_TOKEN", "hf_" + "x" * 30
    )  # an update needs a token (tests/infra/config/test_settings_errors.py)
    config = {k: v for k, v in {**dev_config, "tpu-sft:acceleratorType": "v6e-16"}.items() if k not in DISK_KEYS}
    new_ids = {name: str(8_000_000_000 + number) for number, name in enumerate(names(4), 1)}
    made_again = tasks(run_program(config, preview=False, instance_ids=new_ids))
    assert {t.inputs["triggers"][0] for t in made_again.values()} == {slice_identity(4, new_ids)}
    # `up` never runs a task with a host it could not read: by then the group is stable, and a missing host fails.
    with pytest.raises(Exception, match="instances/tpu-sft-dev-03 not found"):
        run_program(config, preview=False, instance_ids={"tpu-sft-dev-03": None})

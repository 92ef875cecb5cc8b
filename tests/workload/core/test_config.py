"""The pipeline's settings table (workload/core/config.py) on its own: its defaults are the seed's run trained as the
chip measured it fastest, its rows say which phases a setting re-runs and whether it names a run, and each refusal says
the key and a fix that works."""

import dataclasses
import re

import pytest

from workload.core.config import SETTINGS, ConfigError, PipelineConfig, parse_structured
from workload.run.commands import run_name

DEFAULTS = {
    "maxtextVersion": "0.2.3",
    "installPostTrainExtras": False,  # the seed's is true: its Tunix is not the tested one (workload/core/lock.py)
    "torchBackend": "cpu",
    "model": "gemma3-4b",
    "profile": "full",
    "trainer": "native",  # not the seed's: MaxText's own loop, 1.41x Tunix's at the seed's flags on a v5e
    "tokens": None,  # no length: the seed's 1,000 x 1 x 2,048 tokens per chip, 250 steps of 4 (test_run_length.py)
    "epochs": None,
    "steps": None,
    "perDeviceBatchSize": 4,  # not the seed's 1: the native loop's plateau on a v5e chip (docs/trainer.md)
    "tuning": "full",  # every weight; a LoRA adapter's shape is unset (workload/core/tuning.py)
    "loraRank": None,
    "loraAlpha": None,
    "loraModules": None,
    "loraWeightQtype": None,  # qlora's: unset, nf4 (workload/core/tuning.py says why)
    "rematPolicy": None,  # the levers: MaxText's own defaults
    "attention": None,
    "flashBlockSize": None,
    "vocabTiling": None,
    "weightDtype": None,
    "xlaFlags": None,
    "dataset": "HuggingFaceH4/ultrachat_200k",
    "trainSplit": "train_sft",
    "trainDataColumns": ["messages"],
    "chatTemplate": None,
    "learningRate": None,
    "maxTargetLength": None,
    "acceleratorType": "v6e-8",
    "checkpointPeriod": 63,  # not in the seed: checkpoints to resume from (docs/checkpoints.md)
    "evalInterval": 50,  # not in the seed: the held-out loss (docs/learning.md)
    "evalSteps": 3,
    "evalSplit": "test_sft",
    "evalData": None,
    "requireLearning": False,
    "runName": None,
    "evalTasks": ["ifeval", "gsm8k"],  # not in the seed: the benchmarks before and after (docs/eval.md)
    "evalLimit": None,
}
# A valid value other than the default for every key; the run's length as a step count (LENGTHS: the other forms).
CHANGED = {
    "maxtextVersion": "0.2.2",
    "installPostTrainExtras": True,
    "torchBackend": "auto",
    "model": "gemma3-12b",
    "profile": "tiny",
    "trainer": "tunix",
    "steps": 20,
    "perDeviceBatchSize": 2,
    "tuning": "qlora",  # with trainer tunix (above): the loop that applies it
    "loraRank": 8,
    "loraAlpha": 16.0,
    "loraModules": ["q_proj", "v_proj"],
    "loraWeightQtype": "int8",
    "rematPolicy": "minimal_offloaded",
    "attention": "flash",
    "flashBlockSize": 1024,
    "vocabTiling": 1,  # no tiling, said out loud: trainer tunix (above) refuses more
    "weightDtype": "bfloat16",
    "xlaFlags": "--xla_tpu_enable_async_collective_fusion=true --xla_tpu_overlap_compute_collective_tc=true",
    "dataset": "./chats.jsonl",
    "trainSplit": "train_gen",
    "trainDataColumns": ["prompt", "completion"],
    "chatTemplate": "gs://team-data/chat.jinja",
    "learningRate": 1e-4,
    "maxTargetLength": 512,
    "acceleratorType": "v6e-4",
    "checkpointPeriod": 100,
    "evalInterval": 25,
    "evalSteps": 4,
    "evalSplit": "test_gen",
    "evalData": "5%",
    "requireLearning": True,
    "runName": "my-run",
    "evalTasks": ["gsm8k"],
    "evalLimit": 50,
}
LENGTHS = {"tokens": 4096000, "epochs": 2.5}  # each instead of CHANGED's steps: one form of the length at a time
# Where each key first feeds (workload/core/contract.py PHASES); a change re-runs that phase and every later one.
FIRST_PHASE = {
    # model and profile: bootstrap downloads the full profile's weights.
    "bootstrap": {"maxtextVersion", "installPostTrainExtras", "torchBackend", "model", "profile"},
    "convert": set(),
    "train": {
        "trainer",
        "tokens",
        "epochs",
        "steps",
        "perDeviceBatchSize",
        "tuning",
        "loraRank",
        "loraAlpha",
        "loraModules",
        "loraWeightQtype",
        "rematPolicy",
        "attention",
        "flashBlockSize",
        "vocabTiling",
        "weightDtype",
        "xlaFlags",
        "dataset",
        "trainSplit",
        "trainDataColumns",
        "chatTemplate",
        "learningRate",
        "maxTargetLength",
        "acceleratorType",
        "checkpointPeriod",
        "evalInterval",
        "evalSteps",
        "evalSplit",
        "evalData",
        "requireLearning",
        "runName",
    },
    "export": set(),
    "eval": {"evalTasks", "evalLimit"},  # the eval phase alone: a change re-runs no training
}
# What the trained weights do not depend on: how MaxText is installed, how the step computes, how often a checkpoint
# is written, the held-out loss, and the run's own name. Every other setting names the run.
NAMES_NO_RUN = {
    "installPostTrainExtras",
    "rematPolicy",  # the levers but the weights' dtype: how the step computes, not what
    "attention",
    "flashBlockSize",
    "vocabTiling",
    "xlaFlags",
    "torchBackend",
    "checkpointPeriod",
    "evalInterval",
    "evalSteps",
    "evalSplit",
    "evalData",
    "requireLearning",
    "runName",
    "evalTasks",
    "evalLimit",
}
# A file dataset needs its held-out files, and held-out files need a file dataset: each is changed beside the other
# (evalInterval, which names no run, in the base), so that the other alone is what changes.
# LoRA needs Tunix's loop, and an adapter's shape needs LoRA.
_LORA = {"trainer": "tunix", "tuning": "lora"}
_QLORA = {**_LORA, "tuning": "qlora"}
CHANGED_BESIDE = {
    "dataset": {"evalData": "5%"},
    "evalData": {"dataset": "./chats.jsonl"},
    "tuning": {"trainer": "tunix"},
    **dict.fromkeys(("loraRank", "loraAlpha", "loraModules"), _LORA),
    "loraWeightQtype": _QLORA,
}


def message(raw: dict) -> str:
    with pytest.raises(ConfigError) as raised:
        PipelineConfig.from_mapping(raw)
    return str(raised.value)


def test_an_empty_mapping_gives_the_defaults():
    assert PipelineConfig.from_mapping({}).to_mapping() == DEFAULTS
    assert PipelineConfig.from_mapping(dict.fromkeys(DEFAULTS)) == PipelineConfig()  # null: the default


def test_the_tiny_profile_trains_one_sequence_a_step_unless_told():
    assert PipelineConfig.from_mapping({"profile": "tiny"}).per_device_batch_size == 1
    assert PipelineConfig.from_mapping({"profile": "tiny", "perDeviceBatchSize": 2}).per_device_batch_size == 2


def test_every_key_round_trips_through_its_json_form():
    changed = {**CHANGED, **LENGTHS}
    assert set(changed) == set(DEFAULTS) and all(changed[k] != DEFAULTS[k] for k in DEFAULTS)
    for length, value in {"steps": CHANGED["steps"], **LENGTHS}.items():
        given = {**{k: v for k, v in CHANGED.items() if k != "steps"}, length: value}
        config = PipelineConfig.from_mapping(given)
        assert config.to_mapping() == {**DEFAULTS, **given}
        assert PipelineConfig.from_mapping(config.to_mapping()) == config


def test_validated_settings_cannot_be_changed_afterwards():
    config = PipelineConfig.from_mapping({"steps": 10})
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.step_count = 0  # type: ignore[misc]


def test_the_settings_table_cannot_be_changed_at_run_time():
    """The Pulumi program, the plan command and the VM read the same rows: none can move a key to another phase."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        SETTINGS[0].phase = "export"  # type: ignore[misc]


@pytest.mark.parametrize("phase", list(FIRST_PHASE))
def test_a_phase_depends_on_its_own_settings_and_every_earlier_phases(phase):
    phases = list(FIRST_PHASE)
    expected = set().union(*(FIRST_PHASE[p] for p in phases[: phases.index(phase) + 1]))
    settings = PipelineConfig.from_mapping(CHANGED).phase_settings(phase)
    assert settings == {key: CHANGED.get(key) for key in expected}


@pytest.mark.parametrize("key", list(CHANGED))
def test_a_setting_changes_the_derived_run_name_exactly_when_the_weights_depend_on_it(key):
    beside = CHANGED_BESIDE.get(key, {})
    # A file dataset's held-out data is the base's beside no held-out loss; held-out files alone are no base at all.
    if "dataset" in beside:
        base = PipelineConfig.from_mapping({**beside, "evalInterval": 0})
    else:
        base = PipelineConfig.from_mapping({} if "evalData" in beside else beside)
    changed = PipelineConfig.from_mapping({**beside, key: CHANGED[key]})
    names_run = key not in NAMES_NO_RUN
    assert (key in {_camel(f) for f in changed.weight_inputs()}) == names_run
    assert (changed.run_settings().get(key) == CHANGED[key]) == names_run  # what a kept model records
    if key != "runName":  # a given name is used as it is
        assert (run_name(changed) != run_name(base)) == names_run


def _camel(field: str) -> str:
    head, *rest = field.split("_")
    return head + "".join(part.title() for part in rest)


def test_numbers_given_natively_are_accepted_and_booleans_are_not():
    config = PipelineConfig.from_mapping({"learningRate": 2e-5, "steps": 10, "checkpointPeriod": 5})
    assert (config.learning_rate, config.steps, config.checkpoint_period) == (2e-5, 10, 5)
    assert PipelineConfig.from_mapping({"learningRate": 1}).learning_rate == 1.0
    assert message({"learningRate": True}).startswith("tpu-sft:learningRate: expected a number of at least 0, got True")
    assert message({"steps": True}).startswith("tpu-sft:steps: expected a whole number, got True")


def test_a_choice_refused_suggests_the_first_choice():
    assert message({"torchBackend": "cuda"}) == (
        "tpu-sft:torchBackend: 'cuda' is not one of cpu, auto. Fix: pulumi config set tpu-sft:torchBackend cpu"
    )
    assert message({"model": "gemma3-1b"}).endswith("Fix: pulumi config set tpu-sft:model gemma3-4b")


def test_every_column_name_is_checked():
    assert message({"trainDataColumns": '["messages", "bad column"]'}) == (
        "tpu-sft:trainDataColumns: 'bad column' is not a column name. "
        "Fix: pulumi config set tpu-sft:trainDataColumns '[\"messages\"]'"
    )
    assert message({"trainDataColumns": ["messages", 5]}).startswith("tpu-sft:trainDataColumns: 5 is not")


def test_structured_values_say_which_json_kind_they_expect():
    assert message({"trainDataColumns": "messages"}).startswith(
        "tpu-sft:trainDataColumns: expected a JSON list, got 'messages'"
    )
    with pytest.raises(ConfigError, match=r"^tpu-sft:labels: expected a JSON object, got '\[\]'"):
        parse_structured("labels", "[]", dict, '{"owner": "me"}')


def test_of_several_unknown_keys_the_first_in_order_is_named():
    assert message({"zebra": 1, "stepz": 10, "alpha": 2}).startswith("tpu-sft:alpha: is not a pipeline setting")


def test_requiring_learning_without_a_held_out_loss_is_refused_in_one_line():
    line = message({"requireLearning": "true", "evalInterval": "0"})
    assert line == (
        "tpu-sft:requireLearning: needs a held-out loss to judge by, and tpu-sft:evalInterval is 0. Fix: "
        "pulumi config set tpu-sft:evalInterval 250, or pulumi config set tpu-sft:requireLearning false"
    )
    assert PipelineConfig.from_mapping({"evalInterval": "0"}).eval_interval == 0


def test_a_learning_rate_of_zero_is_a_run_that_only_measures_and_below_zero_is_refused():
    assert PipelineConfig.from_mapping({"learningRate": "0"}).learning_rate == 0.0
    assert message({"learningRate": "-1e-5"}).startswith("tpu-sft:learningRate: expected a number of at least 0")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            {"rematPolicy": "custom"},
            "tpu-sft:rematPolicy: 'custom' is not one of full, minimal, minimal_with_context, "
            "save_dot_with_context_except_mlp, save_dot_except_mlpwi, save_dot_except_mlp, save_qkv_proj, "
            "save_out_proj, qkv_proj_offloaded, minimal_offloaded. Fix: pulumi config set tpu-sft:rematPolicy full",
        ),
        (
            {"attention": "cudnn_flash_te"},
            "tpu-sft:attention: 'cudnn_flash_te' is not one of autoselected, flash, dot_product. "
            "Fix: pulumi config set tpu-sft:attention autoselected",
        ),
        (
            {"flashBlockSize": "1000"},
            "tpu-sft:flashBlockSize: must be a multiple of 128, got 1000. "
            "Fix: pulumi config set tpu-sft:flashBlockSize 1024",
        ),
        (
            {"flashBlockSize": "512", "attention": "dot_product"},
            "tpu-sft:flashBlockSize: sizes the flash kernel's blocks, and tpu-sft:attention is dot_product. "
            "Fix: pulumi config set tpu-sft:attention flash, or pulumi config rm tpu-sft:flashBlockSize",
        ),
        (
            {"vocabTiling": "4", "trainer": "tunix"},
            "tpu-sft:vocabTiling: is 4, and vocabulary tiling in Tunix's NNX loop is untested here "
            "(tpu-sft:trainer tunix). Fix: pulumi config set tpu-sft:trainer native, or "
            "pulumi config set tpu-sft:vocabTiling 1",
        ),
        (
            {"vocabTiling": "3", "maxTargetLength": "1024", "perDeviceBatchSize": "1"},
            "tpu-sft:vocabTiling: is 3, which does not divide a chip's 1024 tokens a step (batch x sequence), as "
            "MaxText needs. Fix: pulumi config set tpu-sft:vocabTiling 4",
        ),
        (
            {"weightDtype": "float16"},
            "tpu-sft:weightDtype: 'float16' is not one of float32, bfloat16. "
            "Fix: pulumi config set tpu-sft:weightDtype float32",
        ),
        (
            {"xlaFlags": "--xla_tpu_enable_windowed_einsum=true; rm -rf ~"},
            "tpu-sft:xlaFlags: '--xla_tpu_enable_windowed_einsum=true; rm -rf ~' is not XLA flags (--name=value, one "
            "space between). Fix: pulumi config set tpu-sft:xlaFlags --xla_tpu_enable_async_collective_fusion=true",
        ),
    ],
)
def test_a_bad_lever_is_refused_in_one_line_that_names_the_fix(raw, expected):
    assert message(raw) == expected


def test_vocabulary_tiling_divides_the_default_sequence_of_the_batch():
    """Unset, the sequence is base.yml's 2,048 tokens: 8 tiles divide it; MaxText's rule is on batch x sequence."""
    assert PipelineConfig.from_mapping({"vocabTiling": 8}).vocab_tiling == 8
    assert PipelineConfig.from_mapping({"vocabTiling": 6, "perDeviceBatchSize": 3}).vocab_tiling == 6
    assert "does not divide a chip's 2048 tokens" in message({"vocabTiling": 6, "perDeviceBatchSize": 1})
    assert "does not divide a chip's 8192 tokens" in message({"vocabTiling": 6})  # at the default batch, 4


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            {"tuning": "lora"},
            "tpu-sft:tuning: lora needs Tunix's loop: MaxText's own (tpu-sft:trainer native) does not apply LoRA in "
            "MaxText 0.2.3 and would train every weight. Fix: pulumi config set tpu-sft:trainer tunix, or "
            "pulumi config set tpu-sft:tuning full",
        ),
        (
            {"tuning": "qlora"},
            "tpu-sft:tuning: qlora needs Tunix's loop: MaxText's own (tpu-sft:trainer native) does not apply LoRA in "
            "MaxText 0.2.3 and would train every weight. Fix: pulumi config set tpu-sft:trainer tunix, or "
            "pulumi config set tpu-sft:tuning full",
        ),
        (
            {**_LORA, "loraWeightQtype": "int8"},
            "tpu-sft:loraWeightQtype: quantises the frozen weights of a QLoRA run, and tpu-sft:tuning is lora, which "
            "leaves them in bf16. Fix: pulumi config set tpu-sft:tuning qlora, or pulumi config rm "
            "tpu-sft:loraWeightQtype",
        ),
        (
            {"loraWeightQtype": "nf4"},
            "tpu-sft:loraWeightQtype: shapes a LoRA adapter, and tpu-sft:tuning is full, which trains every weight. "
            "Fix: pulumi config set tpu-sft:tuning qlora, or pulumi config rm tpu-sft:loraWeightQtype",
        ),
        (
            {**_QLORA, "loraWeightQtype": "int4"},
            "tpu-sft:loraWeightQtype: 'int4' is not one of nf4, int8. Fix: pulumi config set tpu-sft:loraWeightQtype "
            "nf4",
        ),
        (
            {"tuning": "adapter"},
            "tpu-sft:tuning: 'adapter' is not one of full, lora, qlora. Fix: pulumi config set tpu-sft:tuning full",
        ),
        (
            {"loraAlpha": "16", "loraRank": "8"},
            "tpu-sft:loraRank: shapes a LoRA adapter, and tpu-sft:tuning is full, which trains every weight. "
            "Fix: pulumi config set tpu-sft:tuning lora, or pulumi config rm tpu-sft:loraRank",
        ),
        (
            {**_LORA, "loraRank": "0"},
            "tpu-sft:loraRank: must be at least 1, got 0. Fix: pulumi config set tpu-sft:loraRank 16",
        ),
        (
            {**_LORA, "loraAlpha": "0"},
            "tpu-sft:loraAlpha: expected a positive number, got '0'. Fix: pulumi config set tpu-sft:loraAlpha 32",
        ),
        (
            {**_LORA, "loraModules": '["q_proj", "qkv"]'},
            "tpu-sft:loraModules: 'qkv' is not a projection; one or more of q_proj, k_proj, v_proj, o_proj, "
            'gate_proj, up_proj, down_proj. Fix: pulumi config set tpu-sft:loraModules \'["q_proj", "v_proj"]\'',
        ),
        (
            {**_LORA, "loraModules": '["q_proj", "q_proj"]'},
            "tpu-sft:loraModules: must name each projection once; one or more of q_proj, k_proj, v_proj, o_proj, "
            'gate_proj, up_proj, down_proj. Fix: pulumi config set tpu-sft:loraModules \'["q_proj", "v_proj"]\'',
        ),
        (
            {**_LORA, "loraModules": "[]"},
            "tpu-sft:loraModules: must name each projection once; one or more of q_proj, k_proj, v_proj, o_proj, "
            'gate_proj, up_proj, down_proj. Fix: pulumi config set tpu-sft:loraModules \'["q_proj", "v_proj"]\'',
        ),
    ],
)
def test_a_bad_tuning_is_refused_in_one_line_that_names_the_fix(raw, expected):
    assert message(raw) == expected


def test_a_lora_run_takes_the_usual_adapter_for_what_is_unset():
    adapter = PipelineConfig.from_mapping(_LORA).adapter
    assert adapter is not None and (adapter.rank, adapter.alpha) == (16, 32.0) and len(adapter.modules) == 7
    assert adapter.module_path == (
        "decoder/(layers|layers_remainder)/.*(self_attention/query|self_attention/key|self_attention/value"
        "|self_attention/out|mlp/wi_0|mlp/wi_1|mlp/wo)"
    )
    assert PipelineConfig.from_mapping({}).adapter is None
    assert adapter.weight_qtype is None  # LoRA's frozen weights are left as they are


def test_a_qlora_run_quantises_its_frozen_weights_to_nf4_unless_told_int8():
    assert PipelineConfig.from_mapping(_QLORA).adapter.weight_qtype == "nf4"
    int8 = PipelineConfig.from_mapping({**_QLORA, "loraWeightQtype": "int8"}).adapter
    assert int8.weight_qtype == "int8" and int8.maxtext_options()[-1] == "lora.lora_weight_qtype=int8"
    assert int8.on_the_unquantised_base() == dataclasses.replace(int8, weight_qtype=None)


@pytest.mark.parametrize(
    "path",
    [
        "decoder/layers/layers_0/self_attention/query",  # a scanned block's first layer
        "decoder/layers_remainder/layers_3/mlp/wo",  # gemma3-4b's layer 33: past the five scanned blocks of six
        "decoder/layers/33/mlp/wi_0",  # unscanned
    ],
)
def test_the_adapter_reaches_every_layer_of_gemma3_4b_scanned_or_not(path):
    """The NNX decoder's module paths, read from MaxText 0.2.3's gemma3-4b (bench/RESULTS.md, issue 67)."""
    assert re.search(PipelineConfig.from_mapping(_LORA).adapter.module_path, path)
    assert not re.search(PipelineConfig.from_mapping(_LORA).adapter.module_path, "decoder/layers/0/mlp/dropout")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            {"evalTasks": '["ifeval", "mmlu"]'},
            "tpu-sft:evalTasks: 'mmlu' is not a task; one or more of ifeval, gsm8k, or off. "
            """Fix: pulumi config set tpu-sft:evalTasks '["ifeval", "gsm8k"]'""",
        ),
        (
            {"evalTasks": '["gsm8k", "gsm8k"]'},
            "tpu-sft:evalTasks: must name each task once; one or more of ifeval, gsm8k, or off. "
            """Fix: pulumi config set tpu-sft:evalTasks '["ifeval", "gsm8k"]'""",
        ),
        (
            {"evalTasks": "ifeval"},
            "tpu-sft:evalTasks: expected a JSON list, got 'ifeval'. "
            """Fix: pulumi config set tpu-sft:evalTasks '["ifeval", "gsm8k"]'""",
        ),
        (
            {"evalLimit": "0"},
            "tpu-sft:evalLimit: must be at least 1, got 0. Fix: pulumi config set tpu-sft:evalLimit 100",
        ),
        (
            {"evalLimit": "-5"},
            "tpu-sft:evalLimit: must be at least 1, got -5. Fix: pulumi config set tpu-sft:evalLimit 100",
        ),
        (
            {"evalLimit": "some"},
            "tpu-sft:evalLimit: expected a whole number, got 'some'. Fix: pulumi config set tpu-sft:evalLimit 100",
        ),
    ],
)
def test_a_bad_eval_setting_is_refused_in_one_line_that_names_the_fix(raw, expected):
    assert message(raw) == expected


def test_eval_off_and_all_are_words_and_survive_the_round_trip():
    off = PipelineConfig.from_mapping({"evalTasks": "off", "evalLimit": "all"})
    assert (off.eval_tasks, off.eval_limit) == ((), None)
    assert PipelineConfig.from_mapping(off.to_mapping()) == off
    assert PipelineConfig.from_mapping({"evalTasks": ["gsm8k"], "evalLimit": 20}).eval_tasks == ("gsm8k",)

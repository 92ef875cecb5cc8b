"""The argv/env builders: the seed's commands for the default settings, and what each setting changes."""

import dataclasses
import re
import shlex

import pytest

from workload.core.config import PipelineConfig
from workload.core.models import MODELS
from workload.launch import data_in_process
from workload.launch.tpu_env import tpu_env
from workload.run import commands
from workload.run.layout import Layout
from workload.tiny import assets as tiny

# Seed steps 4–6 (shared/seed/README.md) with their variables expanded: WORK=/dev/shm, RUN_NAME fixed.
# `hf_access_token="${HF_TOKEN?}"` is left out of to_maxtext on purpose: argv is world-readable through
# /proc and ps and ends up in logs; MaxText 0.2.3 reads HF_TOKEN from the environment instead.
SEED_TO_MAXTEXT = """python3 -m maxtext.checkpoint_conversion.to_maxtext
    model_name=gemma3-4b
    base_output_directory=/dev/shm/gemma3-4b/mt-format/
    scan_layers=True use_multimodal=False hardware=cpu skip_jax_distributed_system=true
    checkpoint_storage_use_zarr3=1 checkpoint_storage_use_ocdbt=1 --lazy_load_tensors=False"""
SEED_TRAIN = """python3 -m maxtext.trainers.post_train.sft.train_sft
    run_name=2026-01-01-00-00-00
    base_output_directory=/dev/shm/gemma3-4b/post-train/
    model_name=gemma3-4b
    load_parameters_path=/dev/shm/gemma3-4b/mt-format//0/items
    per_device_batch_size=1 steps=1000
    hf_path=HuggingFaceH4/ultrachat_200k train_split=train_sft "train_data_columns=['messages']"
    profiler=xplane"""
# What train adds to the seed's step 5: MaxText's own held-out evaluation (docs/learning.md), and the launcher it
# starts through (workload/launch/trainer_launcher.py).
HELD_OUT = ["eval_interval=250", "eval_steps=10", "hf_eval_split=test_sft", "eval_data_columns=['messages']"]
LAUNCHED = ("-m", "workload.launch.trainer_launcher", "maxtext.trainers.post_train.sft.train_sft")
SEED_TO_HUGGINGFACE = """python3 -m maxtext.checkpoint_conversion.to_huggingface
    model_name=gemma3-4b
    load_parameters_path=/dev/shm/gemma3-4b/post-train//2026-01-01-00-00-00/checkpoints/1000/model_params
    base_output_directory=/dev/shm/gemma3-4b/hf-trained/
    scan_layers=True use_multimodal=False weight_dtype=bfloat16"""
SEED_TPU_ENV = {
    "TPU_ACCELERATOR_TYPE": "v6e-8",
    "TPU_WORKER_ID": "0",
    "TPU_NAME": "my-vm",
    "TPU_SKIP_MDS_QUERY": "1",
    "TPU_WORKER_HOSTNAMES": "localhost",
    "TPU_TOPOLOGY": "2x4",
    "TPU_CHIPS_PER_HOST_BOUNDS": "2,4,1",
    "TPU_HOST_BOUNDS": "1,1,1",
}


def tokens(text):
    # The seed builds paths as "$DIR/…" from directories that end in "/", hence its "//"; same path.
    return [re.sub(r"(?<=[^:])//+", "/", t) for t in shlex.split(text)]


def build(config, work="/dev/shm", run=None):
    layout = Layout(work, "/data/out", config.model, run or commands.run_name(config))
    return layout, commands.pipeline_commands(config, layout, commands.OnHost("python3", "my-vm"))


def seed_launched(seed_train):
    """The seed's train command as it starts through the launcher."""
    python, _, _, *arguments = tokens(seed_train)
    return [python, *LAUNCHED, *arguments]


# The seed's flags, each one setting from the defaults (docs/trainer.md, "The defaults"), with the held-out loss at its
# 1,000 steps' rhythm and no checkpoints but the final one.
SEED_FLAGS = dict(trainer="tunix", per_device_batch_size=1, checkpoint_period=None, eval_interval=250, eval_steps=10)


def test_the_tunix_trainer_reproduces_the_seed_commands_token_by_token_plus_the_held_out_loss():
    _, (convert, train, export) = build(PipelineConfig(run_name="2026-01-01-00-00-00", **SEED_FLAGS))
    assert list(convert.argv) == tokens(SEED_TO_MAXTEXT)
    assert [a for a in train.argv if a not in HELD_OUT] == seed_launched(SEED_TRAIN)
    assert [a for a in train.argv if a in HELD_OUT] == HELD_OUT
    assert list(export.argv) == tokens(SEED_TO_HUGGINGFACE)


def test_the_default_native_trainer_runs_maxtexts_own_loop_with_the_seeds_arguments_and_exports_its_last_state():
    """MaxText's own loop names the state after update 1000 checkpoint 999 and keeps the parameters under items."""
    native = {**SEED_FLAGS, "trainer": "native"}  # the default loop at the seed's other flags
    layout, (convert, train, export) = build(PipelineConfig(run_name="2026-01-01-00-00-00", **native))
    _, (_, seed_train, seed_export) = build(PipelineConfig(run_name="2026-01-01-00-00-00", **SEED_FLAGS))
    assert list(convert.argv) == tokens(SEED_TO_MAXTEXT)
    assert train.argv[3] == commands.TRAINER_MODULES["native"] == "maxtext.trainers.post_train.sft.train_sft_native"
    assert commands.trainer_arguments(train.argv) == commands.trainer_arguments(seed_train.argv)
    parameters = f"load_parameters_path={layout.checkpoint(999)}/items"
    assert list(export.argv) == [parameters if a.startswith("load_parameters_path=") else a for a in seed_export.argv]
    assert parameters in commands.logit_parity(PipelineConfig(**native), layout).argv


def test_without_held_out_passes_train_is_the_seeds_with_base_ymls_never_said_out_loud():
    _, (_, train, _) = build(PipelineConfig(run_name="2026-01-01-00-00-00", **{**SEED_FLAGS, "eval_interval": 0}))
    assert [a for a in train.argv if a != "eval_interval=-1"] == seed_launched(SEED_TRAIN)
    assert "eval_interval=-1" in train.argv  # 0 would divide by zero in Tunix's loop


def test_a_held_out_pass_comes_at_least_once_after_training_and_reads_the_training_columns():
    _, (_, short, _) = build(PipelineConfig(step_count=30))  # the default interval, 50, is longer than the run
    assert "eval_interval=30" in short.argv
    config = PipelineConfig(eval_interval=7, eval_steps=3, eval_split="test_gen", train_data_columns=("prompt",))
    _, (_, train, _) = build(config)
    assert {"eval_interval=7", "eval_steps=3", "hf_eval_split=test_gen", "eval_data_columns=['prompt']"} <= set(
        train.argv
    )


def test_each_lever_reaches_the_train_step_and_an_unset_one_leaves_maxtexts_default():
    levers = PipelineConfig(
        remat_policy="qkv_proj_offloaded",
        attention="flash",
        flash_block_size=1024,
        vocab_tiling=4,
        weight_dtype="bfloat16",
        xla_flags="--xla_tpu_enable_async_collective_fusion=true",
    )
    _, (_, train, export) = build(levers)
    sizes = ("q", "kv", "kv_compute", "q_dkv", "kv_dkv", "kv_dkv_compute", "q_dq", "kv_dq")
    blocks = [f"sa_block_{size}=1024" for size in sizes]
    expected = ["remat_policy=qkv_proj_offloaded", "attention=flash", "num_vocab_tiling=4", "weight_dtype=bfloat16"]
    assert [a for a in train.argv if a in expected + blocks] == expected + blocks
    assert train.env["LIBTPU_INIT_ARGS"] == "--xla_tpu_enable_async_collective_fusion=true"
    assert "LIBTPU_INIT_ARGS" not in export.env  # the flags are the train step's
    _, (_, plain, _) = build(PipelineConfig())
    assert not [a for a in plain.argv if a.split("=")[0] in {"remat_policy", "attention", "num_vocab_tiling"}]
    assert "LIBTPU_INIT_ARGS" not in plain.env


def test_the_tiny_profile_attends_with_dot_product_whatever_the_lever_says():
    """A CPU runs no flash kernel: the tiny profile's CPU options come after the levers, and MaxText takes the last."""
    _, (_, train, _) = build(PipelineConfig(profile="tiny", attention="flash"))
    attention = [a for a in train.argv if a.startswith("attention=")]
    assert attention == ["attention=flash", "attention=dot_product"]


def test_samples_compare_the_cached_base_model_with_the_export_on_held_out_questions():
    layout = Layout("/w", "/data/out", "gemma3-4b", "run")
    full = commands.samples(PipelineConfig(), layout)
    assert full.argv[1:4] == ("-m", "workload.measure.samples", "google/gemma-3-4b-it")  # from bootstrap's HF cache
    assert full.argv[4] == layout.export_dir and full.env == {"HF_HOME": layout.hf_home}
    held_out = ("--dataset", "HuggingFaceH4/ultrachat_200k", "--split", "test_sft", "--column", "messages")
    assert full.argv[-6:] == held_out
    tiny_run = commands.samples(PipelineConfig(profile="tiny"), layout)
    assert tiny_run.argv[3] == "/w/tiny/model" and "/w/tiny/ultrachat" in tiny_run.argv
    assert tiny_run.env["HF_HUB_OFFLINE"] == "1"
    assert "--dataset" not in commands.samples(PipelineConfig(eval_interval=0), layout).argv


def test_verify_loads_the_local_export_offline():
    layout = Layout("/w", "/data/out", "gemma3-4b", "run")
    full = commands.verify_hf(PipelineConfig(), layout)
    assert full.argv[1:] == ("-m", "workload.measure.verify_hf", layout.export_dir, layout.result("verify.json"))
    assert full.env == {"HF_HOME": layout.hf_home, "HF_HUB_OFFLINE": "1"}
    assert commands.verify_hf(PipelineConfig(profile="tiny"), layout).env["HF_HUB_OFFLINE"] == "1"


def test_the_tiny_profile_gives_torch_one_thread_and_the_full_profile_leaves_it_to_torch():
    layout = Layout("/w", "/data/out", "gemma3-4b", "run")
    verify = (commands.verify_hf, commands.logit_parity, commands.samples)

    def every_command(config):
        return [*build(config)[1], *(builder(config, layout) for builder in verify)]

    assert [c.env.get("OMP_NUM_THREADS") for c in every_command(PipelineConfig(profile="tiny"))] == ["1"] * 6
    assert [c.env.get("OMP_NUM_THREADS") for c in every_command(PipelineConfig())] == [None] * 6


def test_the_tiny_trainer_reads_its_data_in_its_own_process_and_the_vms_through_grains_worker():
    """workload/launch/data_in_process.py; the held-out passes' equality both ways:
    tests/workload/measure/test_held_out_unlearned.py."""
    layout = Layout("/w", "/data/out", "gemma3-4b", "run")
    assert commands.train_sft(PipelineConfig(profile="tiny"), layout).env[data_in_process.ENV] == "1"
    assert data_in_process.ENV not in commands.train_sft(PipelineConfig(), layout).env


def test_tpu_environment_is_the_seeds_for_train_and_export_and_hf_home_is_on_scratch():
    _, (convert, train, export) = build(PipelineConfig())
    assert convert.env == {"HF_HOME": "/dev/shm/hf-home"}  # step 4 runs before step 5's exports
    assert train.env == export.env == {"HF_HOME": "/dev/shm/hf-home", **SEED_TPU_ENV}


def test_tpu_environment_follows_the_accelerator_type():
    env = tpu_env("v6e-4", "vm")
    assert (env["TPU_ACCELERATOR_TYPE"], env["TPU_TOPOLOGY"], env["TPU_CHIPS_PER_HOST_BOUNDS"]) == (
        "v6e-4",
        "2x2",
        "2,2,1",
    )


def test_no_token_anywhere_in_argv():
    for config in (PipelineConfig(), PipelineConfig(profile="tiny")):
        for command in build(config)[1]:
            assert not any("token" in arg.lower() and "tokenizer" not in arg for arg in command.argv)
            assert "HF_TOKEN" not in command.env


def test_optional_settings_appear_only_when_set():
    config = PipelineConfig(
        learning_rate=1e-3,
        max_target_length=512,
        checkpoint_period=50,
        step_count=200,
        per_device_batch_size=2,
        train_data_columns=("prompt", "messages"),
    )
    _, (_, train, export) = build(config)
    assert train.argv[-3:] == ("learning_rate=0.001", "max_target_length=512", "checkpoint_period=50")
    assert "train_data_columns=['prompt', 'messages']" in train.argv
    assert "per_device_batch_size=2" in train.argv and "steps=200" in train.argv
    assert any(a.endswith("/checkpoints/199/items") for a in export.argv)  # after update 200: native numbering


def test_tiny_profile_runs_converters_through_the_launcher_with_cpu_options_and_local_data():
    layout, (convert, train, export) = build(PipelineConfig(profile="tiny", step_count=20), work="/w")
    assert convert.argv[:6] == (
        "python3",
        "-m",
        "workload.tiny.launcher",
        "--model-dir",
        "/w/tiny/model",
        commands.TO_MAXTEXT,
    )
    assert export.argv[5] == commands.TO_HUGGINGFACE
    assert train.argv[:3] == ("python3", *LAUNCHED[:2])  # the trainer needs no HF config patch
    for command in (convert, train, export):
        assert set(tiny.maxtext_overrides()) <= set(command.argv)
        assert command.env["JAX_PLATFORMS"] == "cpu" and "TPU_ACCELERATOR_TYPE" not in command.env
    assert {"--hf_model_path=/w/tiny/model", "--simulated_cpu_devices_count=1"} <= set(convert.argv)
    assert {
        "hf_path=/w/tiny/ultrachat",
        "train_split=train_sft",
        "tokenizer_path=/w/tiny/model",
        "attention=dot_product",
        "max_target_length=128",
        "eval_interval=20",
        "hf_eval_split=test_sft",
    } <= set(train.argv)


def test_run_name_is_stable_for_the_same_training_inputs_and_changes_with_them():
    base = PipelineConfig()
    assert commands.run_name(base) == commands.run_name(PipelineConfig())
    assert re.fullmatch(r"gemma3-4b-sft-[0-9a-f]{12}", commands.run_name(base))
    assert commands.run_name(PipelineConfig(step_count=10)) != commands.run_name(base)
    assert commands.run_name(PipelineConfig(learning_rate=1e-4)) != commands.run_name(base)
    # Where checkpoints go does not change what is trained: same run, so a resume finds it.
    assert commands.run_name(PipelineConfig(checkpoint_period=5)) == commands.run_name(base)
    assert commands.run_name(PipelineConfig(run_name="mine")) == "mine"


LORA = PipelineConfig(trainer="tunix", tuning="lora", lora_rank=4, lora_alpha=8.0, lora_modules=("q_proj", "down_proj"))
LORA_OPTIONS = [
    "pure_nnx_decoder=true",
    "lora.enable_lora=true",
    "lora.lora_rank=4",
    "lora.lora_alpha=8.0",
    "lora.lora_module_path=decoder/(layers|layers_remainder)/.*(self_attention/query|mlp/wo)",
]


def test_a_lora_run_trains_an_adapter_in_tunixs_loop_and_exports_it_beside_its_base():
    """The checkpoint is the adapter alone and records neither rank nor alpha: the export and the logit check are
    given them again, with the base's converted checkpoint."""
    full = dataclasses.replace(LORA, tuning="full", lora_rank=None, lora_alpha=None, lora_modules=None)
    assert commands.run_name(LORA) != commands.run_name(full)  # the adapter names the run
    layout, (_, train, base, adapter) = build(LORA, run="r")
    _, (_, full_train, full_export) = build(full, run="r")
    train_options = LORA_OPTIONS + [f"sharding_tolerance={commands.lora_sharding_tolerance(LORA)}"]
    assert [a for a in train.argv if a not in train_options] == list(full_train.argv)
    assert [a for a in train.argv if a in train_options] == train_options
    assert f"load_parameters_path={layout.converted_checkpoint}" in base.argv
    assert f"base_output_directory={layout.base_export_dir}/" in base.argv
    assert [a for a in base.argv if not a.startswith(("load_parameters_path=", "base_output_directory="))] == [
        a for a in full_export.argv if not a.startswith(("load_parameters_path=", "base_output_directory="))
    ]
    trained = f"lora.lora_restore_path={commands.trained_params(LORA, layout)}"
    assert adapter.argv[:3] == ("python3", "-m", commands.LORA_EXPORT)
    assert set(LORA_OPTIONS + [trained, f"base_output_directory={layout.adapter_dir}/"]) <= set(adapter.argv)
    assert not [a for a in adapter.argv if a.startswith("load_parameters_path=")]  # to_huggingface's adapter mode
    parity = commands.logit_parity(LORA, layout).argv
    assert parity[parity.index("--adapter") :][:3] == ("--adapter", layout.base_export_dir, layout.adapter_dir)
    assert {f"load_parameters_path={layout.converted_checkpoint}", trained, *LORA_OPTIONS} <= set(parity)
    merge = commands.merge_adapter(LORA, layout)
    assert merge.argv[1:] == (
        "-m",
        "workload.run.peft_merge",
        layout.base_export_dir,
        layout.adapter_dir,
        layout.export_dir,
    )


def test_a_lora_run_lets_maxtext_leave_the_adapter_it_replicates_unsharded():
    """MaxText counts the adapter it replicates as unsharded against base.yml's 2 %: the bound grows by the adapter's
    share of the parameters, rounded up. gemma3-4b's usual adapter (rank 16, every projection) is the 29.8 M
    parameters issue 67 counted, 0.76 % of them; the tiny model's, 11.6 %."""
    usual = PipelineConfig(trainer="tunix", tuning="lora")
    assert usual.adapter is not None and usual.adapter.parameters(MODELS["gemma3-4b"].shape) == 29_802_496
    assert commands.lora_sharding_tolerance(usual) == 0.0277
    assert commands.lora_sharding_tolerance(dataclasses.replace(usual, profile="tiny")) == 0.1363
    assert commands.lora_sharding_tolerance(LORA) == 0.0207  # rank 4 on two projections: 0.06 %
    full = commands.train_sft(PipelineConfig(), Layout("/w", "/data/out", "gemma3-4b", "run"))
    assert not [a for a in full.argv if a.startswith("sharding_tolerance=")]


QLORA = dataclasses.replace(LORA, tuning="qlora", lora_weight_qtype="int8")


def test_a_qlora_run_trains_on_quantised_weights_and_exports_as_a_lora_run_does():
    """The quantisation is a later MaxText's key, which the trainer's launcher takes out of argv (0.2.3's pyconfig
    refuses it); the adapter is exported, merged and held to the bound on the bf16 base, as LoRA's is."""
    nf4 = dataclasses.replace(QLORA, lora_weight_qtype="nf4")
    assert len({commands.run_name(QLORA), commands.run_name(nf4), commands.run_name(LORA)}) == 3
    layout, (convert, train, base, adapter) = build(QLORA, run="r")
    _, (lora_convert, lora_train, lora_base, lora_adapter) = build(LORA, run="r")
    assert train.argv[2] == commands.TRAINER_LAUNCHER
    assert "lora.lora_weight_qtype=int8" in train.argv
    assert [a for a in train.argv if a != "lora.lora_weight_qtype=int8"] == list(lora_train.argv)
    assert (convert, base, adapter) == (lora_convert, lora_base, lora_adapter)
    assert commands.logit_parity(QLORA, layout) == commands.logit_parity(LORA, layout)


def test_a_qlora_runs_merged_model_is_measured_against_the_quantised_base_it_trained_on():
    layout, _ = build(QLORA, run="r")
    distance = commands.quantised_logit_distance(QLORA, layout).argv
    parity = commands.logit_parity(QLORA, layout).argv
    assert distance[1:5] == ("-m", commands.QUANTISED_BASE, "workload.measure.logit_parity", "--unbounded")
    assert distance[5:7] == (layout.export_dir, layout.result(commands.QUANTISED_DISTANCE))
    maxtext_args = parity[parity.index(layout.result("logit-parity.json")) + 1 :]
    assert [a for a in distance[7:] if a not in maxtext_args] == ["lora.lora_weight_qtype=int8"]


@pytest.mark.parametrize(
    "config",
    [PipelineConfig(), PipelineConfig(profile="tiny"), LORA, dataclasses.replace(LORA, profile="tiny"), QLORA],
)
def test_rendered_commands_paste_back_into_the_same_argv_and_env(config):
    for command in build(config)[1]:
        lines = commands.render(command).splitlines()
        assert lines[0] == f"# {command.step}"
        exports = dict(shlex.split(line)[1].split("=", 1) for line in lines if line.startswith("export "))
        assert exports == command.env
        body = "\n".join(line for line in lines[1:] if not line.startswith("export "))
        assert shlex.split(body.replace("\\\n", " ")) == list(command.argv)

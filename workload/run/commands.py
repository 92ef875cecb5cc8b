"""The exact MaxText command lines of seed steps 4–6, built from the settings. Pure functions.

With default settings and a /dev/shm work dir they are the seed's commands token for token, except that training
runs MaxText's own SFT loop unless `tpu-sft:trainer` is `tunix` (the seed's train_sft; workload/core/trainer_loop.py),
started through `workload.launch.trainer_launcher`, and that `hf_access_token=$HF_TOKEN` is left out of argv on purpose:
anything in argv is readable by every user of the VM (`ps`, /proc/*/cmdline) and lands in logs, and whatever is in
`hf_access_token` MaxText writes into its TensorBoard files. With the key unset, MaxText's hub calls get
`token=None` and huggingface_hub reads the file the runner names in `HF_TOKEN_PATH` (workload/launch/hf_token.py).

Settings left at None are left out, so MaxText's own defaults apply; the tiny profile adds MaxText's CPU
options and the overrides that shrink gemma3-4b, and runs the converters through `workload.tiny.launcher`.
"""

from __future__ import annotations

import math
import os
import shlex
from dataclasses import dataclass, field

from workload.core.config import PipelineConfig
from workload.core.data_source import parse_source
from workload.core.models import MODELS, parameter_count
from workload.core.run_length import TINY_MAX_TARGET_LENGTH
from workload.core.trainer_loop import TRAINER_LOOPS
from workload.launch.jax_process import ONE_HOST, JaxProcess
from workload.launch.tpu_env import cpu_env, hf_env, tpu_env
from workload.measure.logit_parity import KL_BOUND
from workload.run import levers, storage
from workload.run.fingerprint import fingerprint
from workload.run.layout import Layout
from workload.tiny import assets as tiny

TO_MAXTEXT = "maxtext.checkpoint_conversion.to_maxtext"
# Each `tpu-sft:trainer` value's MaxText module (workload/core/trainer_loop.py); TRAIN_SFT is the seed's, Tunix's.
TRAINER_MODULES = {name: loop.module for name, loop in TRAINER_LOOPS.items()}
TRAIN_SFT = TRAINER_MODULES["tunix"]
TO_HUGGINGFACE = "maxtext.checkpoint_conversion.to_huggingface"
# train_sft runs through it, so that its data workers do not import the whole trainer anew (its docstring says why).
TRAINER_LAUNCHER = "workload.launch.trainer_launcher"
# A LoRA run's adapter export: to_huggingface, mended to read a LoRA checkpoint (its docstring says why).
LORA_EXPORT = "workload.launch.lora_export"
# A QLoRA run's MaxText with its base quantised as in training (its docstring says why it is a launcher), and what the
# merged model's distance to it is written to.
QUANTISED_BASE = "workload.launch.quantised_base"
QUANTISED_DISTANCE = "logit-distance-quantised.json"

# Seed step 4 sets USE_PATHWAYS=0 (McJAX): zarr3 and ocdbt storage are on.
_USE_PATHWAYS = 0
_TINY_TRAIN_CPU_OPTIONS = [
    "hardware=cpu",
    "attention=dot_product",  # the default picks a GPU kernel: "Only interpret mode is supported on CPU"
    "async_checkpointing=False",
]
# Orbax's barriers (checkpoint manager, save, restore) are collectives by default: on CPU, gloo ones, and gloo gives
# processes 30 s to meet, where a TPU's collectives wait. Under load one worker's restore ran more than
# 30 s behind the other's and the train aborted (SIGABRT). This absl flag of Orbax's makes them barriers of JAX's
# coordination service, which wait 300 s: the CPU stand-in no longer fails where a slice's chips would not.
_WAIT_AT_BARRIERS_THROUGH_THE_COORDINATOR = "--experimental_orbax_use_distributed_barrier=true"
# No persistent compile cache for the CPU stand-in of a slice. JAX keys each entry by, among others, the topology of
# the program's devices as this process serialises it (jax/_src/cache_key.py "accelerator_config"), and on CPU that
# differs from process to process (measured with jax 0.9.2: process 1's key never equals process 0's), while only
# process 0 writes entries. So with any cache, every train after the first (a resume, a retry) loads worker 0's
# steps and compiles worker 1's: worker 0 reached the first training step a compile early, 15 s on a quiet machine
# and past gloo's 30 s under load, and the resumed train aborted (`Connect timeout`). Without one, every worker
# compiles, as in a first train, and they meet at that step together. An empty value: MaxText sets no cache dir.
_NO_COMPILE_CACHE = "jax_cache_dir="
# base.yml's `sharding_tolerance`: the share of the parameters MaxText lets a mesh of more than one device leave
# unsharded, checked as Tunix's loop starts (trainers/post_train/hooks.py `on_train_start`).
_MAXTEXT_SHARDING_TOLERANCE = 0.02


@dataclass(frozen=True)
class OnHost:
    """Where a command runs, which every builder below takes: the interpreter of MaxText's venv, the host's name
    (a TPU's TPU_NAME) and the host's process in the JAX job."""

    python: str = "python3"
    hostname: str = ""
    worker: JaxProcess = ONE_HOST


THIS_HOST = OnHost()


@dataclass(frozen=True)
class Command:
    step: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)  # added to the inherited environment


def training_inputs(config: PipelineConfig) -> dict:
    """What determines the trained weights; its fingerprint names a run when `runName` is unset."""
    return {**config.weight_inputs(), "tiny_model": tiny.SPEC if config.profile == "tiny" else None}


def run_name(config: PipelineConfig) -> str:
    """The configured name, or one derived from the training inputs, so a re-run after an interruption
    resumes the same run instead of starting a new one (the seed's timestamp name cannot do that)."""
    return config.run_name or f"{config.model}-sft-{fingerprint(training_inputs(config))[:12]}"


def trained_params(config: PipelineConfig, layout: Layout) -> str:
    """The final checkpoint's parameters, as the run's loop wrote them: export and the logit check load them."""
    return layout.trained_params(TRAINER_LOOPS[config.trainer], config.steps)


def trainer_arguments(argv: tuple[str, ...] | list[str]) -> list[str]:
    """MaxText's arguments in a train command's argv: what follows the trainer's module, whichever loop it is."""
    start = next(i for i, arg in enumerate(argv) if arg in TRAINER_MODULES.values()) + 1
    return list(argv[start:])


def _dir(path: str) -> str:
    """Directories MaxText joins onto are written with a trailing slash, as in the seed."""
    return os.path.join(path, "")


def _converter(config: PipelineConfig, layout: Layout, python: str, module: str) -> list[str]:
    """A converter reads the model's HF config and id from MaxText's tables: in the tiny profile, the tiny model's."""
    if config.profile == "tiny":
        model_dir = os.path.join(layout.tiny_dir, tiny.MODEL_SUBDIR)
        return [python, "-m", "workload.tiny.launcher", "--model-dir", model_dir, module]
    return [python, "-m", module]


def _env(
    config: PipelineConfig, layout: Layout, host: OnHost, *, tpu: bool, all_workers: bool = False
) -> dict[str, str]:
    """`all_workers`: the step is one JAX job across every worker of a slice (train); any other step runs as one
    process on a host, which on a slice host must not start the TPU runtime: it would wait for the other hosts."""
    env = {**hf_env(layout.hf_home), **storage.client_env(layout.post_train_base)}
    worker = host.worker
    if config.profile == "tiny":
        env.update(cpu_env())
        if all_workers and worker.multi_host:
            env.update(worker.cpu_env())
    elif worker.multi_host and not all_workers:
        env["JAX_PLATFORMS"] = "cpu"
    elif tpu:
        env.update(tpu_env(config.accelerator_type, host.hostname, worker))
    return env


def _single_process(config: PipelineConfig, worker: JaxProcess) -> list[str]:
    """MaxText options of a one-process step on a slice host (the tiny profile already runs every step so)."""
    one_process_on_a_slice = worker.multi_host and config.profile != "tiny"
    return ["hardware=cpu", "skip_jax_distributed_system=true"] if one_process_on_a_slice else []


def to_maxtext(config: PipelineConfig, layout: Layout, host: OnHost = THIS_HOST) -> Command:
    argv = _converter(config, layout, host.python, TO_MAXTEXT) + [
        f"model_name={config.model}",
        f"base_output_directory={_dir(layout.converted_base)}",
        "scan_layers=True",
        "use_multimodal=False",
        "hardware=cpu",
        "skip_jax_distributed_system=true",
        f"checkpoint_storage_use_zarr3={1 - _USE_PATHWAYS}",
        f"checkpoint_storage_use_ocdbt={1 - _USE_PATHWAYS}",
        "--lazy_load_tensors=False",
    ]
    if config.profile == "tiny":
        model_dir = os.path.join(layout.tiny_dir, tiny.MODEL_SUBDIR)
        argv += tiny.maxtext_overrides() + [
            f"--hf_model_path={model_dir}",
            "--eager_load_method=transformers",
            "--simulated_cpu_devices_count=1",  # sharding 16 simulated devices costs ~1.7 min on CPU
        ]
    # Seed step 4 runs before step 5 exports the TPU variables.
    return Command("convert", tuple(argv), _env(config, layout, host, tpu=False))


def _profiles(config: PipelineConfig, layout: Layout) -> bool:
    """The seed's xplane trace (MaxText's default is none), except for the tiny profile writing to a bucket:
    XLA's profiler writes its trace through TSL's C++ file system, whose Cloud Storage client reaches only
    storage.googleapis.com, so on a local Cloud Storage API (the tests) it fails the run. A real VM writes the
    trace to the real bucket."""
    return not (config.profile == "tiny" and storage.is_remote(layout.post_train_base))


def eval_interval(config: PipelineConfig) -> int | None:
    """Steps between held-out passes, at most the run's steps so that a short run is measured after training
    too (both loops evaluate after every multiple of the interval, and before their first update: Tunix itself,
    MaxText's own loop through the trainer's launcher, workload/launch/held_out_first.py); None: no evaluation."""
    return min(config.eval_interval, config.steps) if config.eval_interval else None


@dataclass(frozen=True)
class DataArgs:
    """Where MaxText's HF pipeline reads: `datasets.load_dataset(hf_path, data_files=…, split=…)`. A file dataset's
    files are read by the packaged `json` or `parquet` builder, whose one split is `train`; the held-out files then
    load as that builder's `train` split too (hf_data_processing.py make_hf_eval_iterator)."""

    hf_path: str
    train_split: str
    eval_split: str
    train_files: str | None = None
    eval_files: str | None = None


def data_args(config: PipelineConfig, layout: Layout) -> DataArgs:
    if config.profile == "tiny" and config.dataset == PipelineConfig.dataset:
        # The tiny profile's own dataset, unless the run names files of its own (the local-JSONL rehearsal).
        return DataArgs(os.path.join(layout.tiny_dir, tiny.DATASET_SUBDIR), config.train_split, config.eval_split)
    source = parse_source(config.dataset)
    if source.format is None:
        return DataArgs(config.dataset, config.train_split, config.eval_split)
    return DataArgs(source.format, "train", "train", config.dataset, config.eval_data)


def chat_template_file(layout: Layout) -> str:
    """Where the train step puts `tpu-sft:chatTemplate` on the host: MaxText reads a template from a local file only
    (input_pipeline/instruction_data_processing.py load_chat_template_from_file, by its .jinja extension)."""
    return os.path.join(layout.work_dir, "chat-template.jinja")


def _held_out_loss(config: PipelineConfig, columns: str, data: DataArgs) -> list[str]:
    """MaxText's own evaluation (train_sft hands eval_interval to Tunix with an eval iterator; MaxText's own loop
    reads it itself). It reads the same examples on every pass (either loop re-iterates the unshuffled iterator from
    its start), so the passes compare."""
    interval = eval_interval(config)
    if interval is None:
        return ["eval_interval=-1"]  # base.yml's "never"; 0 would divide by zero in Tunix's loop
    argv = [
        f"eval_interval={interval}",
        f"eval_steps={config.eval_steps}",
        f"hf_eval_split={data.eval_split}",
        f"eval_data_columns={columns}",
    ]
    return argv + ([f"hf_eval_files={data.eval_files}"] if data.eval_files else [])


def train_sft(config: PipelineConfig, layout: Layout, host: OnHost = THIS_HOST) -> Command:
    tiny_profile = config.profile == "tiny"
    columns = "[" + ", ".join(f"'{c}'" for c in config.train_data_columns) + "]"
    data = data_args(config, layout)
    worker = host.worker
    argv = [
        host.python,
        "-m",
        TRAINER_LAUNCHER,
        TRAINER_MODULES[config.trainer],
        f"run_name={layout.run_name}",
        f"base_output_directory={_dir(layout.post_train_base)}",
        f"model_name={config.model}",
        f"load_parameters_path={layout.converted_checkpoint}",
        f"per_device_batch_size={config.per_device_batch_size}",
        f"steps={config.steps}",
        f"hf_path={data.hf_path}",
        f"train_split={data.train_split}",
        f"train_data_columns={columns}",
    ]
    if data.train_files:
        argv.append(f"hf_train_files={data.train_files}")
    if config.chat_template is not None:
        argv.append(f"chat_template_path={chat_template_file(layout)}")
    argv += _held_out_loss(config, columns, data)
    if tiny_profile and worker.multi_host:
        argv.append(_NO_COMPILE_CACHE)
    elif layout.compile_cache_dir is not None:
        argv.append(f"jax_cache_dir={layout.compile_cache_dir}")
    if _profiles(config, layout):
        argv.append("profiler=xplane")
    max_target_length = config.max_target_length or (TINY_MAX_TARGET_LENGTH if tiny_profile else None)
    if config.learning_rate is not None:
        argv.append(f"learning_rate={config.learning_rate}")
    if max_target_length is not None:
        argv.append(f"max_target_length={max_target_length}")
    if config.checkpoint_period is not None:
        argv.append(f"checkpoint_period={config.checkpoint_period}")
    # Before the tiny profile's CPU options, which win where they name the same key (attention: a CPU runs no flash).
    argv += levers.maxtext_options(config)
    if config.adapter is not None:
        argv += config.adapter.maxtext_options() + [f"sharding_tolerance={lora_sharding_tolerance(config)}"]
    if tiny_profile:
        argv += [f"tokenizer_path={os.path.join(layout.tiny_dir, tiny.MODEL_SUBDIR)}"]
        # One CPU process, or one per worker joined by MaxText's own CPU distributed setup (JaxProcess.cpu_env).
        argv += _TINY_TRAIN_CPU_OPTIONS + [f"skip_jax_distributed_system={str(not worker.multi_host).lower()}"]
        if worker.multi_host:
            argv.append(_WAIT_AT_BARRIERS_THROUGH_THE_COORDINATOR)
        argv += tiny.maxtext_overrides()
    env = {**_env(config, layout, host, tpu=True, all_workers=True), **levers.libtpu_env(config)}
    return Command("train", tuple(argv), env)


def lora_sharding_tolerance(config: PipelineConfig) -> float:
    """MaxText's bound on unsharded parameters for a LoRA run: base.yml's, plus the adapter's share of the parameters,
    which MaxText 0.2.3 replicates on every device on purpose (lora_utils.apply_lora_to_model) and then counts as
    unsharded. At base.yml's bound alone the tiny model's adapter (rank 16, every projection) stopped the trainer on
    the CPU slice ("Unsharded parameter percentage (2.96%) exceeds tolerance (2.00%)"); the check runs on any mesh of
    more than one device, a v6e-8's too, and a larger adapter of gemma3-4b's would meet it. The base weights keep
    base.yml's bound; the share is rounded up."""
    assert config.adapter is not None
    shape = tiny.SPEC if config.profile == "tiny" else MODELS[config.model].shape
    adapter = config.adapter.parameters(shape)
    share = adapter / (parameter_count(shape) + adapter)
    return math.ceil((_MAXTEXT_SHARDING_TOLERANCE + share) * 10_000) / 10_000


def to_huggingface(
    config: PipelineConfig, layout: Layout, host: OnHost = THIS_HOST, *, params: str = "", out_dir: str = ""
) -> Command:
    """`params` (default: the final SFT checkpoint) and `out_dir` (default: the export dir) let a test
    export the untrained checkpoint with the very same command."""
    weights = [f"load_parameters_path={params or trained_params(config, layout)}"]
    return _export(config, layout, host, TO_HUGGINGFACE, weights, out_dir or layout.export_dir)


def _export(
    config: PipelineConfig, layout: Layout, host: OnHost, module: str, weights: list[str], out_dir: str
) -> Command:
    """to_huggingface's command line, reading `weights` (its config keys that name them) into `out_dir`."""
    argv = _converter(config, layout, host.python, module) + [
        f"model_name={config.model}",
        *weights,
        f"base_output_directory={_dir(out_dir)}",
        "scan_layers=True",  # must match training, or: "ShapeDtypeStruct is not a valid JAX type"
        "use_multimodal=False",
        "weight_dtype=bfloat16",
    ]
    if config.profile == "tiny":
        # Without a TPU runtime, pyconfig would start jax.distributed: "coordinator_address should be defined".
        argv += ["hardware=cpu", "skip_jax_distributed_system=true"] + tiny.maxtext_overrides()
    argv += _single_process(config, host.worker)
    return Command("export", tuple(argv), _env(config, layout, host, tpu=True))


def export_base(config: PipelineConfig, layout: Layout, host: OnHost = THIS_HOST) -> Command:
    """A LoRA run's base in Hugging Face's layout, exported by the very command a full run's export is: what the
    adapter is merged into and checked on."""
    return to_huggingface(config, layout, host, params=layout.converted_checkpoint, out_dir=layout.base_export_dir)


def _lora_restore(config: PipelineConfig, layout: Layout, *, quantised: bool = False) -> list[str]:
    """The adapter's shape and the trained adapter: the checkpoint records neither rank nor alpha. A QLoRA adapter's
    on the bf16 base, which its export is merged into, unless `quantised`: on the base as it trained."""
    assert config.adapter is not None
    adapter = config.adapter if quantised else config.adapter.on_the_unquantised_base()
    return adapter.maxtext_options() + [f"lora.lora_restore_path={trained_params(config, layout)}"]


def export_adapter(config: PipelineConfig, layout: Layout, host: OnHost = THIS_HOST) -> Command:
    """A LoRA run's adapter as a PEFT repository: to_huggingface's adapter mode (no `load_parameters_path`)."""
    return _export(config, layout, host, LORA_EXPORT, _lora_restore(config, layout), layout.adapter_dir)


def merge_adapter(config: PipelineConfig, layout: Layout, host: OnHost = THIS_HOST) -> Command:
    """peft's merge of the adapter into the base, on the host's CPU (workload/run/peft_merge.py): the export."""
    argv = (host.python, "-m", "workload.run.peft_merge", layout.base_export_dir, layout.adapter_dir, layout.export_dir)
    env = {**hf_env(layout.hf_home), "HF_HUB_OFFLINE": "1", **(cpu_env() if config.profile == "tiny" else {})}
    return Command("export", argv, env)


def verify_hf(config: PipelineConfig, layout: Layout, host: OnHost = THIS_HOST) -> Command:
    """verify's check that the export loads in transformers and generates (workload/measure/verify_hf.py). The
    export is a local directory: nothing to fetch, so nothing may be fetched."""
    argv = (host.python, "-m", "workload.measure.verify_hf", layout.export_dir, layout.result("verify.json"))
    env = {**hf_env(layout.hf_home), "HF_HUB_OFFLINE": "1", **(cpu_env() if config.profile == "tiny" else {})}
    return Command("verify", argv, env)


def logit_parity(
    config: PipelineConfig, layout: Layout, host: OnHost = THIS_HOST, *, export_dir: str = "", result: str = ""
) -> Command:
    """The verify step's logit comparison of the final checkpoint with the export (default: the run's
    own; `export_dir` lets a test check a deliberately broken copy with the very same command). A LoRA run's
    checkpoint is the base's with the trained adapter on it, and its adapter on the exported base is checked too. A
    QLoRA run's is held to the bound on the bf16 base, which its export is merged into: what is bounded is that the
    export is faithful to the adapter MaxText trained (`quantised_logit_distance` measures the rest)."""
    lora = config.adapter is not None
    argv = [host.python, "-m", "workload.measure.logit_parity", "--max-kl", str(KL_BOUND[config.profile])]
    if lora:
        argv += ["--adapter", layout.base_export_dir, layout.adapter_dir]
    argv += [export_dir or layout.export_dir, result or layout.result("logit-parity.json")]
    argv += _logit_maxtext_args(config, layout, host, _lora_restore(config, layout) if lora else [])
    return Command("verify", tuple(argv), _env(config, layout, host, tpu=True))


def quantised_logit_distance(config: PipelineConfig, layout: Layout, host: OnHost = THIS_HOST) -> Command:
    """A QLoRA run's merged model against MaxText with the trained adapter on the base quantised as in training
    (workload/launch/quantised_base.py takes the key out for qwix): a figure, not a check. It measures the base's
    rounding to the quantised type as well as the export, and no bound of an export's faithfulness holds that."""
    assert config.adapter is not None and config.adapter.weight_qtype is not None
    argv = [host.python, "-m", QUANTISED_BASE, "workload.measure.logit_parity", "--unbounded"]
    argv += [layout.export_dir, layout.result(QUANTISED_DISTANCE)]
    argv += _logit_maxtext_args(config, layout, host, _lora_restore(config, layout, quantised=True))
    return Command("verify", tuple(argv), _env(config, layout, host, tpu=True))


def _logit_maxtext_args(config: PipelineConfig, layout: Layout, host: OnHost, lora_restore: list[str]) -> list[str]:
    """MaxText's side of a logit comparison: the final checkpoint, or a LoRA run's base with `lora_restore`."""
    weights = layout.converted_checkpoint if lora_restore else trained_params(config, layout)
    argv = [
        f"model_name={config.model}",
        f"load_parameters_path={weights}",
        *lora_restore,
        "scan_layers=True",
        "use_multimodal=False",
        "attention=dot_product",  # the checker's choice: plain attention on any backend
        "dtype=float32",  # compute in float32 on both sides, so the figure measures the export, not bf16 math
        "per_device_batch_size=1",
    ]
    if config.profile == "tiny":
        argv += [f"max_target_length={TINY_MAX_TARGET_LENGTH}", "hardware=cpu", "skip_jax_distributed_system=true"]
        argv += tiny.maxtext_overrides()
    return argv + _single_process(config, host.worker)


def samples(config: PipelineConfig, layout: Layout, host: OnHost = THIS_HOST) -> Command:
    """verify's before/after answers (workload/measure/samples.py): the base model from the Hugging Face cache bootstrap
    filled (the tiny profile's from its assets), and the held-out questions from the split training evaluates on,
    when it evaluates. Torch on the host's CPU: no accelerator runtime starts."""
    tiny_profile = config.profile == "tiny"
    base = os.path.join(layout.tiny_dir, tiny.MODEL_SUBDIR) if tiny_profile else MODELS[config.model].hub_id
    argv = [host.python, "-m", "workload.measure.samples", base, layout.export_dir, layout.result("samples.md")]
    argv.append(layout.result("samples.json"))
    if config.eval_interval:
        data = data_args(config, layout)
        argv += ["--dataset", data.hf_path, "--split", data.eval_split, "--column", config.train_data_columns[0]]
        argv += ["--data-files", data.eval_files] if data.eval_files else []
    env = {**hf_env(layout.hf_home), **(cpu_env() if tiny_profile else {})}
    return Command("verify", tuple(argv), env)


def pipeline_commands(config: PipelineConfig, layout: Layout, host: OnHost) -> list[Command]:
    """Every worker's convert and train; worker 0's export (a LoRA run's: the base's and the adapter's, which
    peft then merges)."""
    commands = [to_maxtext(config, layout, host), train_sft(config, layout, host)]
    if host.worker.leader and config.adapter is None:
        commands.append(to_huggingface(config, layout, host))
    elif host.worker.leader:
        commands += [export_base(config, layout, host), export_adapter(config, layout, host)]
    return commands


def _quote(arg: str) -> str:
    """shlex.quote, but `"train_data_columns=['messages']"` rather than its '"'"' soup."""
    quoted = shlex.quote(arg)
    if quoted != arg and not any(c in arg for c in '"$`\\!'):
        return f'"{arg}"'
    return quoted


def render(command: Command) -> str:
    """Copy-pasteable shell: the environment as `export` lines, then `python -m module` and one argument
    a line."""
    exports = [f"export {key}={_quote(value)}" for key, value in command.env.items()]
    start = next(i for i, arg in enumerate(command.argv) if arg.startswith("maxtext.") or arg == LORA_EXPORT) + 1
    head = " ".join(_quote(a) for a in command.argv[:start])
    lines = [head] + [f"    {_quote(a)}" for a in command.argv[start:]]
    return "\n".join([f"# {command.step}", *exports, " \\\n".join(lines)])

"""QLoRA on MaxText 0.2.3: the frozen weights that LoRA wraps quantised by qwix, as a later release's
`lora.lora_weight_qtype` asks for.

0.2.3's `lora` block has no quantisation key (configs/types.py `LoRA`, `extra="forbid"`), and its
`lora_utils._build_lora_provider` hands qwix's `LoraProvider` only the module path, rank, alpha and dropout. A
later release hands it `weight_qtype` from that key (and `tile_size` from `lora.lora_tile_size`, unset by
default, as here). This takes the key out of MaxText's argv, where 0.2.3 would refuse it, and builds the provider
as that release does. qwix's `LoraProvider` is a `PtqProvider`: in MaxText's dummy call (`apply_lora_to_model`)
each weight its module path matches is replaced by a quantised `WithAux` (qwix `ptq.create_quantized_param`),
one scale per output channel (no tile: qwix tiles only the first contracting axis, which for the attention's
output projection is its heads, 8 for gemma3-4b); the adapter is made beside it, in the scale's dtype. The guard
(workload/launch/pinned_code.py) holds the patch to the function it was read in.

    python -m workload.launch.quantised_base MODULE ARGS...   (MODULE run as `python -m` would, the key taken
                                                               out of ARGS)

The trainer's launcher applies it to Tunix's loop (workload/launch/trainer_launcher.py), and the verify step's
second logit figure runs through it (workload/run/commands.py `quantised_logit_distance`), and the preflight compiles
QLoRA's step quantised (`quantising`, workload/preflight/aot_step.py).
"""

from __future__ import annotations

import contextlib
import runpy
import sys
from typing import Any, Iterator

from workload.core.tuning import QTYPE_KEY
from workload.launch import pinned_code

PATCH = "workload/launch/quantised_base.py"
# sha256 of maxtext 0.2.3's utils/lora_utils.py _build_lora_provider, and of qwix 0.1.6's flax_util.update_sharding.
BUILD_PROVIDER_SHA256 = "b0a15806306ef87289d6797841cb3c3dae8cc7a0fe68b438721be0101bbd1e1f"
UPDATE_SHARDING_SHA256 = "9c10303b475f4a6937cf6d0001587d6089a3322ed2e78dfdd3c4f4d6060e2776"
# and of qwix 0.1.6's flax_util.find_param and ptq.create_quantized_param.
FIND_PARAM_SHA256 = "68a94260500ae2df45780d16d283ed90c6610b2b6b24f9427337ab06104c79f9"
CREATE_QUANTIZED_SHA256 = "41dca9d887e42b79f4d1ca29075d8d11d6a5e3d8b460742f6e964fe27dd5b580"
# and of qwix 0.1.6's apply_lora_to_model, and of flax 0.12.4's graph._graph_update_dynamic.
APPLY_LORA_SHA256 = "4715e660c55d74f11ec404154c47a8e14e11522259315c7eb318c1bc6623fed7"
GRAPH_UPDATE_SHA256 = "6cdfc4eb9d8db3d2b20e10f07e59acab71e889e81c4b35b6274a9bd538ee41a4"
# Each weight qwix quantised, by (its module's qwix path, its name): its structure (WithAux, QArray: statics
# included) and its leaves' attribute paths.
Quantised = dict[tuple[Any, str], tuple[Any, list[tuple[str, ...]]]]
SCAN_AXIS_NAME = "layers"  # MaxText's logical name of a scanned decoder's layer axis (param_scan_axis)
# Every function the patches replaced, in order: (module, name, the function before), for `quantising` to put back.
_REPLACED: list[tuple[Any, str, Any]] = []


def take(argv: list[str]) -> tuple[list[str], str | None]:
    """`argv` without the key, and the type it asks the frozen weights in (qwix's `weight_qtype`: a dtype's name,
    int8, or one of qwix's own, nf4); None where it asks for none."""
    qtypes = [arg.split("=", 1)[1] for arg in argv if arg.startswith(QTYPE_KEY + "=")]
    return [arg for arg in argv if not arg.startswith(QTYPE_KEY + "=")], qtypes[-1] if qtypes else None


def patch(qtype: str) -> None:
    """MaxText builds its qwix provider with the frozen weights quantised to `qtype`."""
    import qwix
    from maxtext.utils import lora_utils, max_logging

    build = pinned_code.check(lora_utils, "_build_lora_provider", "maxtext", BUILD_PROVIDER_SHA256, PATCH)

    def build_quantising_provider(mt_config: Any) -> Any:
        provider = build(mt_config)  # logs and validates as 0.2.3 does; its one rule is what is rebuilt below
        [rule] = provider._rules
        max_logging.log(f"QLoRA: the frozen weights LoRA wraps quantised to {qtype}, one scale per output channel")
        return _QuantisedLoraProvider(
            module_path=rule.module_path,
            rank=rule.rank,
            alpha=rule.alpha,
            dropout=rule.dropout,
            weight_qtype=qtype,
        )

    class _QuantisedLoraProvider(qwix.LoraProvider):
        """qwix's provider, with MaxText's cast of a kernel to its compute dtype (`linears.DenseGeneral`: `jnp.asarray(
        kernel, self.dtype)`) leaving a quantised kernel as it is: it is a `WithAux`, which `asarray` cannot take
        ("expected number, got WithAux"), and qwix's own ops, which take it, compute in the activations' dtype."""

        def get_intercept_map(self) -> dict:
            import jax.numpy as jnp
            from qwix._src.providers import ptq

            asarray = jnp.asarray

            def asarray_or_quantised(a: Any, *args: Any, **kwargs: Any) -> Any:
                return a if isinstance(a, ptq.WithAux) else asarray(a, *args, **kwargs)

            return super().get_intercept_map() | {"jax.numpy.asarray": asarray_or_quantised}

    _replace(lora_utils, "_build_lora_provider", build_quantising_provider)
    _name_one_layers_axes()
    quantised: Quantised = {}
    _adapt_the_weight_just_quantised(quantised)
    _unnest_what_an_unscanned_layer_nests(quantised)


def _adapt_the_weight_just_quantised(quantised: Quantised) -> None:
    """qwix makes a weight's adapter where it quantises it, inside a scanned layer too.

    qwix's LoRA op first lets its PTQ parent quantise the weight, which replaces the module's Param with the
    quantised `WithAux`, then looks the weight up by the very array it was handed (`find_param(rhs, WithAux)`). In
    a scanned decoder that array is a tracer, whose search stops at the Param that is no longer there: no name, no
    adapter, and MaxText stops ("LoRA module path matched target modules, but nnx.LoRAParam is still missing", on
    the chip and here). The array quantised last is the one the LoRA op asks about next; its name is the Param's.
    Each quantised weight's structure is also kept in `quantised`, by (module's qwix path, name), for
    `_unnest_what_an_unscanned_layer_nests`.
    """
    import jax
    from qwix._src import flax_util
    from qwix._src.providers import ptq

    find_param = pinned_code.check(flax_util, "find_param", "qwix", FIND_PARAM_SHA256, PATCH)
    create_quantized_param = pinned_code.check(ptq, "create_quantized_param", "qwix", CREATE_QUANTIZED_SHA256, PATCH)
    quantised_last: list[tuple[Any, str]] = []  # (the array handed to the op, its Param's name)

    def create_and_remember(name: str, value: Any, *args: Any, **kwargs: Any) -> Any:
        quantised_last[:] = [(value, name)]
        # The weight as stored (float32 by default), not MaxText's cast of it to the compute dtype: the scale, and
        # the adapter qwix makes in the scale's dtype, are then the weight's dtype, as LoRA's adapter is without
        # quantisation (a bf16 adapter beside float32 moments stopped optax: "cond branches must have equal
        # output types").
        module = flax_util.get_current_module()
        stored = flax_util.unbox(getattr(module, name))
        made = create_quantized_param(name, stored if stored.shape == value.shape else value, *args, **kwargs)
        paths, structure = jax.tree_util.tree_flatten_with_path(made)
        quantised[(getattr(module, "qwix_path", None), name)] = (
            structure,
            [tuple(key.name for key in path) for path, _ in paths],  # GetAttrKey's: WithAux, QArray are dataclasses
        )
        return made

    def find_param_or_the_one_just_quantised(x: Any, ptq_array_type: Any = None) -> str | None:
        name = find_param(x, ptq_array_type)
        if name is None and ptq_array_type is not None and quantised_last and quantised_last[0][0] is x:
            return quantised_last[0][1]
        return name

    _replace(ptq, "create_quantized_param", create_and_remember)
    _replace(flax_util, "find_param", find_param_or_the_one_just_quantised)


def _unnest_what_an_unscanned_layer_nests(quantised: Quantised) -> None:
    """An unscanned decoder's quantised weights stay qwix's, each part with its own sharding.

    MaxText's NNX decoder runs an unscanned layer as a copy (`pure_layer_fn`: `nnx.merge` inside `jax.checkpoint`),
    then writes the copy's state back into the layer (`nnx.update(layer, new_state)`). In qwix's dummy call the copy's
    kernel became a `WithAux` of Params (qvalue, scale), whose state flax's update writes as the *value* of the layer's
    old kernel Param (`_graph_update_dynamic`: `set_raw_value` of a State): the WithAux and its static `how` are gone,
    and the old Param's sharding, the whole kernel's, covers the scale too. On more than one chip that stops the
    placement of the model (the scale, one element along `embed`, split over `fsdp`: IndivisibleError on the
    preflight's v6e-8 and on a CPU mesh here); on one, the next call stops (`self.kernel[...]` of a State:
    KeyError: Ellipsis). After qwix's call each such Param is replaced by the WithAux it held, rebuilt from the
    structure kept where it was made, its parts the Params qwix made, with the sharding qwix gave them (the scale's
    size-1 axis unsharded: `update_sharding`). A scanned decoder merges its layers back whole and is left as it is.
    """
    import jax
    import qwix
    from flax import nnx
    from flax.nnx import graph

    apply_lora_to_model = pinned_code.check(qwix, "apply_lora_to_model", "qwix", APPLY_LORA_SHA256, PATCH)
    pinned_code.check(graph, "_graph_update_dynamic", "flax", GRAPH_UPDATE_SHA256, PATCH)

    def apply_and_unnest(*args: Any, **kwargs: Any) -> Any:
        model = apply_lora_to_model(*args, **kwargs)
        for _, module in model.iter_modules():
            for name, nested in list(vars(module).items()):
                kept = quantised.get((getattr(module, "qwix_path", None), name))
                if kept and isinstance(nested, nnx.Variable) and isinstance(nested.get_raw_value(), nnx.State):
                    structure, leaves = kept
                    parts = [_at(nested.get_raw_value(), keys) for keys in leaves]
                    setattr(module, name, jax.tree_util.tree_unflatten(structure, parts))
        return model

    _replace(qwix, "apply_lora_to_model", apply_and_unnest)


def _at(state: Any, keys: tuple[str, ...]) -> Any:
    for key in keys:
        state = state[key]
    return state


def _name_one_layers_axes() -> None:
    """A scanned decoder's weights quantised one layer at a time keep the layer axis's name.

    MaxText's NNX decoder runs a scanned block's layers one slice at a time (`_apply_layers_sequentially`), each
    slice a Param whose logical axes are still the whole stack's, `layers` among them. qwix names the quantised
    slice's axes from those (`update_boxed` → `update_sharding`, which asserts one name per axis: "shape=(64, 4, 16)
    spec=('embed', 'layers', 'q_heads', 'kv')", on the chip as here). The slice's names are the stack's without
    `layers`; the slices are stacked back along that same axis, so it is named again where it was.
    """
    from qwix._src import flax_util

    update_sharding = pinned_code.check(flax_util, "update_sharding", "qwix", UPDATE_SHARDING_SHA256, PATCH)

    def update_sharding_of_a_layers_slice(spec: Any, *, shape: Any = None, **kwargs: Any) -> Any:
        names = tuple(spec)
        if (
            shape is None
            or any(v is not None for v in kwargs.values())
            or len(names) != len(shape) + 1
            or SCAN_AXIS_NAME not in names
        ):
            return update_sharding(spec, shape=shape, **kwargs)
        axis = names.index(SCAN_AXIS_NAME)
        sliced = update_sharding(names[:axis] + names[axis + 1 :], shape=shape)
        stacked = (*sliced[:axis], SCAN_AXIS_NAME, *sliced[axis:])
        return type(spec)(*stacked) if isinstance(spec, jax_partition_spec()) else stacked

    _replace(flax_util, "update_sharding", update_sharding_of_a_layers_slice)


def jax_partition_spec() -> type:
    import jax

    return jax.sharding.PartitionSpec


@contextlib.contextmanager
def quantising(qtype: str | None) -> Iterator[None]:
    """The patches for the length of a block, the code as it was after it; none where `qtype` is None. One process
    of the preflight's may compile LoRA's step and QLoRA's of either type one after another (bench/tpu/predict.py)."""
    if qtype is None:
        yield
        return
    before = len(_REPLACED)
    try:
        patch(qtype)
        yield
    finally:
        while len(_REPLACED) > before:
            module, name, original = _REPLACED.pop()
            setattr(module, name, original)


def _replace(module: Any, name: str, new: Any) -> None:
    _REPLACED.append((module, name, getattr(module, name)))
    setattr(module, name, new)


def apply_from_argv() -> None:
    """Take the key out of `sys.argv` and, where it asks for it, patch."""
    sys.argv, qtype = take(sys.argv)
    if qtype is not None:
        patch(qtype)


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit("usage: python -m workload.launch.quantised_base MODULE [ARGS...]")
    module = sys.argv[1]
    sys.argv = sys.argv[1:]
    apply_from_argv()
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()

"""What a TPU program compiled by XLA does, read from its optimised HLO text (`compiled.as_text()`): the top-level
instructions of its entry computation, each with the bytes it writes and reads, the cycles the TPU compiler's own
cost model gives it (`estimated_cycles` in its backend_config) and the part of the step it comes from (its
`op_name`), so that two compiled steps can be set side by side part by part.

Pure text: no JAX needed. Only the entry computation is walked: the bench's steps have no loops left after
compilation (gemma3's 4 kept layers are its "remainder" block, unscanned), so every instruction there runs once a step.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

_BYTES = {"pred": 1, "s8": 1, "u8": 1, "bf16": 2, "f16": 2, "s16": 2, "u16": 2, "f32": 4, "s32": 4, "u32": 4}
_ARRAY = re.compile(r"\b(pred|[suf]\d+|bf16)\[([\d,]*)\]")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%(\S+) = ")
_CYCLES = re.compile(r'"estimated_cycles":"(\d+)"')
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_FUSION_KIND = re.compile(r"kind=(k\w+)")
_CUSTOM_TARGET = re.compile(r'custom_call_target="([^"]*)"')


def array_bytes(shape_text: str) -> int:
    """Bytes of every array a type names (a tuple's elements summed); tokens and opaque types count nothing."""
    return sum(
        _BYTES.get(dtype, 4) * math.prod(int(d) for d in dims.split(",") if d)
        for dtype, dims in _ARRAY.findall(shape_text)
    )


def largest_array(shape_text: str) -> str:
    arrays = [f"{dtype}[{dims}]" for dtype, dims in _ARRAY.findall(shape_text)]
    return max(arrays, key=array_bytes, default="")


@dataclass(frozen=True)
class Instruction:
    name: str
    opcode: str  # `fusion` is told apart by its kind: fusion:kLoop, fusion:kOutput …; custom-call by its target
    result_bytes: int
    operand_bytes: int
    cycles: int  # the TPU compiler's estimate; 0 where it gives none (parameters, async pairs, custom calls)
    part: str  # the part of the step it comes from (`part_of`)
    op_name: str
    largest: str  # the largest array it writes, `bf16[2560,10240]`: what a group of instructions is about


@dataclass
class Profile:
    instructions: list[Instruction] = field(default_factory=list)

    def total(self, attribute: str, where: str | None = None) -> int:
        return sum(getattr(i, attribute) for i in self.instructions if where is None or i.part == where)

    def by(self, key: str, attribute: str) -> Counter[str]:
        counter: Counter[str] = Counter()
        for instruction in self.instructions:
            counter[getattr(instruction, key)] += getattr(instruction, attribute)
        return counter

    def count(self, key: str) -> Counter[str]:
        return Counter(getattr(i, key) for i in self.instructions)


def part_of(op_name: str) -> str:
    """A coarse name for where an instruction comes from, read from the JAX name stack in its metadata: the forward
    pass (`jvp(…)`), the backward pass (`transpose(jvp(…))`), each with the output head and loss apart from the
    decoder layers, and everything after the gradients (the optimizer, clipping, the gradient norm)."""
    backward = "transpose(" in op_name
    if "jvp(" not in op_name:
        return "update and norms" if op_name else "unnamed: copies"
    direction = "backward" if backward else "forward"
    if "apply_output_head" in op_name or "jvp()/" in op_name or "transpose(jvp())/" in op_name:
        return f"{direction}: output head and loss"
    if "_apply_embedding" in op_name:
        return f"{direction}: embedding"
    return f"{direction}: decoder layers"


def _split_type(rest: str) -> tuple[str, str]:
    """(the result type, what follows it) for the text after `%name = `; a tuple type nests parentheses."""
    if not rest.startswith("("):
        type_text, _, after = rest.partition(" ")
        return type_text, after
    depth = 0
    for index, char in enumerate(rest):
        depth += char == "("
        depth -= char == ")"
        if depth == 0:
            return rest[: index + 1], rest[index + 2 :]
    return rest, ""


def _operands(after_opcode: str) -> list[str]:
    """The `%names` between the opcode's parentheses."""
    depth, end = 0, len(after_opcode)
    for index, char in enumerate(after_opcode):
        depth += char == "("
        depth -= char == ")"
        if depth == 0:
            end = index
            break
    return re.findall(r"%([\w.\-]+)", after_opcode[:end])


def entry_lines(hlo_text: str) -> list[str]:
    """The entry computation's instructions, one a line: a custom call's backend config can span several."""
    start = hlo_text.index("\nENTRY ")
    instructions: list[str] = []
    for line in hlo_text[start + 1 :].splitlines()[1:]:
        if line == "}":
            break
        if line.startswith(("  %", "  ROOT ")) or not instructions:
            instructions.append(line)
        else:
            instructions[-1] += line
    return instructions


def profile(hlo_text: str) -> Profile:
    sizes: dict[str, int] = {}
    result = Profile()
    for line in entry_lines(hlo_text):
        match = _INSTRUCTION.match(line)
        if match is None:
            continue
        name = match.group(1)
        type_text, after = _split_type(line[match.end() :])
        opcode, _, arguments = after.partition("(")
        sizes[name] = array_bytes(type_text)
        if opcode == "fusion":
            kind = _FUSION_KIND.search(line)
            opcode = f"fusion:{kind.group(1) if kind else '?'}"
        elif opcode == "custom-call":
            target = _CUSTOM_TARGET.search(line)
            opcode = f"custom-call:{target.group(1) if target else '?'}"
        cycles = _CYCLES.search(line)
        op_name = _OP_NAME.search(line)
        result.instructions.append(
            Instruction(
                name=name,
                opcode=opcode,
                result_bytes=sizes[name],
                operand_bytes=sum(sizes.get(o, 0) for o in _operands("(" + arguments)),
                cycles=int(cycles.group(1)) if cycles else 0,
                part=part_of(op_name.group(1) if op_name else ""),
                op_name=op_name.group(1) if op_name else "",
                largest=largest_array(type_text),
            )
        )
    return result

"""MLIR from a mapping: a payload (`linalg.matmul`, or the einsum as a `linalg.generic`, with
the epilogue as an elementwise `linalg.generic`) and a transform-dialect script that tiles it
level by level and fuses the epilogue into the tile loops (`fuse_into_containing_op`).

The tile plan (`tile_plan`), outermost first:
1. per level, from the outermost down to the one above the innermost, the loops over the
   output's (parallel) dims: the level's temporal loops as `tile_using_for` (their order as
   `interchange`), then its spatial loops as `tile_using_forall`; each tiles the epilogue
   (the consumer) and fuses the producer (the contraction, from a zero splat) into the loop,
   so the epilogue runs per tile on the innermost one;
2. the reduction dims' loops of those levels, on the fused contraction (`tile_using_for`);
3. the innermost level's loops down to the compute unit's native shape (tensor cores'
   fragments), in that level's order.
Steps are tile sizes in elements of the mapping (`mapping.level_tiles`): a level's temporal
loops step over its child's tile times its spatial split, its spatial loops over the child's
tile. Ragged extents are the real sizes in the payload: the tiles clamp (`affine.min`).
A reduction loop above a temporal loop over a parallel dim runs below it here (the epilogue
needs a tile's whole reduction): one line in `changes`. One above only spatial loops is the
same computation (each instance runs its own loop) and needs none.
"""
from __future__ import annotations

from types import MappingProxyType

from dataclasses import dataclass

from .. import mma
from ..mapping import Mapping, level_tiles
from ..roles import RolesError, arch_roles
from ..spec import Arch, Workload
from .common import GELU_CUBIC, GELU_SCALE, EmitError, epilogue_names, source

FLOAT_OF_BITS = MappingProxyType({16: "bf16", 32: "f32", 64: "f64"})
INT_OF_BITS = MappingProxyType({8: "i8", 16: "i16", 32: "i32", 64: "i64"})
EPILOGUE_ATTR = "mapper.epilogue"
CONTRACTION_ATTR = "mapper.contraction"


@dataclass(frozen=True)
class TileStep:
    level: str
    kind: str                       # "for" or "forall"
    sizes: tuple[int, ...]          # per workload dim, 0: not tiled here
    interchange: tuple[int, ...] = ()   # the order of the tiled dims' loops (for `for` steps)
    parallel: bool = True           # over the output's dims (the epilogue fuses into it)


@dataclass(frozen=True)
class TilePlan:
    steps: tuple[TileStep, ...]
    changes: tuple[str, ...]


def tile_plan(arch: Arch, workload: Workload, mapping: Mapping) -> TilePlan:
    """The level-by-level tiling of `mapping` (module docstring)."""
    n = len(workload.dims)
    tiles = level_tiles(mapping, n)
    out_dims = workload.tensors[workload.output].dims
    parallel, reduction, changes = [], [], []
    last = len(mapping.levels) - 1
    for p, level in enumerate(mapping.levels[:last]):
        child, name = tiles[p + 1], arch.levels[p].name
        spatial = [1] * n
        for d, b, _ in level.spatial:
            spatial[d] *= b
        for dims, target, steps in ((out_dims, parallel, True), (set(range(n)) - out_dims, reduction, False)):
            temporal = [d for d, b in level.temporal if b > 1 and d in dims]
            if temporal:
                sizes = tuple(child[d] * spatial[d] if d in temporal else 0 for d in range(n))
                target.append(TileStep(name, "for", sizes, tuple(temporal), steps))
            split = [d for d in range(n) if spatial[d] > 1 and d in dims]
            if split:
                sizes = tuple(child[d] if d in split else 0 for d in range(n))
                # a reduction split over instances (split-K) is a loop here: a forall would race on the sums
                target.append(TileStep(name, "forall" if steps else "for", sizes, tuple(split), steps))
                if not steps:
                    changes.append(f"{name}: the split of {'/'.join(workload.dims[d] for d in split)} over instances "
                                   "(split-K) is emitted as a loop: a forall cannot reduce into one tile")
    changes += _hoisting_changes(arch, workload, mapping, out_dims)
    return TilePlan(tuple(parallel + reduction + _native_steps(arch, workload, mapping, tiles)), tuple(changes))


def _hoisting_changes(arch: Arch, workload: Workload, mapping: Mapping, out_dims) -> list[str]:
    """A line for each reduction loop that sits above a temporal loop over an output dim (at
    its level or below, above the innermost level): the plan runs it below them."""
    flat = [(lv, d, b) for lv, level in enumerate(mapping.levels[:-1]) for d, b in level.temporal if b > 1]
    out = []
    for i, (lv, d, b) in enumerate(flat):
        below = [f"{workload.dims[e]} ({arch.levels[l2].name})" for l2, e, _ in flat[i + 1:] if e in out_dims]
        if d not in out_dims and below:
            out.append(f"{arch.levels[lv].name}: the {workload.dims[d]} loop (bound {b}) runs inside the loops over "
                       f"{', '.join(below)}: the fused epilogue needs each tile's whole reduction")
    return out


def _native_steps(arch: Arch, workload: Workload, mapping: Mapping, tiles) -> list[TileStep]:
    """The innermost level's loops down to the MMA (the instruction the mapping runs where the
    arch models it, else the native op shape), in that level's loop order."""
    try:
        roles = arch_roles(arch, workload)
    except RolesError:
        roles = None
    if roles is None:
        return []
    innermost = tiles[-1]
    sizes = [0] * len(workload.dims)
    runs = mma.mapping_instruction(arch, workload, mapping)     # the instruction, where the arch models it
    for name, size, dims in zip(roles.names, roles.sizes, roles.dims):
        size = runs.get(name, size)
        if len(dims) == 1 and innermost[dims[0]] > size and innermost[dims[0]] % size == 0:
            sizes[dims[0]] = size
    order = [d for d, _ in mapping.levels[-1].temporal if sizes[d]]
    order += [d for d in range(len(sizes)) if sizes[d] and d not in order]
    if not order:
        return []
    return [TileStep(arch.levels[-1].name + " fragments", "for", tuple(sizes), tuple(order), False)]


# ----------------------------------------------------------------------------- payload

def _types(workload: Workload, as_f32: bool) -> tuple[list[str], str, bool]:
    """(element type per tensor, accumulator type, float?)"""
    if as_f32:
        return ["f32"] * len(workload.tensors), "f32", True
    inputs = [t for t in workload.tensors if not t.is_output]
    is_float = all(t.bits >= 16 for t in inputs)
    table = FLOAT_OF_BITS if is_float else INT_OF_BITS
    types = [table.get(t.bits, "f32" if is_float else "i32") for t in workload.tensors]
    acc = "f32" if is_float else "i32"
    types[workload.output] = acc
    return types, acc, is_float


def _shape(workload: Workload, t: int) -> list[int]:
    return [sum(c * (workload.sizes[d] - 1) for d, c in axis) + 1 for axis in workload.tensors[t].axes]


def _tensor_type(shape, elem) -> str:
    return f"tensor<{'x'.join(str(s) for s in shape)}x{elem}>"


def _affine(workload: Workload, t: int, n: int) -> str:
    def term(d, c):
        return f"d{d}" if c == 1 else f"d{d} * {c}"
    exprs = [" + ".join(term(d, c) for d, c in axis) for axis in workload.tensors[t].axes]
    return f"affine_map<({', '.join(f'd{i}' for i in range(n))}) -> ({', '.join(exprs)})>"


def is_plain_matmul(workload: Workload) -> bool:
    """Z[m,n] += A[m,k] * B[k,n] with the dims in that order (linalg.matmul's d0, d1, d2)."""
    axes = [tuple(tuple(axis) for axis in t.axes) for t in workload.tensors]
    return len(workload.dims) == 3 and axes == [(((0, 1),), ((1, 1),)), (((0, 1),), ((2, 1),)), (((2, 1),), ((1, 1),))]


def payload_text(workload: Workload, epilogue=(), as_f32: bool = False) -> str:
    steps = epilogue_names(epilogue)
    types, acc, is_float = _types(workload, as_f32)
    if steps and not is_float:
        raise EmitError(f"{source(workload)}: an integer contraction; the epilogue ({', '.join(steps)}) needs floats")
    out_t = workload.output
    inputs = [t for t in range(len(workload.tensors)) if t != out_t]
    out_type = _tensor_type(_shape(workload, out_t), acc)
    args = [f"%{workload.tensors[t].name.lower()}_in: {_tensor_type(_shape(workload, t), types[t])}" for t in inputs]
    out_dims = [d for axis in workload.tensors[out_t].axes for d, _ in axis]
    bias_type = _tensor_type([workload.sizes[out_dims[-1]]], acc)
    if "bias" in steps:
        args.append(f"%bias: {bias_type}")
    zero = "0.0" if is_float else "0"
    # the sums start from a zero splat, not a linalg.fill: a fill fused level after level is
    # cloned where tile sizes read its shape, and the clone hides the one the next level needs
    lines = [f"func.func @kernel({', '.join(args)}) -> {out_type} {{",
             f"  %fill = arith.constant dense<{zero}> : {out_type}"]
    operands = ", ".join(f"%{workload.tensors[t].name.lower()}_in" for t in inputs)
    operand_types = ", ".join(_tensor_type(_shape(workload, t), types[t]) for t in inputs)
    if is_plain_matmul(workload):
        lines.append(f"  %acc = linalg.matmul {{{CONTRACTION_ATTR}}} ins({operands} : {operand_types}) "
                     f"outs(%fill : {out_type}) -> {out_type}")
    else:
        lines += _contraction_generic(workload, inputs, types, acc, is_float, operands, operand_types, out_type)
    if steps:
        lines += _epilogue_generic(steps, len(out_dims), out_type, bias_type, acc)
        lines.append(f"  return %result : {out_type}")
    else:
        lines.append(f"  return %acc : {out_type}")
    return "\n".join(lines + ["}"]) + "\n"


def _contraction_generic(workload, inputs, types, acc, is_float, operands, operand_types, out_type) -> list[str]:
    n = len(workload.dims)
    out_dims = workload.tensors[workload.output].dims
    maps = ", ".join(_affine(workload, t, n) for t in inputs + [workload.output])
    iterators = ", ".join('"parallel"' if d in out_dims else '"reduction"' for d in range(n))
    names = [f"%x{i}" for i in range(len(inputs))]
    block = ", ".join(f"{name}: {types[t]}" for name, t in zip(names, inputs))
    body = []
    widened = []
    for name, t in zip(names, inputs):
        if types[t] == acc:
            widened.append(name)
            continue
        op = "arith.extf" if is_float else "arith.extsi"
        body.append(f"    {name}w = {op} {name} : {types[t]} to {acc}")
        widened.append(f"{name}w")
    mul, add = ("arith.mulf", "arith.addf") if is_float else ("arith.muli", "arith.addi")
    product = widened[0]
    for i, other in enumerate(widened[1:]):
        body.append(f"    %p{i} = {mul} {product}, {other} : {acc}")
        product = f"%p{i}"
    body += [f"    %s = {add} %o, {product} : {acc}", f"    linalg.yield %s : {acc}"]
    return ([f"  %acc = linalg.generic {{indexing_maps = [{maps}], iterator_types = [{iterators}]}}",
             f"      ins({operands} : {operand_types}) outs(%fill : {out_type}) attrs = {{{CONTRACTION_ATTR}}} {{",
             f"  ^bb0({block}, %o: {acc}):"] + body + [f"  }} -> {out_type}"])


def _epilogue_generic(steps, rank: int, out_type: str, bias_type: str, acc: str) -> list[str]:
    dims = ", ".join(f"d{i}" for i in range(rank))
    identity = f"affine_map<({dims}) -> ({dims})>"
    maps = [identity] + ([f"affine_map<({dims}) -> (d{rank - 1})>"] if "bias" in steps else []) + [identity]
    ins = "%acc, %bias" if "bias" in steps else "%acc"
    in_types = f"{out_type}, {bias_type}" if "bias" in steps else out_type
    args = f"%x: {acc}" + (f", %b: {acc}" if "bias" in steps else "") + f", %o: {acc}"
    body, value = [], "%x"
    for i, step in enumerate(steps):
        new = f"%e{i}"
        if step == "bias":
            body.append(f"    {new} = arith.addf {value}, %b : {acc}")
        elif step == "relu":
            body += [f"    %z{i} = arith.constant 0.0 : {acc}", f"    {new} = arith.maximumf {value}, %z{i} : {acc}"]
        else:
            arg = value
            if step == "gelu":
                body += [f"    %c{i} = arith.constant {GELU_CUBIC!r} : {acc}", f"    %s{i} = arith.constant {GELU_SCALE!r} : {acc}",
                         f"    %q{i} = arith.mulf {value}, {value} : {acc}", f"    %r{i} = arith.mulf %q{i}, {value} : {acc}",
                         f"    %t{i} = arith.mulf %c{i}, %r{i} : {acc}", f"    %u{i} = arith.addf {value}, %t{i} : {acc}",
                         f"    %a{i} = arith.mulf %s{i}, %u{i} : {acc}"]
                arg = f"%a{i}"
            body += [f"    %one{i} = arith.constant 1.0 : {acc}", f"    %n{i} = arith.negf {arg} : {acc}",
                     f"    %x{i} = math.exp %n{i} : {acc}", f"    %d{i} = arith.addf %one{i}, %x{i} : {acc}",
                     f"    {new} = arith.divf {value}, %d{i} : {acc}"]
        value = new
    iterators = ", ".join(['"parallel"'] * rank)
    return ([f"  %out = tensor.empty() : {out_type}",
             f"  %result = linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = [{iterators}]}}",
             f"      ins({ins} : {in_types}) outs(%out : {out_type}) attrs = {{{EPILOGUE_ATTR}}} {{",
             f"  ^bb0({args}):"] + body + [f"    linalg.yield {value} : {acc}", f"  }} -> {out_type}"])


# ----------------------------------------------------------------------------- transform script

def _sizes_text(sizes) -> str:
    return "[" + ", ".join(str(s) for s in sizes) + "]"


def transform_text(workload: Workload, plan: TilePlan, epilogue=()) -> str:
    """The transform-dialect script applying `plan` to `payload_text`'s ops."""
    out_axes = [d for axis in workload.tensors[workload.output].axes for d, _ in axis]
    op_kind = "linalg.matmul" if is_plain_matmul(workload) else "linalg.generic"
    lines = ["module attributes {transform.with_named_sequence} {",
             "  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {",
             f'    %c0 = transform.structured.match ops{{["{op_kind}"]}} attributes {{{CONTRACTION_ATTR}}} in %root '
             ": (!transform.any_op) -> !transform.any_op",
             ]
    fused = bool(epilogue_names(epilogue))
    if fused:
        lines.append(f'    %e0 = transform.structured.match ops{{["linalg.generic"]}} attributes {{{EPILOGUE_ATTR}}} in %root '
                     ": (!transform.any_op) -> !transform.any_op")
    two = "(!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)"
    lead, c = ("%e0" if fused else "%c0"), "%c0"
    for i, step in enumerate(plan.steps):
        on_epilogue = fused and step.parallel
        target = lead if (step.parallel and fused) else c
        # the epilogue's dims are the output's, in its axis order; the contraction's all dims
        dims = out_axes if on_epilogue else list(range(len(workload.dims)))
        sizes = [step.sizes[d] for d in dims]
        loops = sum(1 for s in sizes if s)
        result = f"%t{i}"
        if step.kind == "forall":
            lines.append(f"    {result}, %l{i} = transform.structured.tile_using_forall {target} tile_sizes "
                         f"{_sizes_text(sizes)} : (!transform.any_op) -> (!transform.any_op, !transform.any_op)")
            loop = f"%l{i}"
        else:
            full = _interchange(dims, step)
            inter = f" interchange = {_sizes_text(full)}" if full != sorted(full) else ""
            lines.append(f"    {result}, %l{i}:{loops} = transform.structured.tile_using_for {target} tile_sizes "
                         f"{_sizes_text(sizes)}{inter} : (!transform.any_op) -> (!transform.any_op"
                         + ", !transform.any_op" * loops + ")")
            loop = f"%l{i}#{loops - 1}" if loops > 1 else f"%l{i}"
        if step.parallel and fused:
            lead = result
            lines.append(f"    %c{i + 1}, %cl{i} = transform.structured.fuse_into_containing_op {c} into {loop} : {two}")
            c = f"%c{i + 1}"
        else:
            c = result
    lines += ['    %func = transform.structured.match ops{["func.func"]} in %root : (!transform.any_op) -> !transform.any_op',
              "    transform.apply_patterns to %func {", "      transform.apply_patterns.canonicalization",
              "    } : !transform.any_op", "    transform.apply_cse to %func : !transform.any_op",
              "    transform.yield", "  }", "}"]
    return "\n".join(lines) + "\n"


def _interchange(dims, step: TileStep) -> list[int]:
    """tile_using_for's interchange: a permutation of the op's dims putting the tiled ones in
    the step's loop order (untiled dims keep their places)."""
    tiled_positions = [i for i, d in enumerate(dims) if step.sizes[d]]
    ordered = [dims.index(d) for d in step.interchange if d in dims and step.sizes[d]]
    out = list(range(len(dims)))
    for pos, src in zip(tiled_positions, ordered):
        out[pos] = src
    return out


def executable_plan(plan: TilePlan, sizes) -> TilePlan:
    """`plan` as IREE 3.13's CPU pipeline compiles it, for numerical checks: every forall a for
    loop (iree-compile crashes on a payload already distributed with scf.forall, its own
    dispatch form), and a dim tiled no further once its tiles clamp (a clamped tile tiled again,
    as by the warp or fragment levels, leaves `tensor.dim` ops its flow dialect rejects). The
    same fusion, run sequentially; `sizes`: the workload's dim sizes."""
    ragged, steps = set(), []
    for step in plan.steps:
        kept = tuple(0 if d in ragged else size for d, size in enumerate(step.sizes))
        if any(kept):
            steps.append(TileStep(step.level, "for", kept, tuple(d for d in step.interchange if kept[d]) or
                                  tuple(d for d, v in enumerate(kept) if v), step.parallel))
        ragged |= {d for d, size in enumerate(kept) if size and sizes[d] % size}
    return TilePlan(tuple(steps), plan.changes)


def mlir_text(arch: Arch, workload: Workload, mapping: Mapping, epilogue=(), as_f32: bool = False) -> tuple[str, TilePlan]:
    """(the payload and the transform script in one module file, the plan)."""
    plan = tile_plan(arch, workload, mapping)
    head = [f"// {workload.name} on {arch.name}: payload and transform script emitted by mapper",
            "// apply: iree-opt --transform-interpreter FILE   (or mlir-opt --transform-interpreter)"]
    head += [f"// tile {s.level} {s.kind} {_sizes_text(s.sizes)}" for s in plan.steps]
    head += [f"// mapper: changed: {line}" for line in plan.changes]
    return ("\n".join(head) + "\n" + payload_text(workload, epilogue, as_f32) + "\n"
            + transform_text(workload, plan, epilogue)), plan

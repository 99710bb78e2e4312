"""`mapper emit ARCH CHAIN --to ...` for an op graph: the fused groups of `mapper fuse` (run
here, or read from its `--json` output with `--fused FILE`), each group whose kernel is one
GEMM with an elementwise epilogue emitted with that epilogue, in graph order.

A group is emitted when it holds exactly one einsum (its anchor) and no op before it (no
prologue: a norm applied to an input) and no reduction. Its epilogue ops map onto the
emitters' epilogue kinds (bias, gelu, silu, relu) in order; at the first op that is none of
them (a residual add or SwiGLU's product, which need a second full operand; a scale; a mask),
or a bias not along the output's last dim, the epilogue stops, and that op and every op after
it are dropped with one line saying so (applying later ops without it would compute something
else). A group with two einsums (attention, a fused MLP), a prologue or no einsum at all is
skipped with one line. Every line goes to stderr as `mapper: note:` and into the output as a
comment.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..mapping import Mapping
from ..opgraph import OpGraph
from ..units import Where
from .common import EPILOGUES


@dataclass(frozen=True)
class GroupPlan:
    """One fused group: what is emitted (the anchor op's index and mapping, the epilogue) or why not."""
    ops: tuple[int, ...]
    anchor: int | None = None
    mapping: Mapping | None = None
    epilogue: tuple[str, ...] = ()
    lines: tuple[str, ...] = ()          # what is dropped or why the group is skipped
    skipped: bool = False


def group_names(graph: OpGraph, ops) -> str:
    return "+".join(graph.ops[i].name for i in ops)


def plan_group(graph: OpGraph, ops: tuple[int, ...], gemm_n: str | None = None) -> GroupPlan:
    """Classify one group (its op indices); `gemm_n`: the dim a GEMM template's bias runs along
    (None: the anchor output's last dim, as the MLIR payload takes it)."""
    ops = tuple(sorted(ops))
    names = group_names(graph, ops)
    einsums = [i for i in ops if graph.ops[i].family == "einsum"]
    if not einsums:
        kinds = ", ".join(graph.ops[i].kind for i in ops)
        return GroupPlan(ops, lines=(f"group {names} skipped: no einsum ({kinds}), a streaming kernel "
                                     "the GEMM emitters do not write",), skipped=True)
    if len(einsums) > 1:
        return GroupPlan(ops, lines=(f"group {names} skipped: {len(einsums)} einsums in one kernel "
                                     "(attention or two fused GEMMs); no single-GEMM template expresses it",),
                         skipped=True)
    anchor = einsums[0]
    before = [i for i in ops if i < anchor]
    reductions = [i for i in ops if graph.ops[i].family == "reduction"]
    if before or reductions:
        which = graph.ops[(before or reductions)[0]]
        return GroupPlan(ops, anchor, lines=(f"group {names} skipped: its {which.kind} {which.name} is a "
                                             "prologue or row reduction the GEMM emitters have no place for",),
                         skipped=True)
    out_dims = graph.ops[anchor].output_dims
    along = gemm_n or out_dims[-1]
    epilogue, current = [], graph.ops[anchor].output
    for position, i in enumerate(ops[1:]):
        op = graph.ops[i]
        why = _not_expressible(op, current, along)
        if why:
            rest = ", ".join(graph.ops[j].name for j in ops[1 + position:])
            return GroupPlan(ops, anchor, epilogue=tuple(epilogue), lines=(
                f"group {names}: epilogue dropped from {op.name} on ({rest}): {why}; "
                f"emitted with {', '.join(epilogue) or 'no epilogue'}, apply the rest after the kernel",))
        epilogue.append(op.kind)
        current = op.output
    return GroupPlan(ops, anchor, epilogue=tuple(epilogue))


def _not_expressible(op, current: str, along: str) -> str | None:
    if op.kind not in EPILOGUES:
        if op.kind in ("add", "mul"):
            return (f"a {'residual add' if op.kind == 'add' else 'product'} reads a second full operand, "
                    f"which the emitters' epilogues ({', '.join(EPILOGUES)}) do not take")
        return f"{op.kind} is not one of the emitters' epilogues ({', '.join(EPILOGUES)})"
    if op.inputs[0] != current:
        return f"it reads {op.inputs[0]}, not the running result {current}"
    if op.kind == "bias" and tuple(op.input_dims[1]) != (along,):
        return f"its bias runs along {','.join(op.input_dims[1])}, the emitters' along {along}"
    return None


def fused_groups_from_json(path: str, graph: OpGraph, arch) -> list[tuple[tuple[int, ...], Mapping | None]]:
    """The fused groups of a `mapper fuse --json` file for this graph: op indices and the
    group's mapping where the file has one (a fused group's anchor; None for an op on its own)."""
    from ..load import mapping_from_dict
    where = Where(str(path))
    try:
        data = json.loads(Path(path).read_text())
        groups = data["fused"]["groups"]
        names = [op.name for op in graph.ops]
        out = []
        for k, g in enumerate(groups):
            ops = tuple(names.index(n) for n in g["ops"])
            mapping = None
            if g.get("mapping"):
                anchor = next(i for i in ops if graph.ops[i].family == "einsum")
                mapping = mapping_from_dict({"mapping": g["mapping"]}, arch, graph.ops[anchor].workload,
                                            where / "fused" / "groups" / k / "mapping")
            out.append((ops, mapping))
    except (OSError, ValueError, KeyError, TypeError, StopIteration) as exc:
        raise where.error(f"expected the JSON of `mapper fuse --json` for {graph.name} ({type(exc).__name__}: {exc})") from None
    covered = sorted(i for ops, _ in out for i in ops)
    if covered != list(range(len(graph.ops))):
        raise (where / "fused" / "groups").error(f"the groups do not cover the ops of {graph.name} once each")
    return out

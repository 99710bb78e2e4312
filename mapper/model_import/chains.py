"""The imported ops cut into chains: op graphs (`opgraph.py`) that `mapper sweep --fuse` studies.

Two ops are in one chain when one reads the other's result as it was written (the same
elements in the same order: no transpose, slice or window between them), both can be written
in an op graph (an einsum over plain dims, an elementwise map, a row reduction: a streaming op
or a convolution's window cannot), and both belong to one block of the network (the repeated
module a residual add lives in: a transformer layer, a ResNet bottleneck): a chain is a block's
work between its layout changes, as the presets cut theirs. A chain holding one einsum and
nothing else is that layer alone (no chain).

Within a chain each tensor has one shape: dims are joined through the tensors ops share and
folded where every op of the chain indexes them together, adjacent and in one order.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .einsums import CONTRACTION_NAMES, Einsum, fold, op_einsum, roles
from .lower import Lowered
from .ops import Affine, Op

MAX_CHAIN = 32                       # ops in one chain at most (a longer run is cut in order)
CHAIN_KINDS = frozenset({"einsum", "map", "scale", "mask", "add", "mul", "bias", "relu", "gelu", "silu",
                         "softmax", "layernorm", "rmsnorm", "gather"})


def block_of(op: Op, residual_scopes: set[tuple[str, ...]]) -> tuple[str, ...]:
    """The op's block: the longest prefix of its scope that ends in an index and holds a
    residual add; else its first indexed prefix; else the whole network."""
    prefixes = [op.scope[:i + 1] for i, part in enumerate(op.scope) if part.isdigit()]
    inside = [p for p in prefixes if p in residual_scopes]
    if inside:
        return inside[-1]
    return prefixes[0] if prefixes else ()


def residual_scopes(low: Lowered) -> set[tuple[str, ...]]:
    out = set()
    for op in low.ops:
        if op.kind == "add" and not op.weights:
            prefixes = [op.scope[:i + 1] for i, part in enumerate(op.scope) if part.isdigit()]
            if prefixes:
                out.add(prefixes[-1])
    return out


def chainable(op: Op) -> bool:
    if op.kind not in CHAIN_KINDS:
        return False
    if op.kind == "einsum" and (len(op.inputs) != 2 or op.role == "conv" and _windowed(op)):
        return False
    return not any(isinstance(a, Affine) for o in [op.output] + op.inputs for a in o.axes)


def _windowed(op: Op) -> bool:
    return any(isinstance(a, Affine) for o in [op.output] + op.inputs for a in o.axes)


def plain_read(low: Lowered, tensor: str, axes) -> bool:
    """Whether a view reads a materialised tensor's elements as written (in order; broadcast
    axes aside)."""
    if tensor in low.origins or any(isinstance(a, Affine) for a in axes):
        return False
    table = low.table
    seen = [x for x in table.leaves(a for axis in axes for a in axis) if not table.broadcast[x]]
    own = list(table.leaves(a for axis in low.views[tensor] for a in axis))
    return seen == own


def components(low: Lowered) -> list[list[Op]]:
    scopes = residual_scopes(low)
    blocks = {op.id: block_of(op, scopes) for op in low.ops}
    parent = {op.id: op.id for op in low.ops}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    for op in low.ops:
        if not chainable(op):
            continue
        for operand in op.inputs:
            producer = low.producer.get(operand.tensor)
            if producer is None or operand.tensor in low.constant:
                continue
            source = low.ops[producer]
            if chainable(source) and blocks[producer] == blocks[op.id] and \
                    plain_read(low, operand.tensor, operand.axes):
                parent[find(op.id)] = find(producer)
    groups: dict[int, list[Op]] = {}
    for op in low.ops:
        groups.setdefault(find(op.id), []).append(op)
    out = []
    for members in groups.values():
        for start in range(0, len(members), MAX_CHAIN):
            out.append(members[start:start + MAX_CHAIN])
    return out


# ------------------------------------------------------------------------------ op graphs

@dataclass
class ChainGraph:
    """One chain written out: sizes, ops (as `ops:` entries), dtypes, and the op ids it holds."""
    sizes: list[tuple[str, int]]
    ops: list[dict]
    dtypes: dict[str, object]
    op_ids: list[int]
    names: dict[int, str]                # op id -> its name in the chain


def identifier(text: str) -> str:
    out = re.sub(r"[^A-Za-z0-9_]", "_", text).strip("_") or "t"
    return out if not out[0].isdigit() else f"t{out}"


def chain_graph(low: Lowered, ops: list[Op], op_names: dict[int, str], dtype_of) -> ChainGraph | None:
    """The chain's op graph, or None where its ops cannot share one naming of dims (then each
    stands alone)."""
    einsums = {op.id: op_einsum(low.table, op, folding=False) for op in ops}
    inside = {op.output.tensor for op in ops}
    # tensors: an op's output by the op's name; an input from outside by its source, one name
    # per way of reading it
    tensor_names, used = {}, set()

    def name_for(key, hint):
        if key not in tensor_names:
            base = identifier(hint)
            candidate, i = base, 2
            while candidate in used:
                candidate, i = f"{base}_{i}", i + 1
            used.add(candidate)
            tensor_names[key] = candidate
        return tensor_names[key]
    for op in ops:
        name_for(("out", op.output.tensor), op_names[op.id])
    operand_names = {}
    for op in ops:
        for i, operand in enumerate(op.inputs):
            if operand.tensor in inside:
                operand_names[(op.id, i)] = tensor_names[("out", operand.tensor)]
            else:
                leaves = tuple(low.table.leaves(a for axis in operand.axes if not isinstance(axis, Affine)
                                                for a in axis))
                hint = "W_" + op_names[op.id] if i in op.weights else "X"
                operand_names[(op.id, i)] = name_for(("in", operand.tensor, leaves), hint)
    # chain dims: an op's dims joined with the dims other ops index the same tensor axis by
    parent = {}

    def find(x):
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    by_tensor = {}
    for op in ops:
        e = einsums[op.id]
        names = [tensor_names[("out", op.output.tensor)]] + [operand_names[(op.id, i)] for i in range(len(op.inputs))]
        for name, operand in zip(names, e.operands):
            dims = [(op.id, axis[0][0]) for axis in operand]
            if name in by_tensor:
                if len(by_tensor[name]) != len(dims):
                    return None
                for a, b in zip(by_tensor[name], dims):
                    ra, rb = find(a), find(b)
                    if ra != rb:
                        parent[max(ra, rb)] = min(ra, rb)
            else:
                by_tensor[name] = dims
    # one einsum over every op's operands, in chain dims, folded together
    sizes, operands, owner = {}, [], []
    for op in ops:
        e = einsums[op.id]
        local = {}
        for d in e.dims:
            cd = find((op.id, d))
            if cd in local.values():
                return None                   # an op iterating one chain dim twice (a diagonal)
            local[d] = cd
            if sizes.setdefault(cd, e.sizes[d]) != e.sizes[d]:
                return None
        for operand in e.operands:
            operands.append(tuple(((local[axis[0][0]], 1),) for axis in operand))
        owner.append(op)
    ids = sorted(sizes)
    index = {cd: i for i, cd in enumerate(ids)}
    joint = Einsum(tuple(range(len(ids))), {index[cd]: s for cd, s in sizes.items()},
                   tuple(tuple(((index[a[0][0]], 1),) for a in operand) for operand in operands))
    rows = set()
    for op in ops:
        if op.reduced is not None:
            e = einsums[op.id]
            row_dims = _row_dims(low, op, e)
            rows.update(index[find((op.id, d))] for d in row_dims)
    folded = fold(joint, frozenset(rows))
    dim_names = _dim_names(folded, ops, einsums, find, index)
    # per op: its operands' indices in folded chain dims
    entries, position = [], 0
    for op in ops:
        e = einsums[op.id]
        count = len(e.operands)
        mine = folded.operands[position:position + count]
        position += count
        names = [tensor_names[("out", op.output.tensor)]] + [operand_names[(op.id, i)] for i in range(len(op.inputs))]
        text = [f"{n}[{','.join(dim_names[a[0][0]] for a in operand)}]" for n, operand in zip(names, mine)]
        entry = {"name": op_names[op.id]}
        if op.kind == "einsum":
            entry["einsum"] = f"{text[0]} += {' * '.join(text[1:])}"
        else:
            entry.update(kind=op.kind, inputs=text[1:], output=text[0])
            if op.reduced is not None:
                row = [dim_names[a[0][0]] for a in mine[0] if a[0][0] in rows]
                if len(row) != 1:
                    return None
                entry["dim"] = row[0]
            if op.kind == "map" and op.flops_per_element is not None:
                entry["flops_per_element"] = op.flops_per_element
        entries.append(entry)
    used_dims = {a[0][0] for operand in folded.operands for a in operand}
    chain_sizes = [(dim_names[d], folded.sizes[d]) for d in sorted(used_dims, key=lambda d: dim_names[d])]
    dtypes = {}
    for op in ops:
        names = [tensor_names[("out", op.output.tensor)]] + [operand_names[(op.id, i)] for i in range(len(op.inputs))]
        for n, operand in zip(names, [op.output] + op.inputs):
            dtypes[n] = dtype_of(operand.tensor)
    return ChainGraph(chain_sizes, entries, dtypes, [op.id for op in ops], dict(op_names))


def _row_dims(low: Lowered, op: Op, e: Einsum) -> list[int]:
    """The einsum dims of a row reduction's row (its reduced atoms, as the output indexes them)."""
    wanted = set(low.table.leaves(op.reduced))
    out_leaves = [x for x in low.table.leaves(a for axis in op.output.axes for a in axis)
                  if not low.table.broadcast[x]]
    dims = [axis[0][0] for axis in e.operands[0]]
    return [d for x, d in zip(out_leaves, dims) if x in wanted]


def _dim_names(folded: Einsum, ops, einsums, find, index) -> dict[int, str]:
    """Chain dims named by their role in the chain's first einsum that iterates them (a GEMM's
    m, n, k; attention's g, i, j, d), then by letter."""
    names: dict[int, str] = {}
    for op in ops:
        if op.kind != "einsum" or op.role not in CONTRACTION_NAMES:
            continue
        letters = dict(zip(("g", "m", "n", "k"), CONTRACTION_NAMES[op.role][0]))
        for role, dims in roles(einsums[op.id]).items():
            for d in dims:
                cd = index[find((op.id, d))]
                if cd in folded.sizes and cd not in names and role in letters:
                    names[cd] = letters[role]
    taken, out = set(), {}
    for cd in sorted(folded.sizes):
        name = names.get(cd)
        if name is None:
            continue
        candidate, i = name, 2
        while candidate in taken:
            candidate, i = f"{name}{i}", i + 1
        out[cd] = candidate
        taken.add(candidate)
    letters = iter(c for c in "tefcxyzuvwabhlopqrs" if c not in taken)
    for cd in sorted(folded.sizes):
        if cd not in out:
            out[cd] = next(letters, f"d{cd}")
    return out

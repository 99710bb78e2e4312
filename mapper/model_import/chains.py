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

import math
import re
from dataclasses import dataclass

from .einsums import CONTRACTION_NAMES, Classes, Einsum, fold, op_einsum, roles
from .lowered import Lowered
from .ops import Affine, Op

MAX_CHAIN = 32                       # ops in one chain at most (a longer run is cut in order)
ROW_KINDS = frozenset({"softmax", "layernorm", "rmsnorm"})
CHAIN_KINDS = frozenset({"einsum", "map", "scale", "mask", "add", "mul", "bias", "relu", "gelu", "silu",
                         "softmax", "layernorm", "rmsnorm", "gather"})


def block_of(op: Op, residual_scopes: set[tuple[str, ...]]) -> tuple[str, ...]:
    """The op's block: the longest prefix of its scope that ends in an index and holds a
    residual add; else its first indexed prefix; else the whole network."""
    prefixes = [op.scope[:i + 1] for i, part in enumerate(op.scope) if part.isdigit()]
    inside = [p for p in prefixes if p in residual_scopes]
    if inside:
        return inside[-1]
    # else an index that ends the scope numbers the op's own module in a list (a classifier's
    # Linear in a Sequential), not a block around it
    outer = [p for p in prefixes if len(p) < len(op.scope)]
    return outer[0] if outer else ()


def residual_scopes(low: Lowered) -> set[tuple[str, ...]]:
    """The indexed modules residual adds live in (a transformer layer, a bottleneck block)."""
    out = set()
    for op in low.ops:
        if op.kind == "add" and not op.weights:
            prefixes = [op.scope[:i + 1] for i, part in enumerate(op.scope) if part.isdigit()]
            if prefixes:
                out.add(prefixes[-1])
    return out


def chainable(op: Op) -> bool:
    """Whether an op can be written in an op graph: plain dims (no window), a product of two."""
    if op.kind not in CHAIN_KINDS or (op.kind == "einsum" and len(op.inputs) != 2):
        return False
    return not any(isinstance(a, Affine) for o in [op.output] + op.inputs for a in o.axes)


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
    if len(ops) == 1 and ops[0].kind == "stream":
        return _stream_graph(low, ops[0], op_names, dtype_of)
    # a tensor from outside read by several ops joins their dims; where that would make one op
    # iterate a dim twice (rotary tables read for the queries and for the keys, whose positions
    # attention then pairs), each op reads its own copy of it instead
    return _graph(low, ops, op_names, dtype_of, True) or _graph(low, ops, op_names, dtype_of, False)


def _graph(low: Lowered, ops: list[Op], op_names: dict[int, str], dtype_of, share: bool) -> ChainGraph | None:
    einsums = {op.id: op_einsum(low.table, op, folding=False) for op in ops}
    names = _tensor_names(low, ops, op_names, share)
    joined = _chain_dims(ops, einsums, names)
    if joined is None:
        return None
    joint, find, index = joined
    rows = frozenset(index[find((op.id, d))] for op in ops if op.kind in ROW_KINDS
                     for d in _row_dims(low, op, einsums[op.id]))
    folded = fold(joint, rows)
    dim_names = _dim_names(folded, ops, einsums, find, index)
    entries, position = [], 0
    for op in ops:
        count = len(einsums[op.id].operands)
        entry = _entry(op, op_names[op.id], names[op.id], folded.operands[position:position + count], dim_names, rows)
        if entry is None:
            return None
        entries.append(entry)
        position += count
    used = {a[0][0] for operand in folded.operands for a in operand}
    sizes = [(dim_names[d], folded.sizes[d]) for d in sorted(used, key=lambda d: dim_names[d])]
    dtypes = {n: dtype_of(operand.tensor) for op in ops
              for n, operand in zip(names[op.id], [op.output] + op.inputs)}
    return ChainGraph(sizes, entries, dtypes, [op.id for op in ops], dict(op_names))


def _tensor_names(low: Lowered, ops: list[Op], op_names: dict[int, str], share: bool) -> dict[int, list[str]]:
    """Each op's tensors' names in the chain (output first): an op's output by the op's name; a
    tensor from outside by its source, one name per way of reading it (per op unless `share`)."""
    inside = {op.output.tensor for op in ops}
    given, used = {}, set()

    def name_for(key, hint):
        if key not in given:
            base = identifier(hint)
            candidate, i = base, 2
            while candidate in used:
                candidate, i = f"{base}_{i}", i + 1
            used.add(candidate)
            given[key] = candidate
        return given[key]
    for op in ops:
        name_for(("out", op.output.tensor), op_names[op.id])
    out = {}
    for op in ops:
        names = [given[("out", op.output.tensor)]]
        for i, operand in enumerate(op.inputs):
            if operand.tensor in inside:
                names.append(given[("out", operand.tensor)])
                continue
            leaves = tuple(low.table.leaves(a for axis in operand.axes if not isinstance(axis, Affine) for a in axis))
            key = ("in", operand.tensor, leaves) + (() if share else (op.id, i))
            names.append(name_for(key, "W_" + op_names[op.id] if i in op.weights else "X"))
        out[op.id] = names
    return out


def _chain_dims(ops: list[Op], einsums: dict, names: dict[int, list[str]]):
    """Every op's dims joined with those another op indexes the same tensor's axis by, as one
    einsum over all the ops' operands (the chain's dims numbered 0..); None where a tensor's
    axes disagree between ops or an op would iterate one chain dim twice (a diagonal)."""
    joined = Classes()
    by_tensor = {}
    for op in ops:
        for name, operand in zip(names[op.id], einsums[op.id].operands):
            dims = [(op.id, axis[0][0]) for axis in operand]
            if name not in by_tensor:
                by_tensor[name] = dims
                continue
            if len(by_tensor[name]) != len(dims):
                return None
            for a, b in zip(by_tensor[name], dims):
                joined.union(a, b)
    sizes, operands = {}, []
    for op in ops:
        e = einsums[op.id]
        local = {}
        for d in e.dims:
            cd = joined[(op.id, d)]
            if cd in local.values() or sizes.setdefault(cd, e.sizes[d]) != e.sizes[d]:
                return None
            local[d] = cd
        operands += [tuple(local[axis[0][0]] for axis in operand) for operand in e.operands]
    index = {cd: i for i, cd in enumerate(sorted(sizes))}
    joint = Einsum(tuple(range(len(index))), {index[cd]: s for cd, s in sizes.items()},
                   tuple(tuple(((index[d], 1),) for d in operand) for operand in operands))
    return joint, (lambda x: joined[x]), index


def _entry(op: Op, name: str, tensors: list[str], operands, dim_names: dict, rows) -> dict | None:
    """One op as an `ops:` entry of the chain's op graph, its operands in folded chain dims."""
    text = [f"{t}[{','.join(dim_names[a[0][0]] for a in operand)}]" for t, operand in zip(tensors, operands)]
    entry = {"name": name}
    if op.kind == "einsum":
        entry["einsum"] = f"{text[0]} += {' * '.join(text[1:])}"
        return entry
    entry.update(kind=op.kind, inputs=text[1:], output=text[0])
    if op.kind in ROW_KINDS:
        row = [dim_names[a[0][0]] for a in operands[0] if a[0][0] in rows]
        if len(row) != 1:
            return None
        entry["dim"] = row[0]
    if op.kind == "map" and op.flops_per_element is not None:
        entry["flops_per_element"] = op.flops_per_element
    return entry


def _stream_graph(low: Lowered, op: Op, op_names: dict[int, str], dtype_of) -> ChainGraph:
    """A streaming op alone: each tensor flattened to (g, its own rest) with g the greatest
    common divisor of their sizes, so its streaming einsum reads every input element and writes
    every output element once (a window's overlap, a reduction's order: not modelled)."""
    tensors = [op.output] + op.inputs
    elements = [math.prod(low.shapes[t.tensor]) for t in tensors]
    g = math.gcd(*elements)
    name = op_names[op.id]
    names = [identifier(name)] + [("W_" + identifier(name) if i in op.weights else "X") + (f"_{i + 1}" if i else "")
                                  for i in range(len(op.inputs))]
    sizes, texts = [("t", g)] if g > 1 else [], []
    for i, (tensor, n) in enumerate(zip(names, elements)):
        rest = n // g
        dims = (["t"] if g > 1 else []) + ([f"u{i}"] if rest > 1 else [])
        if rest > 1:
            sizes.append((f"u{i}", rest))
        if not dims:                       # a single element: still one axis to index
            dims = [f"u{i}"]
            sizes.append((f"u{i}", 1))
        texts.append(f"{tensor}[{','.join(dims)}]")
    entry = {"name": name, "kind": "stream", "inputs": texts[1:], "output": texts[0]}
    if op.flops_per_element:
        entry["flops_per_element"] = op.flops_per_element
    dtypes = {n: dtype_of(t.tensor) for n, t in zip(names, tensors)}
    return ChainGraph(sizes, [entry], dtypes, [op.id], dict(op_names))


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

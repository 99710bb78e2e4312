"""One binding's analysis: the graph's layers and chains as model-file entries, with counts.

`analyse` lowers the graph (`lower.py`), recognises what its ops mean (`patterns.py`), aligns
their atoms (`einsums.refine`), names every einsum, cuts the chains (`chains.py`) and merges
what repeats: identical chains (the same op graph, each block of a transformer) are one entry
counted as often as it occurs, and so are identical layers in the same place of a block (same
module path up to the block's index, same einsum, sizes and element types) and of the same
chain. Each layer entry is `after` the layers its first occurrence reads from.

Every size here is an integer at the binding; `model_file.py` turns sizes that move with the
symbols into expressions by analysing the graph at several bindings.
"""
from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field, replace

from .chains import block_of, chain_graph, components, residual_scopes
from .einsums import named, op_einsum, refine
from .lower import lower
from .lowered import Lowered
from .onnx_graph import SMALL, Source
from .ops import Op
from . import patterns


@dataclass
class Structure:
    layers: list[dict]                   # model-file layer entries (sizes as ints)
    chains: list[dict]                   # model-file chain entries
    parameters: int
    unknown: list[str]                   # op types kept as streaming ops (one per node)
    copies: Counter                      # layout op type -> nodes that copy data
    merged: int                          # projections merged into GEMMs over their joint outputs
    merged_into: int                     # ... into this many GEMMs
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class DtypeChoice:
    """Element types: from the graph, or every floating-point tensor as `dtype` (layer outputs
    as `output_dtype` where given)."""
    dtype: str | None = None
    output_dtype: str | None = None


FLOATS = frozenset({"fp32", "fp16", "bf16", "fp64", "fp8", "fp4", "tf32"})


def analyse(source: Source, binding: dict[str, int], dtypes: DtypeChoice) -> Structure:
    shapes = source.at(binding)
    low = lower(source, shapes)
    patterns.hoist_scales(low)
    patterns.attention_roles(low)
    merged, merged_into = patterns.merge_projections(low)
    patterns.coalesce(low)
    _drop_scalars(low)
    refine(low.table, low.ops)
    names = _short_names(low)
    dtype_of = _dtype_rule(low, dtypes)
    graphs, chain_of = _chain_graphs(low, names, dtype_of)
    chain_keys = [json.dumps([g.sizes, g.ops, sorted(g.dtypes.items())], sort_keys=True, default=str)
                  for g in graphs]
    scopes = residual_scopes(low)
    layer_key, layer_text = {}, {}
    for op in low.ops:
        if op.kind != "einsum":
            continue
        e = op_einsum(low.table, op)
        text = named(e, op, low.table)
        block = block_of(op, scopes)
        role = tuple("*" if p.isdigit() else p for p in block) + op.scope[len(block):]
        where = chain_of.get(op.id)
        dts = _layer_dtypes(low, op, text.tensors, dtype_of)
        key = (role, names[op.id], text.text, text.sizes, tuple(sorted(dts.items())),
               chain_keys[where[0]] if where else None, where[1] if where else None)
        layer_key[op.id] = key
        layer_text[op.id] = (text, dts)
    entry_names = _entry_names(low, layer_key, names)
    layers = _layer_entries(low, layer_key, layer_text, entry_names)
    chains = _chain_entries(graphs, chain_keys, layer_key, entry_names, low)
    return Structure(layers, chains, _parameters(source, shapes), [n.op for n in low.unknown],
                     Counter(n.op for n in low.copies), merged, merged_into)


def _chain_graphs(low: Lowered, names: dict[int, str], dtype_of):
    """The chains' op graphs, and where each op lies in them (op id -> (graph, position)). A
    chain whose ops cannot share one naming of dims is cut into its ops, each alone; an op alone
    that still cannot be written (a softmax over an axis of one, say) keeps its bytes as a
    stream; a layer alone is its own point, no chain."""
    chain_of, graphs = {}, []
    for members in components(low):
        if len(members) == 1 and members[0].kind == "einsum":
            continue
        for part in [members] if chain_graph(low, members, names, dtype_of) else [[op] for op in members]:
            if len(part) == 1 and part[0].kind == "einsum":
                continue
            graph = chain_graph(low, part, names, dtype_of) or \
                chain_graph(low, [replace(part[0], kind="stream", flops_per_element=0.0)], names, dtype_of)
            graphs.append(graph)
            for position, op in enumerate(part):
                chain_of[op.id] = (len(graphs) - 1, position)
    return graphs, chain_of


def _drop_scalars(low: Lowered) -> None:
    """Constant scalars (an epsilon, a scale factor, an exponent) are operands of no traffic."""
    for op in low.ops:
        keep = [i for i, o in enumerate(op.inputs)
                if not (i in op.weights and math.prod(low.shapes[o.tensor]) == 1)]
        if len(keep) == len(op.inputs) or not keep:
            continue
        op.weights = frozenset(keep.index(i) for i in op.weights if i in keep)
        op.inputs = [op.inputs[i] for i in keep]


def _dtype_rule(low: Lowered, choice: DtypeChoice):
    """A tensor's element type: the graph's, or with `--dtype` every float one's that; a
    layer's own output is `--output-dtype` where given (its accumulation, as the presets write
    it), read by the next op as `--dtype`."""
    def dtype_of(tensor: str, output: bool = False):
        raw = low.dtypes.get(tensor) or low.dtypes.get(tensor.split(".")[0]) or "fp32"
        if choice.dtype and raw in FLOATS:
            return choice.output_dtype if output and choice.output_dtype else choice.dtype
        return raw
    return dtype_of


def _layer_dtypes(low: Lowered, op: Op, tensors, dtype_of) -> dict[str, object]:
    return {name: dtype_of(operand.tensor, i == 0)
            for i, (name, operand) in enumerate(zip(tensors, [op.output] + op.inputs))}


def _parameters(source: Source, shapes) -> int:
    """Elements of the graph's weights (initializers and parameter inputs of more than a few
    elements: shapes and scalars are not parameters)."""
    total = 0
    for name in source.weights:
        shape = shapes.shapes.get(name)
        if shape and math.prod(shape) > SMALL:
            total += math.prod(shape)
    return total


# ------------------------------------------------------------------------------ names

def _short_names(low: Lowered) -> dict[int, str]:
    """An op's name: its module path within its block (`attn.c_attn`), with what it does where
    several ops share one module (`attn.score`, `attn.softmax`); a block's own ops (a residual
    add) by their kind."""
    common = _common_prefix(low)
    res = residual_scopes(low)
    by_scope = Counter(op.scope for op in low.ops)
    einsum_scopes = {op.scope for op in low.ops if op.kind == "einsum"}
    names = {}
    for op in low.ops:
        block = block_of(op, res)
        start = max(len(block), common)
        rel = ".".join(op.scope[start:])
        what = op.role if op.kind == "einsum" and op.role in ("score", "value") else op.kind
        if not rel:
            name = what
        elif by_scope[op.scope] == 1 or (op.kind == "einsum" and op.role not in ("score", "value")):
            name = rel
        elif op.scope in einsum_scopes or by_scope[op.scope] > 1:
            name = f"{rel}.{what}"
        else:
            name = rel
        names[op.id] = name
    # unique within a block
    seen = Counter()
    for op in low.ops:
        key = (block_of(op, res), names[op.id])
        seen[key] += 1
        if seen[key] > 1:
            names[op.id] = f"{names[op.id]}-{seen[key]}"
    return names


def _common_prefix(low: Lowered) -> int:
    """How many leading scope parts every op shares (a wrapper module's name, say)."""
    scopes = [op.scope for op in low.ops if op.scope]
    common = 0
    for parts in zip(*scopes):
        if len(set(parts)) != 1:
            break
        common += 1
    # never the whole of a scope: an op keeps at least its own module's name
    return min([common] + [len(s) - 1 for s in scopes])


def _entry_names(low: Lowered, layer_key, names) -> dict[tuple, str]:
    """A layer entry's name: its op's, or where several entries would share that, each with
    its block's path (from where the blocks' paths differ)."""
    res = residual_scopes(low)
    firsts = {}
    for op in low.ops:
        key = layer_key.get(op.id)
        if key is not None and key not in firsts:
            firsts[key] = op
    shared = Counter(names[op.id] for op in firsts.values())
    blocks = [block_of(op, res) for op in low.ops if block_of(op, res)]
    common = 0
    for parts in zip(*blocks):
        if len(set(parts)) != 1:
            break
        common += 1
    if common and blocks and common < len(blocks[0]) and blocks[0][common].isdigit():
        common -= 1                      # keep the list's name before its index: stages.1
    out, taken = {}, set()
    for key, op in firsts.items():
        name = names[op.id]
        block = ".".join(block_of(op, res)[common:])
        if shared[name] > 1 and block:
            name = f"{block}.{name}"
        candidate, i = name, 2
        while candidate in taken:
            candidate, i = f"{name}-{i}", i + 1
        taken.add(candidate)
        out[key] = candidate
    return out


# ------------------------------------------------------------------------------ entries

def _einsum_ancestors(low: Lowered, op: Op) -> list[int]:
    """The einsums whose results this op reads, through any non-einsum ops and copies."""
    found, stack, seen = [], [op], set()
    while stack:
        current = stack.pop()
        for operand in current.inputs:
            for root in low.roots(operand.tensor):
                producer = low.producer.get(root)
                if producer is None or producer in seen:
                    continue
                seen.add(producer)
                source = low.ops[producer]
                if source.kind == "einsum":
                    found.append(producer)
                else:
                    stack.append(source)
    return sorted(found)


def _layer_entries(low: Lowered, layer_key, layer_text, entry_names) -> list[dict]:
    counts = Counter(layer_key.values())
    entries, done = [], set()
    for op in low.ops:
        key = layer_key.get(op.id)
        if key is None or key in done:
            continue
        done.add(key)
        text, dts = layer_text[op.id]
        after = []
        for a in _einsum_ancestors(low, op):
            name = entry_names[layer_key[a]]
            if name not in after and name != entry_names[key]:
                after.append(name)
        entry = {"name": entry_names[key], "einsum": text.text, "sizes": dict(text.sizes), "count": counts[key]}
        if after:
            entry["after"] = after
        entry["dtypes"] = dts
        if op.note:
            entry["description"] = op.note
        entries.append(entry)
    return entries


def _chain_entries(graphs, chain_keys, layer_key, entry_names, low: Lowered) -> list[dict]:
    counts = Counter(chain_keys)
    entries, done, taken = [], set(), set()
    for graph, key in zip(graphs, chain_keys):
        if key in done:
            continue
        done.add(key)
        layers = [entry_names[layer_key[i]] for i in graph.op_ids if i in layer_key]
        ops = [low.ops[i] for i in graph.op_ids]
        base = "+".join(dict.fromkeys(layers)) if layers else "+".join(graph.names[o.id] for o in ops[:3])
        base = base if len(base) <= 60 else base[:57] + "..."
        name, i = base, 2
        while name in taken:
            name, i = f"{base}-{i}", i + 1
        taken.add(name)
        entries.append({"name": name, "count": counts[key], "layers": layers, "sizes": dict(graph.sizes),
                        "dtypes": graph.dtypes, "ops": graph.ops})
    return entries

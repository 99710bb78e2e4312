"""What the lowered ops mean: attention's two products, projections that share their input,
and the named ops that exporters write out as many small ones.

- `attention_roles`: a product of two activations whose result reaches a softmax (through
  scale, mask and their like) computes attention scores; one whose left operand comes from a
  softmax applies them to the values. They are named as the presets name them.
- `merge_projections`: GEMMs that read the same activations and feed attention (query, key and
  value projections written as three) are one GEMM over their concatenated outputs, as the
  presets and the kernels that run them do (their biases with them). Other siblings (an MLP's
  gate and up projections) stay apart.
- `coalesce`: a data tensor that forks into elementwise ops and rejoins (x * sigmoid(x); the
  root mean square of x, then x times its inverse; GELU's polynomial) is one op from the fork
  to the join, named by what it holds: `rmsnorm`, `layernorm` (a mean-centring then a
  normalisation), `softmax` (a max-centring, exp, then a sum-normalisation), `gelu`, `silu`,
  or a `map` with the FLOPs of its parts; a norm takes the scale and shift that follow it.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace

from .contractions import inner_first, matmul_views
from .lowered import Lowered, aligned, materialise
from .ops import Op, Operand

ELEMENTWISE_KINDS = frozenset({"map", "scale", "mask", "add", "mul", "bias", "relu", "gelu", "silu"})
PASS_THROUGH = ELEMENTWISE_KINDS | {"softmax"}
MAX_REGION = 24                     # ops in one coalesced region at most
SCAN = 48                           # ops after a fork searched for its join


def readers(low: Lowered) -> dict[str, list[int]]:
    """Materialised tensor -> the ops that read it (through views and copies)."""
    out = defaultdict(list)
    for op in low.ops:
        for operand in op.inputs:
            for root in low.roots(operand.tensor):
                if op.id not in out[root]:
                    out[root].append(op.id)
    return out


def _data_roots(low: Lowered, op: Op) -> set[str]:
    return {r for o in op.inputs if o.tensor not in low.constant for r in low.roots(o.tensor)
            if r not in low.constant}


def _producers(low: Lowered, op: Op) -> set[int]:
    return {low.producer[r] for r in _data_roots(low, op) if r in low.producer}


def renumber(low: Lowered, ops: list[Op]) -> None:
    """Keep `ops` (in order), ids their positions, producers pointing at them."""
    low.ops = [replace(op, id=i) for i, op in enumerate(ops)]
    low.producer = {op.output.tensor: op.id for op in low.ops}


# ------------------------------------------------------------------------------ attention

def _reaches(op: Op, read, by_id, hops: int, found, through) -> bool:
    """Whether an op `found` accepts reads op's result within `hops` ops, each one on the way
    one that `through` accepts."""
    frontier = [op.output.tensor]
    for _ in range(hops):
        nxt = []
        for t in frontier:
            for j in read.get(t, []):
                if found(by_id[j]):
                    return True
                if through(by_id[j]):
                    nxt.append(by_id[j].output.tensor)
        frontier = nxt
    return False


def hoist_scales(low: Lowered) -> None:
    """A constant scalar multiplying an operand of a product of activations is the product's own
    factor, (a Q)(b K)^T = ab (Q K^T), as PyTorch's decomposed scaled-dot-product attention
    writes it: the product reads the operand as it was (a grouped K broadcast over its query
    heads, transposed), not a scaled copy of it, and the scaling op goes."""
    read = readers(low)
    by_id = {op.id: op for op in low.ops}
    gone = set()
    for op in low.ops:
        if op.kind != "einsum" or op.weights or len(op.inputs) != 2:
            continue
        for i, operand in enumerate(op.inputs):
            scale = by_id.get(low.producer.get(operand.tensor, -1))
            if scale is None or scale.kind != "scale" or read.get(operand.tensor) != [op.id] or scale.id in gone:
                continue
            data = [o for j, o in enumerate(scale.inputs) if j not in scale.weights]
            factors = [o for j, o in enumerate(scale.inputs) if j in scale.weights]
            own = list(low.views[operand.tensor])
            if len(data) != 1 or any(math.prod(low.shapes[f.tensor]) != 1 for f in factors) or \
                    len(data[0].axes) != len(own) or any(axis not in own for axis in operand.axes):
                continue
            moved = {own[k]: data[0].axes[k] for k in range(len(own))}
            axes = [moved[axis] for axis in operand.axes]
            if inner_first(low, data[0].tensor, axes[-2], axes[-1]):
                axes[-2], axes[-1] = axes[-1], axes[-2]
            op.inputs[i] = Operand(data[0].tensor, tuple(axes))
            op.equal = [(moved.get(a, a), moved.get(b, b)) for a, b in op.equal]
            if "factors" not in op.note:
                op.note = (op.note + "; " if op.note else "") + "its operands' constant factors taken out of it"
            gone.add(scale.id)
    if gone:
        renumber(low, [op for op in low.ops if op.id not in gone])


def attention_roles(low: Lowered) -> None:
    read = readers(low)
    by_id = {op.id: op for op in low.ops}

    def from_softmax(operand: Operand, hops: int = 4) -> bool:
        tensors = set(low.roots(operand.tensor))
        for _ in range(hops):
            ops = [by_id[low.producer[t]] for t in tensors if t in low.producer]
            if any(op.kind == "softmax" for op in ops):
                return True
            tensors = {r for op in ops if op.kind in ELEMENTWISE_KINDS for r in _data_roots(low, op)}
        return False

    for op in low.ops:
        if op.kind != "einsum" or op.role != "bmm" or op.weights:
            continue
        if _reaches(op, read, by_id, 6, lambda o: o.kind == "softmax", lambda o: o.kind in ELEMENTWISE_KINDS):
            op.role = "score"
            _masks_after(low, op, read, by_id)
        elif from_softmax(op.inputs[0]):
            op.role = "value"


def _masks_after(low: Lowered, score: Op, read, by_id) -> None:
    """A constant added to (or selecting) the scores on their way to the softmax is the
    attention mask. One that shapes alone determine (a causal mask, built from positions) is
    computed by the kernel from its indices, as FlashAttention does, not read: the mask op reads
    the scores alone, as the presets' does."""
    t = score.output.tensor
    for _ in range(6):
        nxt = [by_id[j] for j in read.get(t, [])]
        if len(nxt) != 1 or nxt[0].kind not in ELEMENTWISE_KINDS:
            return
        op = nxt[0]
        if op.kind in ("add", "mask") and op.weights:
            op.kind, op.note = "mask", "adds the attention mask"
            computed = [i for i in op.weights if op.inputs[i].tensor not in low.weights]
            if computed:
                keep = [i for i in range(len(op.inputs)) if i not in computed]
                op.weights = frozenset(keep.index(i) for i in op.weights if i in keep)
                op.inputs = [op.inputs[i] for i in keep]
                op.note = "the attention mask, computed from positions (only shapes determine it)"
        t = op.output.tensor


def feeds_attention(op: Op, read, by_id) -> bool:
    """Whether op's result reaches attention's scores or values before any other einsum."""
    return _reaches(op, read, by_id, 8, lambda o: o.kind == "einsum" and o.role in ("score", "value"),
                    lambda o: o.kind != "einsum")


# ------------------------------------------------------------------------------ projections

def merge_projections(low: Lowered) -> tuple[int, int]:
    """Query/key/value projections as one GEMM; returns how many projections went into how
    many GEMMs."""
    read = readers(low)
    by_id = {op.id: op for op in low.ops}
    groups = defaultdict(list)
    for op in low.ops:
        if op.kind == "einsum" and op.role == "gemm" and op.weights == frozenset({1}):
            a = op.inputs[0]
            leaves = tuple(low.table.leaves(x for axis in a.axes for x in axis))
            groups[(a.tensor, leaves)].append(op)
    merged_away = set()
    new_ops = []
    for members in groups.values():
        if len(members) < 2 or not all(feeds_attention(m, read, by_id) for m in members):
            continue
        shapes = [low.shapes[m.output.tensor] for m in members]
        if len({s[:-1] for s in shapes}) != 1:
            continue
        first = members[0]
        names = [m.output.tensor for m in members]
        weights = [m.inputs[1].tensor for m in members]
        out = "+".join(names)
        w = "+".join(weights)
        k = low.table.axis_size(first.inputs[1].axes[0])
        n = sum(s[-1] for s in shapes)
        materialise(low, w, (k, n))
        low.constant.add(w)
        low.dtypes[w] = low.dtypes.get(weights[0])
        low.dtypes[out] = low.dtypes.get(names[0])
        op = matmul_views(low, first.inputs[0].tensor, w, first.inputs[0].axes, low.views[w], out,
                           shapes[0][:-1] + (n,), first.nodes[0])
        low.ops.pop()                       # placed below, where its members were
        op.nodes = tuple(node for m in members for node in m.nodes)
        op.scope = _common_scope([m.scope for m in members])
        op.note = "projections " + ", ".join(".".join(m.scope[-1:]) or m.nodes[0].name for m in members) + \
                  " (one GEMM: they read the same activations)"
        new_ops.append((first.id, op))
        merged_away.update(m.id for m in members)
        for name in names:                  # each projection's output: a slice of the merged one
            low.origins[name] = frozenset({out})
            low.producer.pop(name, None)
        _merge_biases(low, members, names, out, read, by_id, merged_away, new_ops)
    if not merged_away:
        return 0, 0
    projections = sum(1 for op in low.ops if op.id in merged_away and op.kind == "einsum")
    placed = dict(new_ops)
    ops = []
    for op in low.ops:
        if op.id in placed:
            ops.extend(placed[op.id] if isinstance(placed[op.id], list) else [placed[op.id]])
        if op.id not in merged_away:
            ops.append(op)
    renumber(low, ops)
    return projections, sum(1 for _, op in new_ops if op.kind == "einsum")


def _merge_biases(low, members, names, out, read, by_id, merged_away, new_ops) -> None:
    """Each projection's bias add, where every one has one, as one bias on the merged output."""
    biases = []
    for name in names:
        ops = [by_id[j] for j in read.get(name, [])]
        if len(ops) != 1 or ops[0].kind != "bias":
            return
        biases.append(ops[0])
    vectors = [next(o.tensor for i, o in enumerate(b.inputs) if i in b.weights) for b in biases]
    n = low.shapes[out][-1]
    vector = "+".join(vectors)
    materialise(low, vector, (n,))
    low.constant.add(vector)
    low.dtypes[vector] = low.dtypes.get(vectors[0])
    result = "+".join(b.output.tensor for b in biases)
    materialise(low, result, low.shapes[out])
    low.dtypes[result] = low.dtypes.get(biases[0].output.tensor)
    inputs = [low.operand(out), low.operand(vector)]
    op = Op(kind="bias", role="elementwise", output=low.operand(result), inputs=inputs,
            equal=aligned(low, inputs, low.views[result]), nodes=tuple(n for b in biases for n in b.nodes),
            scope=_common_scope([b.scope for b in biases]), weights=frozenset({1}))
    first = min(b.id for b in biases)
    new_ops.append((first, op))
    merged_away.update(b.id for b in biases)
    for b in biases:
        low.origins[b.output.tensor] = frozenset({result})
        low.producer.pop(b.output.tensor, None)


def _common_scope(scopes) -> tuple[str, ...]:
    common = []
    for parts in zip(*scopes):
        if len(set(parts)) != 1:
            break
        common.append(parts[0])
    return tuple(common)


# ------------------------------------------------------------------------------ regions

def _region_node_ops(low: Lowered, ops: list[Op]) -> list[str]:
    return [n.op for op in ops for n in op.nodes]


def _member(op: Op) -> bool:
    if op.kind in ELEMENTWISE_KINDS:
        return True
    # a reduction over the last axis, kept as an axis of one (a mean, max or sum of a row)
    return op.kind == "stream" and op.role == "reduce" and op.note in ("ReduceMean", "ReduceMax", "ReduceSum")


def _find_region(low: Lowered, x: str, read, by_id) -> tuple[list[Op], str] | None:
    first = [by_id[j] for j in read.get(x, []) if _member(by_id[j]) and by_id[j].kind != "softmax"]
    if len(first) < 2:
        return None
    closed = []
    for start in sorted(op.id for op in first):      # x may feed several forks (rotary on q and k)
        closed += _closed_regions(low, x, start, read)
    if not closed:
        return None
    # the join of as many of x's readers as rejoin (rotary: x*cos + rotate(x)*sin), the
    # smallest such region (a norm's scale that follows is its own step)
    _, _, members, out = max(closed, key=lambda c: (c[0], c[1]))
    return members, out


def _closed_regions(low: Lowered, x: str, start: int, read) -> list:
    """Regions from op `start` on that read x twice or more and let one tensor out."""
    region, avail, closed = [], {x}, []
    for op in low.ops[start:start + SCAN]:
        if not _member(op):
            continue
        ins = _data_roots(low, op)
        if not ins or not ins <= avail:
            continue
        region.append(op)
        avail.add(op.output.tensor)
        if len(region) > MAX_REGION:
            break
        forks = sum(1 for r in region if x in _data_roots(low, r))
        if forks < 2:
            continue
        outs = [r.output.tensor for r in region]
        ids = {r.id for r in region}
        escaping = [t for t in outs if any(j not in ids for j in read.get(t, [])) or not read.get(t)]
        if len(escaping) == 1 and escaping[0] == outs[-1]:
            closed.append((forks, -len(region), list(region), outs[-1]))
    return closed


def _classify(node_ops: list[str]) -> str:
    ops = set(node_ops) - {"Cast", "CastLike"}
    if "Erf" in ops or ("Tanh" in ops and "Pow" in ops):
        return "gelu"
    if ops == {"Sigmoid", "Mul"}:
        return "silu"
    if "ReduceMax" in ops and ops <= {"ReduceMax", "Sub"}:
        return "max-centre"
    if "ReduceSum" in ops and ops <= {"ReduceSum", "Div", "Reciprocal", "Mul"}:
        return "sum-normalise"
    if "ReduceMean" in ops and ops <= {"ReduceMean", "Sub"}:
        return "mean-centre"
    if "ReduceMean" in ops and ops & {"Sqrt", "Reciprocal", "Div", "Rsqrt"} and ops & {"Pow", "Mul"}:
        return "normalise"
    if "IsNaN" in ops and ops <= {"IsNaN", "Where", "Not", "Equal", "And", "Or"}:
        return "nan-guard"
    return "map"


def coalesce(low: Lowered) -> None:
    changed = True
    while changed:
        changed = False
        read = readers(low)
        by_id = {op.id: op for op in low.ops}
        for x in _tensors_in_order(low):
            found = _find_region(low, x, read, by_id)
            if found is None:
                continue
            region, out = found
            _replace(low, region, x, out, _classify(_region_node_ops(low, region)))
            changed = True
            break
    _join_partials(low)
    _absorb_affine(low)


def _tensors_in_order(low: Lowered) -> list[str]:
    seen = []
    for op in low.ops:
        for o in op.inputs:
            for r in low.roots(o.tensor):
                if r not in low.constant and r not in seen:
                    seen.append(r)
    return seen


def _region_op(low: Lowered, members: list[Op], x: str, out: str, kind: str, note: str) -> Op:
    """One op for `members`: reads x (as the member that writes `out`'s shape reads it) and
    every constant they read, writes `out`."""
    inside = {m.output.tensor for m in members}
    x_operand = next((o for m in members for o in m.inputs if x in low.roots(o.tensor)
                      and len(o.axes) == len(low.views[out])), None) or low.operand(x)
    inputs = [x_operand]
    seen = {x}
    for m in members:
        for i, o in enumerate(m.inputs):
            if i in m.weights and o.tensor not in seen and o.tensor not in inside:
                inputs.append(o)
                seen.add(o.tensor)
    view = low.views[out]
    weights = frozenset(range(1, len(inputs)))
    reduced = view[-1] if kind in ("layernorm", "rmsnorm", "softmax") else None
    flops = None
    if kind == "map":
        flops = float(sum(m.flops_per_element if m.flops_per_element is not None else 1.0 for m in members))
    nodes = tuple(n for m in members for n in m.nodes)
    return Op(id=members[0].id, kind=kind, role="reduction" if reduced is not None else "elementwise",
              output=low.operand(out), inputs=inputs, equal=aligned(low, inputs, view), nodes=nodes,
              scope=_common_scope([m.scope for m in members]) or members[-1].scope, weights=weights,
              reduced=reduced, flops_per_element=flops, note=note)


def _merge(low: Lowered, members: list[Op], x: str, out: str, kind: str, note: str) -> Op:
    """Members replaced by one op (`_region_op`) in the first one's place."""
    op = _region_op(low, members, x, out, kind, note)
    gone = {m.id for m in members}
    renumber(low, [op if o.id == members[0].id else o for o in low.ops
                   if o.id == members[0].id or o.id not in gone])
    return op


def _replace(low: Lowered, region: list[Op], x: str, out: str, kind: str) -> None:
    _merge(low, region, x, out, kind, f"{kind}: " + ", ".join(_region_node_ops(low, region)))


def _join_partials(low: Lowered) -> None:
    """mean-centre -> normalise is a layernorm, normalise alone an rmsnorm; max-centre -> Exp ->
    sum-normalise a softmax."""
    _until_stable(low, _join_partial)


def _join_partial(low: Lowered, op: Op, read, by_id) -> bool:
    nxt = _single_reader(op, read, by_id)
    if op.kind == "mean-centre" and nxt is not None and nxt.kind == "normalise":
        _fuse_ops(low, [op, nxt], "layernorm")
    elif op.kind == "max-centre" and nxt is not None and nxt.note == "Exp":
        after = _single_reader(nxt, read, by_id)
        if after is None or after.kind != "sum-normalise":
            return False
        _fuse_ops(low, [op, nxt, after], "softmax")
    elif op.kind == "softmax" and nxt is not None and nxt.kind == "nan-guard":
        _fuse_ops(low, [op, nxt], "softmax")        # a fully masked row's NaNs set to 0
    elif op.kind == "normalise":
        _fuse_ops(low, [op], "rmsnorm")
    elif op.kind in ("mean-centre", "max-centre", "sum-normalise", "nan-guard"):
        op.kind, op.role, op.reduced = "map", "elementwise", None
        op.flops_per_element = float(len(op.nodes))
    else:
        return False
    return True


def _until_stable(low: Lowered, rewrite) -> None:
    """`rewrite(low, op, readers, ops by id)` on each op in turn, True where it changed the
    graph; after a change the walk starts again on the new graph, until a walk changes nothing."""
    while True:
        read, by_id = readers(low), {op.id: op for op in low.ops}
        if not any(rewrite(low, op, read, by_id) for op in low.ops):
            return


def _single_reader(op: Op, read, by_id) -> Op | None:
    ids = read.get(op.output.tensor, [])
    return by_id[ids[0]] if len(ids) == 1 else None


def _fuse_ops(low: Lowered, chain: list[Op], kind: str) -> None:
    note = f"{kind}: " + ", ".join(n.op for op in chain for n in op.nodes)
    _merge(low, chain, next(iter(_data_roots(low, chain[0]))), chain[-1].output.tensor, kind, note)


def _absorb_affine(low: Lowered) -> None:
    """A norm's scale (a multiply by a constant vector along the row) and shift (an add of one)
    that follow it alone are its own inputs, as in LayerNormalization's; so is the constant
    factor GELU's erf form ends with (x * (1 + erf(x / sqrt 2)) * 0.5)."""
    _until_stable(low, _absorb_into)


def _absorb_into(low: Lowered, op: Op, read, by_id) -> bool:
    if op.kind not in ("layernorm", "rmsnorm", "gelu") or "affine" in op.attrs:
        return False
    nxt = _single_reader(op, read, by_id)
    op.attrs["affine"] = True
    if op.kind == "gelu":
        if nxt is None or nxt.kind != "scale" or not all(
                math.prod(low.shapes[o.tensor]) == 1 for i, o in enumerate(nxt.inputs) if i in nxt.weights):
            return False
        steps, note = [nxt], op.note + ", " + ", ".join(n.op for n in nxt.nodes)
    else:
        steps = []
        for wanted in (("scale", "mul", "map"), ("bias",)):
            if nxt is not None and nxt.kind in wanted and _row_vector(low, nxt) and \
                    (wanted == ("bias",) or any(n.op == "Mul" for n in nxt.nodes)):
                steps.append(nxt)
                nxt = _single_reader(nxt, read, by_id)
        steps = steps[:1] if op.kind == "rmsnorm" else steps
        note = op.note + " + " + ", ".join(n.op for s in steps for n in s.nodes)
    if not steps:
        return False
    fused = _merge(low, [op] + steps, next(iter(_data_roots(low, op))), steps[-1].output.tensor, op.kind, note)
    fused.attrs["affine"] = True
    return True


def _row_vector(low: Lowered, op: Op) -> bool:
    """Whether op reads one data tensor and one constant vector along its last axis."""
    consts = [o for i, o in enumerate(op.inputs) if i in op.weights]
    if len(consts) != 1 or len(op.inputs) != 2:
        return False
    shape = low.shapes[consts[0].tensor]
    return sum(s > 1 for s in shape) == 1 and shape[-1] > 1

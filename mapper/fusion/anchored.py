"""Groups around one einsum (the *anchor*): a prologue op producing an anchor input, applied as
that input is loaded into the fusion level, and epilogue ops consuming the anchor's output,
applied to its output tile there once it is final. `shape` says how the ops sit around the
anchor (or why they cannot), `anchored` prices the group on the anchor's fusable mappings: the
epilogue's extra operands and the prologue's slices move with the anchor's tiles
(`slices.py`), the fused working set must fit the fusion level and keep the resident blocks
the mapping assumed, else the intermediates spill."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import networkx as nx

from ..mapping import level_tiles
from ..opgraph import OpGraph
from .group_price import NORMALISE_FLOPS, STATS_BYTES_PER_ROW, Fusing, GroupPrice, Refusal
from .kernels import Mapped
from .price import fits_at, merged, scaled, with_flops, with_traffic, without
from .slices import riding


def to_anchor(graph: OpGraph, j: int, a: int, dim: str, ops) -> str | None:
    """The anchor's name of op j's dim `dim`, followed back along the in-group chain."""
    while j != a:
        op = graph.ops[j]
        chain = [t for t in op.inputs if graph.producer(t) in ops]
        if not chain or dim not in op.dims_of(chain[0]):
            return None
        producer = graph.producer(chain[0])
        dim = graph.ops[producer].dims_of(chain[0])[op.dims_of(chain[0]).index(dim)]
        j = producer
    return dim

@dataclass(frozen=True)
class Shape:
    """How a group's ops sit around its einsum `a`: the epilogue ops after it, the prologue op
    before it, and the (dims held whole in the tile, mode) mappings to try."""
    a: int
    down: tuple[int, ...]
    prologue: int | None
    candidates: tuple[tuple[frozenset, str], ...]

    @property
    def needs_search(self) -> bool:
        """Whether pricing it searches the anchor again (not just its free mapping)."""
        return any(self.down or whole for whole, _ in self.candidates)


def shape(fz: Fusing, ops, a: int) -> Shape | Refusal:
    """The group's shape around einsum `a`, or why it cannot be fused."""
    graph, g = fz.graph, fz.graph.graph
    up = [i for i in ops if i != a and nx.has_path(g, i, a)]
    down = [i for i in ops if i != a and nx.has_path(g, a, i)]
    anchor = graph.ops[a]
    if len(up) + len(down) != len(ops) - 1:
        return Refusal("tiling mismatch", "an op of the group is neither before nor after the einsum")
    if len(up) > 1 or (up and graph.ops[up[0]].output not in anchor.inputs):
        return Refusal("tiling mismatch", "a prologue of more than one op is not priced")
    whole = set()
    for j in down:
        op = graph.ops[j]
        if op.output_elements != anchor.output_elements:
            return Refusal("tiling mismatch", f"{op.name} iterates over {op.output_elements:,} elements, "
                           f"{anchor.name}'s output tile covers {anchor.output_elements:,}")
        if op.family == "reduction":
            dim = to_anchor(graph, j, a, op.reduced_dim, ops)
            if dim is None:
                return Refusal("tiling mismatch", f"{op.name}'s row is not a dim of {anchor.name}'s output")
            whole.add(dim)
    prologue = up[0] if up else None
    candidates = [(frozenset(whole), "plain")]
    if prologue is not None:
        p = graph.ops[prologue]
        if fz.escapes(p.output, ops):
            return Refusal("read by another kernel", f"{p.output} is also read outside the group")
        if p.family == "reduction":
            axis = p.output_dims.index(p.reduced_dim)
            row_dim = anchor.dims_of(p.output)[axis]
            candidates = [(frozenset(whole | {row_dim}), "in-row"), (frozenset(whole), "stats")]
    return Shape(a, tuple(down), prologue, tuple(candidates))


def anchored(fz: Fusing, ops, s: Shape) -> GroupPrice | Refusal:
    """The group priced on each candidate mapping of its anchor: the best, saying why a norm's
    stats pre-pass beat holding its whole row."""
    results = [_price_with(fz, ops, s.a, list(s.down), s.prologue, w, mode) for w, mode in s.candidates]
    priced = [r for r in results if isinstance(r, GroupPrice)]
    if not priced:
        return results[0]
    best = min(priced, key=lambda r: r.score(fz.objective))
    if len(results) == 2 and best is results[1]:          # the norm's stats pre-pass won: say why
        in_row = results[0]
        why = (in_row.reason if isinstance(in_row, Refusal) else
               f"the mapping holding it costs {in_row.score(fz.objective):.4g} against "
               f"{best.score(fz.objective):.4g} ({fz.objective})")
        best = replace(best, notes=best.notes + (f"the whole row in the tile: {why}",))
    return best


def _price_with(fz: Fusing, ops, a, down, prologue, whole, mode) -> GroupPrice | Refusal:
    """The group on the anchor's best fusable mapping; where its working set does not fit,
    the better of that mapping spilled and the anchor searched again with the extra bytes
    kept free at the fusion level (a smaller tile, which the anchor's traffic pays for)."""
    anchor = fz.graph.ops[a]
    if down or whole:
        mapped = fz.searches.fusable(a, tuple(sorted(whole)))
    else:
        mapped = fz.searches.free(a)
    if isinstance(mapped, str):
        kind = "full reduction" if whole else "tiling mismatch"
        what = f"with {', '.join(sorted(whole))} whole in the tile at " if whole else "completing its output tile at "
        return Refusal(kind, f"no mapping of {anchor.name} {what}{fz.arch.levels[fz.level].name} ({mapped})")
    first, extra = _on_mapping(fz, ops, a, down, prologue, mode, mapped)
    if not first.spilled:
        return first
    shrunk = fz.searches.fusable(a, tuple(sorted(whole)), reserve=extra)
    if isinstance(shrunk, str):
        return first
    second, _ = _on_mapping(fz, ops, a, down, prologue, mode, shrunk)
    if second.spilled:
        return first
    second = replace(second, notes=second.notes + (f"{anchor.name}'s tile shrunk to keep {extra:,.0f} B free "
                                                   f"at {fz.arch.levels[fz.level].name} for the fused ops",))
    return min((first, second), key=lambda r: r.score(fz.objective))


def _on_mapping(fz: Fusing, ops, a, down, prologue, mode, mapped: Mapped) -> tuple[GroupPrice, float]:
    """The group priced on one mapping of the anchor, and the bytes it adds at the fusion
    level beyond the anchor's own tiles."""
    graph = fz.graph
    added, working, notes = _epilogue_operands(fz, ops, a, down, mapped)
    members = [mapped.price] + [fz.searches.free(j).price for j in down]
    kernel, pre = merged(members), ()
    for j in down:
        for t in graph.ops[j].inputs:
            if graph.producer(t) not in ops:
                kernel = without(kernel, t, j, fz.level, fills_at=fz.level)
    kernel = with_traffic(kernel, added)
    skip = ()
    if prologue is not None:
        kernel, pre, extra_working, note = _prologue(fz, kernel, ops, a, prologue, mapped, mode)
        working += extra_working
        notes.append(note)
        skip = (graph.ops[prologue].output,)
    fits, why = _fits(fz, mapped, working)
    extra = working - mapped.evaluation.levels[fz.level].footprint_bytes
    if not fits:
        unfused = merged(members + ([fz.searches.free(prologue).price] if prologue is not None else []))
        return GroupPrice(ops, (with_traffic(unfused, added),), mapped, (), tuple(notes) + (why,), True,
                          working_bytes=working), extra
    kernel = fz.fuse_intermediates(kernel, ops, skip)
    fused = tuple(fz.graph.internal(ops))
    return GroupPrice(ops, pre + (kernel,), mapped, fused, tuple(notes), working_bytes=working), extra


def _epilogue_operands(fz: Fusing, ops, a, down, mapped: Mapped):
    """Loads of the epilogue's extra operands (a bias slice, a residual tile) with the
    anchor's output tiles (`slices.py`), and the fused working set at the fusion level."""
    graph, wl = fz.graph, fz.graph.ops[a].workload
    tile = level_tiles(mapped.mapping, len(wl.dims))[fz.level]
    size = {d: wl.sizes[wl.dim_index(d)] for d in wl.dims}
    extent = {d: min(tile[wl.dim_index(d)], size[d]) for d in wl.dims}
    out_dims = graph.ops[a].output_dims
    added, notes = [], []
    working = mapped.evaluation.levels[fz.level].footprint_bytes
    out_bits = graph.tensor(graph.ops[a].output).bits
    for j in down:
        op = graph.ops[j]
        for t in op.inputs:
            if graph.producer(t) in ops:
                continue
            dims = [to_anchor(fz.graph, j, a, d, ops) for d in op.dims_of(t)]
            word_bytes = graph.tensor(t).bits / 8
            added += riding(fz.arch, wl, mapped, graph.ops[a].output, out_dims, t, dims, 1, word_bytes,
                            fz.level, output=True)
            working += math.prod(extent[d] for d in dims) * word_bytes
        if graph.tensor(op.output).bits > out_bits:
            working += math.prod(extent[d] for d in out_dims) * (graph.tensor(op.output).bits - out_bits) / 8
    return added, working, notes


def _prologue(fz: Fusing, kernel, ops, a, prologue, mapped: Mapped, mode):
    """The prologue applied as the anchor loads its input A into the fusion level: the
    anchor reads the prologue's input X where it read A (scaled by their element sizes),
    the prologue's other operands move with A's tiles (`slices.py`) and its FLOPs are
    recomputed with every load. A norm without its row whole in the tile keeps a stats
    pre-pass kernel (2 fp32 words per row, X its only input) and normalises as A is
    loaded, its rows' stats moving with A's tiles too."""
    graph, p = fz.graph, fz.graph.ops[prologue]
    A, f = p.output, fz.level
    a_tensor = graph.tensor(A)
    ev = mapped.evaluation
    loaded = ev.levels[f].tensors[A].fills * ev.levels[f].instances if A in ev.levels[f].tensors else a_tensor.elements
    r_f = max(loaded / a_tensor.elements, 1.0)
    main = [x for x in p.inputs if graph.tensor(x).shape == a_tensor.shape]
    extras = [x for x in p.inputs if x not in main]
    reads_of_a = [t for t in kernel.traffic if t.tensor == A and t.owner == a and t.level < f]
    for x in main:
        ratio = graph.tensor(x).bits / a_tensor.bits
        kernel = with_traffic(kernel, [replace(t, tensor=x, bytes=t.bytes * ratio, energy_pj=t.energy_pj * ratio,
                                               cycles=t.cycles * ratio, owner=-1) for t in reads_of_a])
    kernel = without(kernel, A, a, f)
    wl = graph.ops[a].workload
    tile = level_tiles(mapped.mapping, len(wl.dims))[f]
    extent = {d: min(tile[wl.dim_index(d)], wl.sizes[wl.dim_index(d)]) for d in wl.dims}
    a_dims = graph.ops[a].dims_of(A)
    as_anchor = dict(zip(p.output_dims, a_dims))
    row = as_anchor[p.reduced_dim] if p.family == "reduction" else None
    slices = [(x, [as_anchor[d] for d in p.dims_of(x)], 1, graph.tensor(x).bits / 8) for x in extras]
    if mode == "stats":       # each row of a loaded tile needs its stats: 2 fp32 words
        slices.append(("stats", [d for d in a_dims if d != row], 2, STATS_BYTES_PER_ROW / 2))
    # each slice moves with A's tiles, at every level down to the fusion level (`slices.py`)
    added = [entry for x, dims, per, nbytes in slices
             for entry in riding(fz.arch, wl, mapped, A, a_dims, x, dims, per, nbytes, f)]
    working = sum(math.prod(extent[d] for d in dims) * per * nbytes for _, dims, per, nbytes in slices)
    kernel = with_traffic(kernel, added)
    own = fz.searches.free(prologue).price
    if mode == "stats":       # the pre-pass reads X alone and writes the stats, not A
        pre = scaled(own, A, prologue, a_tensor.elements / wl.sizes[wl.dim_index(row)] * STATS_BYTES_PER_ROW
                     / a_tensor.bytes, f, rename="stats")
        for x in extras:
            pre = without(pre, x, prologue, len(fz.arch.levels))
        kernel = with_flops(fz.arch, kernel, NORMALISE_FLOPS * a_tensor.elements * r_f)
        note = (f"{p.name}: row {p.reduced_dim} not whole in the tile at {fz.arch.levels[f].name}; "
                f"stats pre-pass ({STATS_BYTES_PER_ROW:.0f} B per row) then normalised as {A} is loaded")
        return kernel, (pre,), working, note
    own = without(own, A, prologue, f)     # A is never written out
    for x in main + extras:                # X read where A was; the slices loaded with it
        own = without(own, x, prologue, f, fills_at=f)
    kernel = with_flops(fz.arch, merged([kernel, own]), p.flops * (r_f - 1))
    note = (f"{p.name} applied as {A} is loaded ({r_f:.3g} loads per element)"
            + (f", its row {p.reduced_dim} whole in the tile" if p.family == "reduction" else ""))
    return kernel, (), working, note


def _fits(fz: Fusing, mapped: Mapped, working: float) -> tuple[bool, str]:
    level = fz.arch.levels[fz.level]
    if not bool(fits_at(fz.arch, fz.level, working)):
        return False, f"fused working set {working:,.0f} B over {level.name}'s {level.capacity:,.0f} B: spilled"
    gpu = fz.arch.gpu
    if gpu is not None and fz.arch.per_sm_levels() and fz.arch.per_sm_levels()[0] == fz.level:
        resident = min(gpu.max_blocks_per_sm, int(gpu.smem_per_sm // max(working, 1.0)))
        if resident < mapped.evaluation.resident:
            return False, (f"fused working set {working:,.0f} B leaves {resident} resident blocks per SM, "
                           f"the mapping assumed {mapped.evaluation.resident}: spilled")
    return True, ""

"""Einsums fused through a buffer level: two or more einsums, and the elementwise and reduction
ops between them, run as one loop nest whose outer *fused loops* run above the fusion level L
(one shared instance: an accelerator's global buffer), each iteration computing every op of the
group on its *slice* while the slices of the intermediates stay in L (the fusion of AccelForge's
FFM; Timeloop-exact prices here).

- **Fused dims.** The dims of the ops are joined through the intermediates (a producer's output
  axis is its consumers' axis of that tensor). A class of joined dims is a fused loop when it
  holds one dim of every op, none of them reduced (an einsum reducing over it needs every
  slice before its output is final: `full reduction`), and no row reduction's row (its row
  lies whole inside the slice). Every class is then a dim of every intermediate.
- **The slice.** Each fused dim gets a tile dividing its size; the choice is the one whose
  outer inputs (read once per iteration of every fused loop not indexing them: weights not
  indexed by the fused loops are fetched again each iteration) move the fewest bytes, with the
  intermediates' slices live at any one op using at most `LIVE_SHARE` of L, fewest iterations
  on a tie. An intermediate is live from its producer to its last consumer in the group.
- **The price.** Each op is mapped on its slice by the existing joint search (`OpSearches.sliced`),
  in L's capacity less the slices live at it (`reserve`, rounded up to RESERVE_STEP of it),
  and, where its output is an intermediate, its output tile final at L (no partial sums above
  it). The kernel is the slices' prices times the
  iterations, less exactly each intermediate's traffic above L (the producer's write out,
  unless the tensor is read outside the group, and the consumers' reads) and the consumers'
  fills of it into L. The producer's updates of it at L and the consumers' reads of it from L
  stay. The slice search holds its own tile of an intermediate within L besides the reserved
  whole slice: a conservative capacity check.
- **Epilogues below L.** An einsum's output read by one elementwise op of the group alone (its
  only input, over the same space, into an output no wider: applied in place on the tile, so
  no capacity beyond the einsum's own tile) is read where the einsum completes it, one level below L (`epilogues`): the
  einsum is searched with its output final there, both ops must keep it there (else it goes
  through L as above), and its entries above that level and the reader's fills there go too.
- **Legality.** The slices of the live intermediates and each op's own tiles fit L (`capacity`);
  each op keeps the intermediates it touches at L (else `tiling mismatch`).

On a GPU the fusion level is per SM, where a slice of a tensor is not shared by the kernels of
all SMs, and the L2 is managed by the hardware: this fusion is not applied there (the explicit
FlashAttention and MLP kernels are).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from ..opgraph import OpGraph
from ..tiles import within
from ..spec import Arch
from .kernels import Mapped, OpSearches
from .price import KernelPrice, fits_at, merged, scaled, times, without

LIVE_SHARE = 0.5          # of the fusion level's capacity, at most, for the live intermediate slices
RESERVE_STEP = 0.125      # the slice searches' reserve: the live slices rounded up to this share
MAX_TILINGS = 20_000      # slice tilings ranked at most (the product of the fused dims' divisors)


@dataclass(frozen=True)
class FusedDim:
    """One fused loop: its size and the name each op of the group calls it."""
    size: int
    names: tuple[tuple[int, str], ...]      # (op, dim name), every op of the group

    def name_in(self, op: int) -> str:
        return dict(self.names)[op]


@dataclass(frozen=True)
class SlicePlan:
    dims: tuple[FusedDim, ...]
    tiles: tuple[int, ...]
    iterations: int
    live: dict                              # op -> bytes of intermediate slices live at it
    refetched: tuple[tuple[str, int], ...]  # outer inputs read more than once: (tensor, times)

    def text(self, graph: OpGraph, ops) -> str:
        first = ops[0]
        loops = ", ".join(f"{d.name_in(first)} {t} of {d.size}" for d, t in zip(self.dims, self.tiles)
                          if t < d.size) or "none (the whole intermediates held)"
        again = "; ".join(f"{t} read {k}x" for t, k in self.refetched)
        return f"fused loops {loops}: {self.iterations} iteration(s)" + (f"; {again}" if again else "")


@dataclass(frozen=True)
class BufferedPrice:
    kernel: KernelPrice
    plan: SlicePlan
    members: tuple[Mapped, ...]
    epilogues: tuple[str, ...] = ()         # intermediates read one level below the fusion level


class Unfusable(Exception):
    """The group cannot be fused through the level: `kind` (full reduction, tiling mismatch,
    capacity) and the reason."""

    def __init__(self, kind: str, reason: str):
        super().__init__(reason)
        self.kind, self.reason = kind, reason


def fused_dims(graph: OpGraph, ops: tuple[int, ...]) -> tuple[list[FusedDim], list[tuple[str, str]]]:
    """The fused loops of the group, and for each class of joined dims that is not one, its
    refusal (kind, reason)."""
    parent: dict = {}

    def root(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for i in ops:
        for d in graph.ops[i].workload.dims:
            root((i, d))
        t = graph.ops[i].output
        for j in graph.consumers(t):
            if j in ops:
                for a, b in zip(graph.ops[i].output_dims, graph.ops[j].dims_of(t)):
                    parent[root((i, a))] = root((j, b))
    classes: dict = {}
    for i in ops:
        for d in graph.ops[i].workload.dims:
            classes.setdefault(root((i, d)), []).append((i, d))
    out, refused = [], []
    for members in classes.values():
        by_op = dict(members)
        first = graph.ops[members[0][0]]
        name = members[0][1]
        if len(by_op) != len(members) or set(by_op) != set(ops):
            refused.append(("tiling mismatch", f"{name} of {first.name} is not a dim of every op"))
            continue
        reducer = next((i for i, d in by_op.items() if d not in graph.ops[i].output_dims), None)
        if reducer is not None:
            refused.append(("full reduction", f"{graph.ops[reducer].name} reduces over {by_op[reducer]}: "
                            "its output needs every slice"))
            continue
        row = next((i for i, d in by_op.items() if graph.ops[i].reduced_dim == d), None)
        if row is not None:
            refused.append(("full reduction", f"{graph.ops[row].name}'s row {by_op[row]} must lie whole in the slice"))
            continue
        wl = first.workload
        out.append(FusedDim(wl.sizes[wl.dim_index(name)], tuple(sorted(by_op.items()))))
    return out, refused


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0] if n <= 1 << 16 else [n]


def plan(arch: Arch, graph: OpGraph, ops: tuple[int, ...], level: int) -> SlicePlan:
    """The slice tiling of the group (see the module docstring), or raises Unfusable."""
    if arch.levels[level].instances != 1 or arch.gpu is not None:
        raise Unfusable("tiling mismatch", f"{arch.levels[level].name} is not one buffer shared by every op's slice")
    dims, refused = fused_dims(graph, ops)
    internal = graph.internal(ops)
    capacity = arch.levels[level].capacity
    span = {t: (graph.producer(t), max(j for j in graph.consumers(t) if j in ops)) for t in internal}
    outer = [(j, t) for j in ops for t in graph.ops[j].inputs if graph.producer(t) not in ops]

    def in_slice(i: int, dim: str, tiles) -> int | None:
        for d, tile in zip(dims, tiles):
            if d.name_in(i) == dim:
                return tile
        return None

    def slice_bytes(t: str, tiles) -> float:
        p = graph.ops[graph.producer(t)]
        sizes = [in_slice(graph.producer(t), d, tiles) or p.workload.sizes[p.workload.dim_index(d)]
                 for d in p.output_dims]
        return math.prod(sizes) * graph.tensor(t).bits / 8

    best, smallest = None, None
    grids = [_divisors(d.size) for d in dims]
    for tiles in itertools.islice(itertools.product(*grids), MAX_TILINGS):
        sb = {t: slice_bytes(t, tiles) for t in internal}
        live = {k: sum(b for t, b in sb.items() if span[t][0] <= k <= span[t][1]) for k in ops}
        peak = max(live.values(), default=0.0)
        smallest = peak if smallest is None else min(smallest, peak)
        if not within(peak, LIVE_SHARE * capacity):
            continue
        counts = {d: d.size // tile for d, tile in zip(dims, tiles)}
        again = {}
        for j, t in outer:
            indexing = set(graph.ops[j].dims_of(t))
            times_read = math.prod(n for d, n in counts.items() if d.name_in(j) not in indexing)
            again[t] = max(again.get(t, 1), times_read)
        moved = sum(graph.tensor(t).bytes * k for t, k in again.items())
        iterations = math.prod(counts.values())
        key = (moved, iterations)
        if best is None or key < best[0]:
            refetched = tuple((t, k) for t, k in again.items() if k > 1)
            best = (key, SlicePlan(tuple(dims), tuple(tiles), iterations, live, refetched))
    if best is None:
        why = "; ".join(reason for _, reason in refused)
        kinds = [kind for kind, _ in refused]
        # with fused loops, the slices were shrunk as far as they go: the level is too small;
        # without, the intermediates must be held whole because of what stopped every loop
        kind = "capacity" if dims or not kinds else "full reduction" if "full reduction" in kinds else "tiling mismatch"
        raise Unfusable(kind, f"the smallest slices of the intermediates ({smallest:,.0f} B live at once) exceed "
                              f"{LIVE_SHARE:.0%} of {arch.levels[level].name}'s {capacity:,.0f} B"
                              + (f" ({why})" if why else ""))
    return best[1]


def _without_intermediates(graph: OpGraph, kernel: KernelPrice, ops, escapes, f: int,
                           deep: dict | None = None) -> KernelPrice:
    """`kernel` less each intermediate's traffic above level f (above its own level where it
    is an epilogue's input: `deep`) and its consumers' fills at that level."""
    for t in graph.internal(ops):
        at = (deep or {}).get(t, f)
        if not escapes(t):
            kernel = without(kernel, t, graph.producer(t), at)
        for j in graph.consumers(t):
            if j in ops:
                kernel = without(kernel, t, j, at, fills_at=at)
    return kernel


def epilogues(arch: Arch, graph: OpGraph, ops, f: int, escapes) -> dict:
    """Intermediates an elementwise op of the group may read where its producing einsum
    completes them, one level below f (then never written to f): {tensor: that level}. Each
    is an einsum's output read by that one op alone, its only input, over the same iteration
    space, into an output no wider (so it is applied in place on the tile there)."""
    if f + 1 >= len(arch.levels):
        return {}
    out = {}
    for t in graph.internal(ops):
        p, readers = graph.producer(t), graph.consumers(t)
        if graph.ops[p].family != "einsum" or escapes(t) or len(readers) != 1:
            continue
        e = graph.ops[readers[0]]
        # one input and an output no wider: applied in place on the producer's tile, which
        # already fits there (the producer's mapping holds it)
        if (e.family == "elementwise" and e.inputs == (t,) and e.output_elements == graph.tensor(t).elements
                and graph.tensor(e.output).bits <= graph.tensor(t).bits):
            out[t] = f + 1
    return out


def estimate(graph: OpGraph, searches: OpSearches, ops: tuple[int, ...], escapes, chosen: SlicePlan) -> KernelPrice:
    """The group's price guessed without a search: each op's own (unsliced) kernel, its outer
    inputs read as often as the plan reads them, less the intermediates' traffic. It ranks the
    groups worth searching; it is never a result."""
    f = searches.level
    again = dict(chosen.refetched)
    kernels = []
    for j in ops:
        kernel = searches.free(j).price
        for t in graph.ops[j].inputs:
            if t in again:
                kernel = scaled(kernel, t, j, again[t], f)
        kernels.append(kernel)
    deep = epilogues(searches.arch, graph, ops, f, escapes)
    return _without_intermediates(graph, merged(kernels), ops, escapes, f, deep)


def buffered_price(arch: Arch, graph: OpGraph, searches: OpSearches, ops: tuple[int, ...],
                   escapes, chosen: SlicePlan) -> BufferedPrice:
    """The group fused through the fusion level on the slices of `chosen` (module docstring),
    or raises Unfusable. `escapes(t)`: whether intermediate t is also read outside the group
    (it is then still written out by its producer)."""
    f = searches.level
    level = arch.levels[f]
    internal = graph.internal(ops)
    deep = epilogues(arch, graph, ops, f, escapes)
    members = []
    for j in ops:
        op = graph.ops[j]
        found = _member(graph, searches, chosen, j, deep.get(op.output, f) if op.output in internal else None)
        if not isinstance(found, str) and op.output in deep and not _keeps(found, deep[op.output], (op.output,)):
            found = op.output          # the producer does not hold the epilogue's input there
        if isinstance(found, str) and op.output in deep:
            del deep[op.output]        # the epilogue then reads its input at the fusion level
            found = _member(graph, searches, chosen, j, f)
        if isinstance(found, str):
            raise Unfusable("capacity", f"no mapping of {op.name} on its slice beside {chosen.live[j]:,.0f} B "
                                        f"of intermediates at {level.name} ({found})")
        touched = [t for t in internal if t == op.output or t in op.inputs]
        if not _keeps(found, f, touched):
            raise Unfusable("tiling mismatch", f"{op.name}'s slice mapping does not keep {', '.join(touched)} "
                                               f"at {level.name}")
        at_level = found.evaluation.levels[f]
        if not fits_at(arch, f, at_level.footprint_bytes + chosen.live[j]):
            raise Unfusable("capacity", f"{op.name}'s tiles ({at_level.footprint_bytes:,.0f} B) and the live "
                                        f"slices ({chosen.live[j]:,.0f} B) exceed {level.name}")
        members.append(found)
    for t, at in list(deep.items()):       # the epilogue must hold its input where it is produced
        reader = next(m for m in members if m.op == graph.consumers(t)[0])
        if not _keeps(reader, at, (t,)):
            del deep[t]
    kernel = merged([times(m.price, chosen.iterations) for m in members])
    kernel = _without_intermediates(graph, kernel, ops, escapes, f, deep)
    return BufferedPrice(kernel, chosen, tuple(members), tuple(sorted(deep)))


def _member(graph: OpGraph, searches: OpSearches, chosen: SlicePlan, j: int, complete_at: int | None):
    """Op j searched on its slice, its output final at `complete_at` (None: anywhere), the
    fusion level less the live slices at j rounded up to a RESERVE_STEP of its capacity (so
    that the same slice of an op in two groups is mostly one search)."""
    op = graph.ops[j]
    sizes = list(op.workload.sizes)
    for d, tile in zip(chosen.dims, chosen.tiles):
        sizes[op.workload.dim_index(d.name_in(j))] = tile
    step = RESERVE_STEP * searches.arch.levels[searches.level].capacity
    return searches.sliced(j, tuple(sizes), complete_at, math.ceil(chosen.live[j] / step) * step)


def _keeps(found: Mapped, level: int, tensors) -> bool:
    return all(t in found.evaluation.levels[level].tensors for t in tensors)


def search_seconds(arch: Arch, graph: OpGraph, searches: OpSearches, ops: tuple[int, ...],
                   chosen: SlicePlan) -> float:
    """A guess of the seconds the group's slice searches take: an op's share, or a tenth of it
    where its slice is the whole op and its own mapping leaves room for the live slices (its
    search then starts, and most likely ends, at that mapping: `OpSearches._own_mapping`)."""
    f = searches.level
    step = RESERVE_STEP * arch.levels[f].capacity
    total = 0.0
    for j in ops:
        op = graph.ops[j]
        share = searches.seconds_einsum if op.family == "einsum" else searches.seconds_stream
        whole = all(tile == d.size for d, tile in zip(chosen.dims, chosen.tiles))
        room = math.ceil(chosen.live[j] / step) * step + searches.free(j).evaluation.levels[f].footprint_bytes
        total += share / 10 if whole and fits_at(arch, f, room) else share
    return total


"""Fused groups: which sets of ops may share a kernel, and the price of each such kernel.

A group is legal when its ops are connected and hold at most one einsum (the *anchor*), every
other op lying on the anchor's path: one *prologue* op producing an anchor input (applied as
that input is loaded into the fusion level, recomputed with every load), and *epilogue* ops
consuming the anchor's output chain over the anchor's output iteration space (applied to the
output tile at the fusion level once it is final). A group without an einsum is one streaming
kernel over a common iteration space. Legality, each refusal with its reason:
- tilings agree: an epilogue's iteration space is the anchor's output (else `tiling mismatch`);
  the anchor's mapping completes its output tile at the fusion level (`kernels.OpSearches.fusable`);
- a row reduction is fused only with its reduced dim whole in the tile at the fusion level
  (`full reduction` when no such mapping exists); a norm before a GEMM may instead keep its
  stats pass as a kernel of its own (2 fp32 words per row) and normalise as the GEMM loads;
- the fused working set at the fusion level (the anchor's tiles times their stages, the
  epilogue's extra operand slices, a wider output buffer) fits its capacity and, on a GPU,
  keeps the resident blocks the mapping assumed; otherwise the intermediate spills and its
  round trip is priced back (`capacity/spill`): such a kernel never beats the unfused ops.
The accounting itself is `price.py`'s.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import networkx as nx

from ..mapping import level_tiles
from ..opgraph import OpGraph
from ..spec import Arch
from .attention import flash_price, match
from .buffered import Unfusable, buffered_price, estimate, plan, search_seconds
from .kernels import Mapped, OpSearches
from .mlp import match as mlp_match, mlp_price
from .price import KernelPrice, fits_at, merged, scaled, with_flops, with_traffic, without
from .slices import riding

NOT_SEARCHED = "not searched"     # a lazily priced group never searched: neither legal nor refused
STATS_BYTES_PER_ROW = 8.0        # a norm's stats pre-pass: 2 fp32 words per row
NORMALISE_FLOPS = 2.0            # a norm applied with known stats: (x - mean) * rstd, then * gamma (+ beta)


@dataclass(frozen=True)
class Refusal:
    kind: str         # full reduction, tiling mismatch, capacity/spill, two einsums, ...
    reason: str


@dataclass(frozen=True)
class GroupPrice:
    """One group's kernels (a fused kernel, and a norm's stats pre-pass where it keeps one)."""
    ops: tuple[int, ...]
    kernels: tuple[KernelPrice, ...]
    anchor: Mapped | None = None
    fused: tuple[str, ...] = ()          # intermediates that no longer leave the fusion level
    notes: tuple[str, ...] = ()
    spilled: bool = False
    tiling: str = ""                     # a kernel modelled outside the cost model (attention)
    members: tuple[Mapped, ...] = ()     # fused through a buffer level: each op's slice mapping
    iterations: int = 1                  # ... run once per iteration of the fused loops
    estimated: bool = False              # priced from the ops' own mappings, not yet searched
    working_bytes: float = 0.0           # around an einsum: what one instance holds at the fusion level

    @property
    def energy_pj(self) -> float:
        return sum(k.energy_pj for k in self.kernels)

    @property
    def cycles(self) -> float:
        return sum(k.cycles for k in self.kernels)

    def level_bytes(self, level: int) -> float:
        return sum(k.level_bytes(level) for k in self.kernels)

    def score(self, objective: str) -> float:
        if objective == "cycles":
            return self.cycles
        if objective == "bytes":
            return self.level_bytes(0)
        return self.energy_pj


class Grouper:
    """Prices groups of one graph on one arch (each group once)."""

    def __init__(self, arch: Arch, graph: OpGraph, searches: OpSearches, objective: str = "energy"):
        self.arch, self.graph, self.searches, self.objective = arch, graph, searches, objective
        self.f = searches.level
        self._priced: dict = {}
        # groups fused through a buffer level: "search" each (the default), "estimate" those not
        # in `searched` from their ops' own mappings, or refuse those not in `searched`
        self.slices = "search"
        self.searched: set = set()
        self._plans: dict = {}

    def price(self, ops) -> GroupPrice | Refusal:
        key = tuple(sorted(ops))
        if key not in self._priced:
            found = self._price(key)
            if isinstance(found, GroupPrice) and found.estimated:
                return found
            self._priced[key] = found
        return self._priced[key]

    def _price(self, ops: tuple[int, ...]) -> GroupPrice | Refusal:
        if len(ops) == 1:
            return GroupPrice(ops, (self.searches.free(ops[0]).price,))
        g = self.graph.graph
        if not nx.is_weakly_connected(g.subgraph(ops)):
            return Refusal("not connected", "the ops share no tensor")
        outside = _between(g, ops)
        if outside:
            return Refusal("dependency", f"{self.graph.ops[outside].name} needs an output of the group and "
                           "feeds it: one kernel would wait on itself")
        streams = [i for i in ops if self.graph.ops[i].family == "stream"]
        if streams:
            return Refusal("streaming op", f"{self.graph.ops[streams[0]].name} is a streaming op: its iteration "
                           "space is not its neighbours', so it runs as a kernel of its own")
        einsums = [i for i in ops if self.graph.ops[i].family == "einsum"]
        if len(einsums) > 1 and self.slices_possible():
            return self._buffered(ops)
        if len(einsums) > 1:
            found = match(self.graph, ops)
            if found is not None:
                return self._flash(ops, found)
            pair = mlp_match(self.graph, ops)
            if pair is None:
                return Refusal("two einsums", "on a GPU only attention and a GEMM -> elementwise -> GEMM pair fuse "
                               "two einsums (through a buffer level: off a GPU)")
            priced = mlp_price(self.arch, self.graph, pair, self.f, self.objective)
            if priced is None:
                return Refusal("capacity/spill", "no tiling of the two fused GEMMs fits the fusion level")
            kernel, tiling, note, _ = priced
            return GroupPrice(ops, (kernel,), None, tuple(self._internal(ops)), (note,), tiling=tiling)
        if not einsums:
            return self._streaming(ops)
        return self._anchored(ops, einsums[0])

    # ------------------------------------------------------------------ helpers

    def _escapes(self, tensor: str, ops) -> bool:
        """Whether `tensor` must still be written out: a result, or read by an op outside."""
        return tensor in self.graph.outputs or any(j not in ops for j in self.graph.consumers(tensor))

    def _internal(self, ops) -> list[str]:
        return [self.graph.ops[i].output for i in ops
                if any(j in ops for j in self.graph.consumers(self.graph.ops[i].output))]

    def _fuse_intermediates(self, kernel: KernelPrice, ops, skip=()) -> KernelPrice:
        """Each intermediate produced and read inside the group stays at the fusion level: its
        write out (unless it escapes) and its in-group reads back are removed (`skip`: those
        the prologue accounting handles)."""
        for t in self._internal(ops):
            if t in skip:
                continue
            producer = self.graph.producer(t)
            if not self._escapes(t, ops):
                kernel = without(kernel, t, producer, self.f)
            for j in self.graph.consumers(t):
                if j in ops:
                    kernel = without(kernel, t, j, self.f, fills_at=self.f)
        return kernel

    def _row_fits(self, i: int) -> bool:
        op = self.graph.ops[i]
        row = op.workload.sizes[op.workload.dim_index(op.reduced_dim)]
        word_bytes = sum(t.bytes_per_word for t in op.workload.tensors)
        return bool(fits_at(self.arch, self.f, row * word_bytes))

    def _flash(self, ops, found) -> GroupPrice | Refusal:
        priced = flash_price(self.arch, self.graph, found, self.f, self.objective)
        if priced is None:
            return Refusal("capacity/spill", "no FlashAttention tiling fits the fusion level")
        kernel, choice = priced
        note = (f"FlashAttention-style online softmax: Bi {choice.block_i}, Bj {choice.block_j}, "
                f"{choice.stages} stage(s), {choice.blocks_per_sm} block(s) per SM; best of {choice.feasible} "
                f"fitting tilings of {choice.priced}, all priced")
        return GroupPrice(ops, (kernel,), None, tuple(self._internal(ops)), (note,),
                          tiling=f"Bi{choice.block_i} Bj{choice.block_j} s{choice.stages}")

    def _buffered(self, ops) -> GroupPrice | Refusal:
        """Several einsums fused through the fusion level (`buffered.py`)."""
        if self.slices != "search" and ops not in self.searched:
            try:
                chosen = self._plan(ops)
            except Unfusable as exc:
                return Refusal(exc.kind, exc.reason)
            return self._lazy(ops, lambda: estimate(self.graph, self.searches, ops, self._escapes_from(ops), chosen),
                              f"estimate: {chosen.text(self.graph, ops)}")
        try:
            found = buffered_price(self.arch, self.graph, self.searches, ops, self._escapes_from(ops), self._plan(ops))
        except Unfusable as exc:
            return Refusal(exc.kind, exc.reason)
        level = self.arch.levels[self.f].name
        note = f"fused through {level}: {found.plan.text(self.graph, ops)}; each op mapped on its slice"
        if found.epilogues:
            below = self.arch.levels[self.f + 1].name
            note += (f"; {', '.join(found.epilogues)} read by its elementwise consumer where its producer completes "
                     f"it, at {below} (never written to {level})")
        tiling = " ".join(f"{d.name_in(ops[0])}{t}" for d, t in zip(found.plan.dims, found.plan.tiles))
        return GroupPrice(ops, (found.kernel,), None, tuple(self._internal(ops)), (note,),
                          tiling=f"slice {tiling or 'whole'} x{found.plan.iterations}", members=found.members,
                          iterations=found.plan.iterations)

    def slice_plan(self, ops):
        """The slice plan a group fused through the buffer level is priced with."""
        return self._plan(ops)

    def priced(self) -> dict:
        """Every group priced so far: its ops -> its `GroupPrice` or `Refusal`."""
        return dict(self._priced)

    def forget(self) -> None:
        """Drop every group's price (the searches' answers changed: `OpSearches.polish`)."""
        self._priced.clear()

    def search_seconds(self, ops) -> float:
        """A guess of the seconds a group not yet searched would take to search."""
        if not self.slices_possible() or sum(self.graph.ops[i].family == "einsum" for i in ops) < 2:
            return self.searches.seconds_einsum            # one fusable search of its einsum
        return search_seconds(self.arch, self.graph, self.searches, ops, self._plan(ops))

    def slices_possible(self) -> bool:
        """Whether groups of several einsums are fused through the fusion level here."""
        return self.arch.gpu is None and self.arch.levels[self.f].instances == 1

    def _lazy(self, ops, guess, note: str) -> GroupPrice | Refusal:
        """A group whose price needs searches not yet run (`slices` not "search"): its estimate
        (`guess()`, a kernel) or, once only searched groups are chosen, a refusal."""
        if self.slices != "estimate":
            return Refusal(NOT_SEARCHED, "its estimate from its ops' own mappings did not place it in the best "
                           "grouping, so it was not searched")
        return GroupPrice(ops, (guess(),), None, tuple(self._internal(ops)), (note,), estimated=True)

    def _plan(self, ops):
        """The group's slice plan (`buffered.plan`), once per group; raises Unfusable."""
        if ops not in self._plans:
            try:
                self._plans[ops] = plan(self.arch, self.graph, ops, self.f)
            except Unfusable as exc:
                self._plans[ops] = exc
        if isinstance(self._plans[ops], Unfusable):
            raise self._plans[ops]
        return self._plans[ops]

    def _escapes_from(self, ops):
        return lambda t: self._escapes(t, ops)

    # ------------------------------------------------------------------ streaming groups

    def _streaming(self, ops) -> GroupPrice | Refusal:
        shapes = {self.graph.ops[i].output_elements for i in ops}
        if len(shapes) > 1:
            return Refusal("tiling mismatch", "the ops' iteration spaces differ")
        for i in ops:
            if self.graph.ops[i].family == "reduction" and not self._row_fits(i):
                return Refusal("full reduction", f"the row of {self.graph.ops[i].name} does not fit "
                               f"in {self.arch.levels[self.f].name}")
        # a streaming kernel's traffic does not depend on its tile, which can always be small
        # enough for the group's tensors to share the fusion level: no capacity check
        kernel = merged([self.searches.free(i).price for i in ops])
        return GroupPrice(ops, (self._fuse_intermediates(kernel, ops),), fused=tuple(self._internal(ops)))

    # ------------------------------------------------------------------ groups around an einsum

    def _to_anchor(self, j: int, a: int, dim: str, ops) -> str | None:
        """The anchor's name of op j's dim `dim`, followed back along the in-group chain."""
        graph = self.graph
        while j != a:
            op = graph.ops[j]
            chain = [t for t in op.inputs if graph.producer(t) in ops]
            if not chain or dim not in op.dims_of(chain[0]):
                return None
            producer = graph.producer(chain[0])
            dim = graph.ops[producer].dims_of(chain[0])[op.dims_of(chain[0]).index(dim)]
            j = producer
        return dim

    def _anchored(self, ops, a: int) -> GroupPrice | Refusal:
        graph, g = self.graph, self.graph.graph
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
                dim = self._to_anchor(j, a, op.reduced_dim, ops)
                if dim is None:
                    return Refusal("tiling mismatch", f"{op.name}'s row is not a dim of {anchor.name}'s output")
                whole.add(dim)
        prologue = up[0] if up else None
        candidates = [(whole, "plain")]
        if prologue is not None:
            p = graph.ops[prologue]
            if self._escapes(p.output, ops):
                return Refusal("read by another kernel", f"{p.output} is also read outside the group")
            if p.family == "reduction":
                axis = p.output_dims.index(p.reduced_dim)
                row_dim = anchor.dims_of(p.output)[axis]
                candidates = [(whole | {row_dim}, "in-row"), (whole, "stats")]
        if self.slices != "search" and ops not in self.searched and any(down or w for w, _ in candidates):
            return self._lazy(ops, lambda: self._fuse_intermediates(
                merged([self.searches.free(i).price for i in ops]), ops), "estimate: its ops' own kernels")
        results = [self._anchored_price(ops, a, down, prologue, w, mode) for w, mode in candidates]
        priced = [r for r in results if isinstance(r, GroupPrice)]
        if not priced:
            return results[0]
        best = min(priced, key=lambda r: r.score(self.objective))
        if len(results) == 2 and best is results[1]:          # the norm's stats pre-pass won: say why
            in_row = results[0]
            why = (in_row.reason if isinstance(in_row, Refusal) else
                   f"the mapping holding it costs {in_row.score(self.objective):.4g} against "
                   f"{best.score(self.objective):.4g} ({self.objective})")
            best = replace(best, notes=best.notes + (f"the whole row in the tile: {why}",))
        return best

    def _anchored_price(self, ops, a, down, prologue, whole, mode) -> GroupPrice | Refusal:
        """The group on the anchor's best fusable mapping; where its working set does not fit,
        the better of that mapping spilled and the anchor searched again with the extra bytes
        kept free at the fusion level (a smaller tile, which the anchor's traffic pays for)."""
        anchor = self.graph.ops[a]
        if down or whole:
            mapped = self.searches.fusable(a, tuple(sorted(whole)))
        else:
            mapped = self.searches.free(a)
        if isinstance(mapped, str):
            kind = "full reduction" if whole else "tiling mismatch"
            what = f"with {', '.join(sorted(whole))} whole in the tile at " if whole else "completing its output tile at "
            return Refusal(kind, f"no mapping of {anchor.name} {what}{self.arch.levels[self.f].name} ({mapped})")
        first, extra = self._on_mapping(ops, a, down, prologue, mode, mapped)
        if not first.spilled:
            return first
        shrunk = self.searches.fusable(a, tuple(sorted(whole)), reserve=extra)
        if isinstance(shrunk, str):
            return first
        second, _ = self._on_mapping(ops, a, down, prologue, mode, shrunk)
        if second.spilled:
            return first
        second = replace(second, notes=second.notes + (f"{anchor.name}'s tile shrunk to keep {extra:,.0f} B free "
                                                       f"at {self.arch.levels[self.f].name} for the fused ops",))
        return min((first, second), key=lambda r: r.score(self.objective))

    def _on_mapping(self, ops, a, down, prologue, mode, mapped: Mapped) -> tuple[GroupPrice, float]:
        """The group priced on one mapping of the anchor, and the bytes it adds at the fusion
        level beyond the anchor's own tiles."""
        graph = self.graph
        added, working, notes = self._epilogue_operands(ops, a, down, mapped)
        members = [mapped.price] + [self.searches.free(j).price for j in down]
        kernel, pre = merged(members), ()
        for j in down:
            for t in graph.ops[j].inputs:
                if graph.producer(t) not in ops:
                    kernel = without(kernel, t, j, self.f, fills_at=self.f)
        kernel = with_traffic(kernel, added)
        skip = ()
        if prologue is not None:
            kernel, pre, extra_working, note = self._prologue(kernel, ops, a, prologue, mapped, mode)
            working += extra_working
            notes.append(note)
            skip = (graph.ops[prologue].output,)
        fits, why = self._fits(mapped, working)
        extra = working - mapped.evaluation.levels[self.f].footprint_bytes
        if not fits:
            unfused = merged(members + ([self.searches.free(prologue).price] if prologue is not None else []))
            return GroupPrice(ops, (with_traffic(unfused, added),), mapped, (), tuple(notes) + (why,), True,
                              working_bytes=working), extra
        kernel = self._fuse_intermediates(kernel, ops, skip)
        fused = tuple(t for t in self._internal(ops))
        return GroupPrice(ops, pre + (kernel,), mapped, fused, tuple(notes), working_bytes=working), extra

    def _epilogue_operands(self, ops, a, down, mapped: Mapped):
        """Loads of the epilogue's extra operands (a bias slice, a residual tile) with the
        anchor's output tiles (`slices.py`), and the fused working set at the fusion level."""
        graph, wl = self.graph, self.graph.ops[a].workload
        tile = level_tiles(mapped.mapping, len(wl.dims))[self.f]
        size = {d: wl.sizes[wl.dim_index(d)] for d in wl.dims}
        extent = {d: min(tile[wl.dim_index(d)], size[d]) for d in wl.dims}
        out_dims = graph.ops[a].output_dims
        added, notes = [], []
        working = mapped.evaluation.levels[self.f].footprint_bytes
        out_bits = graph.tensor(graph.ops[a].output).bits
        for j in down:
            op = graph.ops[j]
            for t in op.inputs:
                if graph.producer(t) in ops:
                    continue
                dims = [self._to_anchor(j, a, d, ops) for d in op.dims_of(t)]
                word_bytes = graph.tensor(t).bits / 8
                added += riding(self.arch, wl, mapped, graph.ops[a].output, out_dims, t, dims, 1, word_bytes,
                                self.f, output=True)
                working += math.prod(extent[d] for d in dims) * word_bytes
            if graph.tensor(op.output).bits > out_bits:
                working += math.prod(extent[d] for d in out_dims) * (graph.tensor(op.output).bits - out_bits) / 8
        return added, working, notes

    def _prologue(self, kernel, ops, a, prologue, mapped: Mapped, mode):
        """The prologue applied as the anchor loads its input A into the fusion level: the
        anchor reads the prologue's input X where it read A (scaled by their element sizes),
        the prologue's other operands move with A's tiles (`slices.py`) and its FLOPs are
        recomputed with every load. A norm without its row whole in the tile keeps a stats
        pre-pass kernel (2 fp32 words per row, X its only input) and normalises as A is
        loaded, its rows' stats moving with A's tiles too."""
        graph, p = self.graph, self.graph.ops[prologue]
        A, f = p.output, self.f
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
                 for entry in riding(self.arch, wl, mapped, A, a_dims, x, dims, per, nbytes, f)]
        working = sum(math.prod(extent[d] for d in dims) * per * nbytes for _, dims, per, nbytes in slices)
        kernel = with_traffic(kernel, added)
        own = self.searches.free(prologue).price
        if mode == "stats":       # the pre-pass reads X alone and writes the stats, not A
            pre = scaled(own, A, prologue, a_tensor.elements / wl.sizes[wl.dim_index(row)] * STATS_BYTES_PER_ROW
                         / a_tensor.bytes, f, rename="stats")
            for x in extras:
                pre = without(pre, x, prologue, len(self.arch.levels))
            kernel = with_flops(self.arch, kernel, NORMALISE_FLOPS * a_tensor.elements * r_f)
            note = (f"{p.name}: row {p.reduced_dim} not whole in the tile at {self.arch.levels[f].name}; "
                    f"stats pre-pass ({STATS_BYTES_PER_ROW:.0f} B per row) then normalised as {A} is loaded")
            return kernel, (pre,), working, note
        own = without(own, A, prologue, f)     # A is never written out
        for x in main + extras:                # X read where A was; the slices loaded with it
            own = without(own, x, prologue, f, fills_at=f)
        kernel = with_flops(self.arch, merged([kernel, own]), p.flops * (r_f - 1))
        note = (f"{p.name} applied as {A} is loaded ({r_f:.3g} loads per element)"
                + (f", its row {p.reduced_dim} whole in the tile" if p.family == "reduction" else ""))
        return kernel, (), working, note

    def _fits(self, mapped: Mapped, working: float) -> tuple[bool, str]:
        level = self.arch.levels[self.f]
        if not bool(fits_at(self.arch, self.f, working)):
            return False, f"fused working set {working:,.0f} B over {level.name}'s {level.capacity:,.0f} B: spilled"
        gpu = self.arch.gpu
        if gpu is not None and self.arch.per_sm_levels() and self.arch.per_sm_levels()[0] == self.f:
            resident = min(gpu.max_blocks_per_sm, int(gpu.smem_per_sm // max(working, 1.0)))
            if resident < mapped.evaluation.resident:
                return False, (f"fused working set {working:,.0f} B leaves {resident} resident blocks per SM, "
                               f"the mapping assumed {mapped.evaluation.resident}: spilled")
        return True, ""



def _between(g: nx.DiGraph, ops) -> int | None:
    """An op outside `ops` on a path from the group back into it (the group is not convex), or None."""
    after = set().union(*(nx.descendants(g, i) for i in ops)) - set(ops)
    before = set().union(*(nx.ancestors(g, i) for i in ops)) - set(ops)
    both = sorted(after & before)
    return both[0] if both else None

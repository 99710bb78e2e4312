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

import networkx as nx

from ..opgraph import OpGraph
from ..spec import Arch
from .anchored import anchored, shape
from .attention import flash_price, match
from .buffered import Unfusable, buffered_price, estimate, plan, search_seconds
from .group_price import NOT_SEARCHED, Fusing, GroupPrice, Refusal
from .kernels import OpSearches
from .mlp import match as mlp_match, mlp_price
from .price import fits_at, merged


class Grouper:
    """Prices groups of one graph on one arch (each group once)."""

    def __init__(self, arch: Arch, graph: OpGraph, searches: OpSearches, objective: str = "energy"):
        self.arch, self.graph, self.searches, self.objective = arch, graph, searches, objective
        self.f = searches.level
        self.fusing = Fusing(arch, graph, searches, objective)
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
            return GroupPrice(ops, (kernel,), None, tuple(self.graph.internal(ops)), (note,), tiling=tiling)
        if not einsums:
            return self._streaming(ops)
        return self._anchored(ops, einsums[0])

    # ------------------------------------------------------------------ helpers

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
        return GroupPrice(ops, (kernel,), None, tuple(self.graph.internal(ops)), (note,),
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
        return GroupPrice(ops, (found.kernel,), None, tuple(self.graph.internal(ops)), (note,),
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
        return GroupPrice(ops, (guess(),), None, tuple(self.graph.internal(ops)), (note,), estimated=True)

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
        return lambda t: self.fusing.escapes(t, ops)

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
        return GroupPrice(ops, (self.fusing.fuse_intermediates(kernel, ops),), fused=tuple(self.graph.internal(ops)))

    # ------------------------------------------------------------------ groups around an einsum

    # ------------------------------------------------------------------ groups around an einsum

    def _anchored(self, ops, a: int) -> GroupPrice | Refusal:
        """A group around einsum `a` (`anchored.py`); estimated from its ops' own kernels where
        pricing it needs a search not yet allowed (`slices`)."""
        found = shape(self.fusing, ops, a)
        if isinstance(found, Refusal):
            return found
        if self.slices != "search" and ops not in self.searched and found.needs_search:
            return self._lazy(ops, lambda: self.fusing.fuse_intermediates(
                merged([self.searches.free(i).price for i in ops]), ops), "estimate: its ops' own kernels")
        return anchored(self.fusing, ops, found)


def _between(g: nx.DiGraph, ops) -> int | None:
    """An op outside `ops` on a path from the group back into it (the group is not convex), or None."""
    after = set().union(*(nx.descendants(g, i) for i in ops)) - set(ops)
    before = set().union(*(nx.ancestors(g, i) for i in ops)) - set(ops)
    both = sorted(after & before)
    return both[0] if both else None

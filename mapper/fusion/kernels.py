"""Each op's kernel found by the existing joint search: an op on its own (the unfused price), and
an einsum under the constraints a fused group puts on it.

- An einsum op is searched on the default mapspace; an elementwise map or row reduction (its
  streaming einsum, `opgraph.py`) on the `unaligned` one (it runs no tensor-core fragment).
- A *fusable* kernel of an einsum completes its output tile at the fusion level: no factor of a
  reduction dim (a dim its output lacks) above that level, temporal or spatial, so the tile is
  final when it leaves the level and an epilogue may run on it there (a split-k mapping whose
  partial sums meet in L2 or DRAM cannot carry one). `whole` dims also span their full size in
  the tile at the fusion level (a softmax's row after QK^T, a layernorm's row before a GEMM).
- Each search gets a share of the command's context (`SearchContext.share`): one deadline,
  one Ctrl-C, one count of mappings priced.

The fusion level is where a fused kernel keeps its intermediate tile: on a GPU the per-SM
level (shared memory; a hardware-managed L2 runs no code), elsewhere the level below the
outermost one.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from types import MappingProxyType

from ..constraints import LevelConstraints, Range
from ..cost import Evaluation, evaluate
from ..errors import MapperError, SpecError
from ..load import load_constraints
from ..mapping import Mapping
from ..mapspace import Mapspace
from ..opgraph import OpGraph
from ..search import SearchContext, make_strategy, parse_objective
from ..search.warm import admit
from ..spec import Arch
from .price import KernelPrice, from_evaluation
from .seeds import carried

# the joint search's options for every op's search: no CP-SAT proposals. On a work clock they are
# solved before the walk, in line (a thread racing the walk would make the result depend on the
# load), and on the GPT-3 layer's study (docs/RESULTS.md) they took more than half its CPU
# seconds for the same kernels and the same energy
JOINT_OPTIONS = MappingProxyType({"seed": 0, "cpsat_seconds": 0.0})


def fusion_level(arch: Arch) -> int:
    """The level a fused kernel holds its intermediate tiles at (see the module docstring)."""
    gpu = arch.per_sm_levels()
    if gpu is not None:
        return gpu[0]
    return min(1, len(arch.levels) - 1)


@dataclass(frozen=True)
class Mapped:
    """One op's kernel: the search's best mapping, its evaluation and price, and whether the
    search proved it optimal (else its gap, when known)."""
    op: int
    whole: tuple[str, ...] | None      # None: unconstrained; else fusable, with these dims whole
    mapping: Mapping
    evaluation: Evaluation
    price: KernelPrice
    optimal: bool
    gap: float | None
    seconds: float
    evaluated: int
    reused_from: int | None = None       # the op whose identical search this is (its signature's)
    sizes: tuple[int, ...] | None = None  # the slice's sizes (a buffer-level fused group), else None
    at: int | None = None                # where the output completes, when not the fusion level


class OpSearches:
    """The searches of one fuse command, each run once (kept per op and constraint)."""

    def __init__(self, arch: Arch, graph: OpGraph, context: SearchContext, seconds_einsum: float,
                 seconds_stream: float, objective: str = "edp", extra_levels: tuple = (),
                 workers: int | None = None):
        self.arch, self.graph, self.context = arch, graph, context
        self.workers = workers               # cores each joint search may fork onto (None: the machine's)
        self.extra_levels = extra_levels     # (level key, LevelConstraints) added to every op's space
        self.seconds_einsum, self.seconds_stream = seconds_einsum, seconds_stream
        self.objective = parse_objective(objective, arch)
        self.level = fusion_level(arch)
        self._found: dict = {}
        self._by_signature: dict = {}       # the answer of each distinct search
        self._shared_of: dict = {}          # each (op, constraints) key -> its search's signature

    def free(self, i: int) -> Mapped:
        """Op i on its own, unconstrained (raises MapperError when it has no valid mapping)."""
        found = self._run(i, None)
        if isinstance(found, str):
            raise MapperError(f"op {self.graph.ops[i].name}: {found}")
        return found

    def fusable(self, i: int, whole: tuple[str, ...] = (), reserve: float = 0.0) -> Mapped | str:
        """Einsum op i with its output tile complete at the fusion level (and `whole` dims
        whole there), or the reason there is none. `reserve`: bytes of the fusion level kept
        free for what the fused ops add (its capacity, and a GPU's shared memory per SM, less
        that); the mapping found is priced on the real architecture."""
        return self._run(i, tuple(sorted(whole)), float(reserve))

    def sliced(self, i: int, sizes: tuple[int, ...], complete_at: int | None, reserve: float) -> Mapped | str:
        """Op i on a slice of its iteration space (`sizes`, its workload's dims), with `reserve`
        bytes of the fusion level held by the group's intermediate slices, and its output tile
        final at level `complete_at` (None: anywhere); the search starts from its free mapping
        shrunk to the slice where the space admits it."""
        at = None if complete_at in (None, self.level) else complete_at
        return self._run(i, None if complete_at is None else (), float(reserve), tuple(sizes), at)

    def _run(self, i: int, whole, reserve: float = 0.0, sizes: tuple[int, ...] | None = None, at=None):
        key = (i, whole, reserve, sizes, at)
        if key not in self._found:
            wl = self._workload(i, sizes)
            shared = (signature(wl), self.graph.ops[i].family == "einsum",
                      None if whole is None else tuple(wl.dim_index(d) for d in whole), reserve, sizes is not None, at)
            self._shared_of[key] = shared
            first = self._by_signature.get(shared)
            if first is None:
                self._found[key] = self._search(i, whole, reserve, wl, sizes, at)
                self._by_signature[shared] = self._found[key]
            else:
                self._found[key] = self._reuse(first, i, wl)
        return self._found[key]

    def _workload(self, i: int, sizes):
        wl = self.graph.ops[i].workload
        return wl if sizes is None else dataclasses.replace(wl, sizes=tuple(sizes))

    def _reuse(self, first, i: int, wl):
        """An identical search's answer (the same sizes, projections, precisions and
        constraints: only the names differ) priced as op i's."""
        if isinstance(first, str):
            return first
        ev = evaluate(self.arch, wl, first.mapping)
        return dataclasses.replace(first, op=i, evaluation=ev, price=self._price(i, wl, ev), reused_from=first.op)

    def _reserved(self, reserve: float) -> Arch:
        levels = list(self.arch.levels)
        levels[self.level] = dataclasses.replace(levels[self.level], capacity=levels[self.level].capacity - reserve)
        gpu = self.arch.gpu
        if gpu is not None:
            gpu = dataclasses.replace(gpu, smem_per_sm=gpu.smem_per_sm - reserve)
        return dataclasses.replace(self.arch, levels=tuple(levels), gpu=gpu)

    def _space(self, i: int, whole, reserve: float, wl, at=None) -> Mapspace:
        """Op i's space on workload `wl`: its family's constraints, the fusable ones where
        `whole` is given (completing at level `at`, by default the fusion level), the extra
        levels, the fusion level less `reserve`."""
        op = self.graph.ops[i]
        arch = self._reserved(reserve) if reserve else self.arch
        constraints = load_constraints("default" if op.family == "einsum" else "unaligned")
        if whole is not None:
            constraints = dataclasses.replace(constraints, levels=self._fusable_levels(wl, whole, at or self.level))
        if self.extra_levels:
            constraints = dataclasses.replace(constraints, levels=self._with_extra(constraints.levels))
        return Mapspace(arch, wl, constraints)

    def _search(self, i: int, whole, reserve: float, wl, sizes, at=None):
        op = self.graph.ops[i]
        seconds = self.seconds_einsum if op.family == "einsum" else self.seconds_stream
        try:
            space = self._space(i, whole, reserve, wl, at)
            own = self._own_mapping(i, whole, wl, sizes, space, at)
            if own is not None:
                return own
            strategy = make_strategy("joint", {**JOINT_OPTIONS, "incumbents": self._seeds(i, wl, sizes),
                                               "workers": self.workers}, where="fuse")
            result = strategy.run(space, self.objective, self.context.share(seconds))
        except SpecError as exc:
            if exc.where in (self.graph.file, self.arch.file):
                raise           # the input's fault (a size too large to split, a keep naming nothing): said first
            return f"no mapping: {exc}"
        except MapperError as exc:
            return f"no mapping: {exc}"
        ev = evaluate(self.arch, wl, result.mapping) if reserve else result.evaluation
        output = wl.tensors[wl.output].name
        if whole is not None and not completes_output(ev, output, at or self.level):
            return f"its best mapping under the constraints reads partial sums of {output} back above the fusion level"
        return Mapped(i, whole, result.mapping, ev, self._price(i, wl, ev), bool(result.optimal),
                      result.gap, result.seconds, result.evaluated, sizes=sizes, at=at)

    def _price(self, i: int, wl, ev: Evaluation) -> KernelPrice:
        op = self.graph.ops[i]
        return from_evaluation(self.arch, ev, {t.name: t.bytes_per_word for t in wl.tensors},
                               op.flops * wl.macs / op.workload.macs, owner=i)

    def polish(self) -> int:
        """Each answer not proven optimal (one per signature) replaced by a better mapping carried
        to it from another einsum's answer (`seeds.carried`) where its space holds one, and every
        op reusing it priced again: on a large array one search may end far above what another
        einsum's answer gives it. A replaced answer is no longer proven (a carried mapping brings
        no bound). Returns how many answers changed."""
        changed = 0
        for shared, found in list(self._by_signature.items()):
            if not isinstance(found, Mapped) or found.optimal or self.graph.ops[found.op].family != "einsum":
                continue
            wl = self._workload(found.op, found.sizes)
            try:
                space = self._space(found.op, found.whole, shared[3], wl, found.at)
            except MapperError:
                continue
            best = (self._score(found.evaluation), None, None)
            for source in list(self._by_signature.values()):
                if source is found or not isinstance(source, Mapped):
                    continue
                mapping = carried(source.mapping, self._workload(source.op, source.sizes), wl)
                if mapping is None or admit(space, mapping) is None:
                    continue
                ev = evaluate(self.arch, wl, mapping)
                if found.whole is not None and not completes_output(ev, wl.tensors[wl.output].name,
                                                                    found.at or self.level):
                    continue
                if self._score(ev) < best[0]:
                    best = (self._score(ev), mapping, ev)
            if best[1] is not None:
                self._by_signature[shared] = dataclasses.replace(
                    found, mapping=best[1], evaluation=best[2], price=self._price(found.op, wl, best[2]),
                    optimal=False, gap=None)
                changed += 1
        if changed:
            for key, shared in self._shared_of.items():
                first = self._by_signature[shared]
                self._found[key] = first if not isinstance(first, Mapped) or first.op == key[0] else \
                    self._reuse(first, key[0], self._workload(key[0], key[3]))
        return changed

    def _score(self, ev: Evaluation) -> float:
        kind = self.objective.kind
        if kind == "energy":
            return ev.energy_pj
        if kind in ("cycles", "delay_energy"):
            return ev.cycles
        if kind == "bytes":
            return ev.levels[self.objective.level].traffic_bytes
        return ev.energy_pj * ev.cycles

    def _seeds(self, i: int, wl, sizes) -> tuple:
        """Starting points offered to op i's search (the search admits those its space holds):
        its free mapping shrunk to the slice, and every other einsum's mapping found so far
        carried to it by role (`seeds.carried`)."""
        out = []
        if sizes is not None:
            out.append(shrunk(self.free(i).mapping, self.graph.ops[i].workload, wl))
        for found in self._by_signature.values():
            if isinstance(found, Mapped):
                source = self._workload(found.op, found.sizes)
                out.append(carried(found.mapping, source, wl))
        return tuple(m for m in out if m is not None)

    def _own_mapping(self, i: int, whole, wl, sizes, space: Mapspace, at=None) -> Mapped | None:
        """Op i's own (free) mapping where a constrained search of the same sizes would start
        from it: the space holds it, and the free search's space held this one, so no mapping
        of it is known to be better and the free search's bound holds here too. None where the
        space does not hold it (or this is the free search)."""
        op = self.graph.ops[i]
        if (whole is None and sizes is None) or wl.sizes != op.workload.sizes:
            return None
        free = self.free(i)
        if admit(space, free.mapping) is None:
            return None
        ev = evaluate(self.arch, wl, free.mapping)
        if whole is not None and not completes_output(ev, wl.tensors[wl.output].name, at or self.level):
            return None
        return dataclasses.replace(free, whole=whole, evaluation=ev, sizes=sizes, reused_from=i, at=at)

    def _with_extra(self, levels: tuple) -> tuple:
        """`levels` and the extra levels (a `--mapspace` preset's) for the keys it does not set:
        fusion's own constraints win where both constrain a level."""
        taken = {key for key, _ in levels}
        return tuple(levels) + tuple((key, lc) for key, lc in self.extra_levels if key not in taken)

    def _fusable_levels(self, wl, whole, level: int) -> tuple:
        """Constraints under which the output tile is final at the fusion level: no reduction
        factor at the levels above it but the one right above, where the reduction loops are
        innermost (the tile below stays resident across them: one write, no partial sums read
        back) and none is spatial (no split-k across instances)."""
        output_dims = wl.tensors[wl.output].dims
        reduction = [wl.dims[d] for d in range(len(wl.dims)) if d not in output_dims]
        one = tuple((d, Range(1, 1)) for d in reduction)
        levels = []
        for lv in range(level):
            temporal = () if lv == level - 1 else one
            innermost = tuple(reduction) if lv == level - 1 and reduction else None
            levels.append((self.arch.levels[lv].name, LevelConstraints(temporal=temporal, spatial=one,
                                                                      innermost_order=innermost)))
        if whole:
            tile = tuple((d, Range(wl.sizes[wl.dim_index(d)])) for d in whole)
            levels.append((self.arch.levels[level].name, LevelConstraints(tile=tile)))
        return tuple(levels)


def completes_output(ev: Evaluation, output: str, level: int) -> bool:
    """Whether the output's tiles leave `level` final: no partial sum is read back at any level
    above it (its words there are written, never read)."""
    return all(lc.tensors[output].reads == 0 for lc in ev.levels[:level] if output in lc.tensors)


def signature(wl) -> tuple:
    """What a search of `wl` depends on but names: its sizes and each tensor's projection (by
    dim index), role and precision. Two einsums with one signature (a layer's V, K and Q
    projections) have the same mappings at the same costs."""
    return wl.sizes, tuple((t.axes, t.is_output, t.bits) for t in wl.tensors)


def shrunk(mapping: Mapping, full, sliced) -> Mapping | None:
    """`mapping` of workload `full` made a mapping of `sliced` (the same dims, each size a
    divisor of full's): each dim's loops divided by its ratio, outermost temporal loops first,
    then spatial ones; None where the loop bounds do not absorb the ratio."""
    ratio = {d: f // s for d, (f, s) in enumerate(zip(full.sizes, sliced.sizes)) if f != s}
    if any(f % s for f, s in zip(full.sizes, sliced.sizes)):
        return None
    levels = [[list(map(list, lm.temporal)), list(map(list, lm.spatial))] for lm in mapping.levels]
    for kind in (0, 1):
        for lv in levels:
            for loop in lv[kind]:
                d = loop[0]
                if ratio.get(d, 1) > 1:
                    g = math.gcd(loop[1], ratio[d])
                    loop[1] //= g
                    ratio[d] //= g
    if any(r > 1 for r in ratio.values()):
        return None
    return Mapping(tuple(dataclasses.replace(lm, temporal=tuple(map(tuple, lv[0])), spatial=tuple(map(tuple, lv[1])))
                         for lm, lv in zip(mapping.levels, levels)))

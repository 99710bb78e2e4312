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
from dataclasses import dataclass

from ..constraints import LevelConstraints, Range
from ..cost import Evaluation, evaluate
from ..errors import MapperError
from ..load import load_constraints
from ..mapping import Mapping
from ..mapspace import Mapspace
from ..opgraph import OpGraph
from ..search import SearchContext, make_strategy, parse_objective
from ..spec import Arch
from .price import KernelPrice, from_evaluation


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


class OpSearches:
    """The searches of one fuse command, each run once (kept per op and constraint)."""

    def __init__(self, arch: Arch, graph: OpGraph, context: SearchContext, seconds_einsum: float,
                 seconds_stream: float, objective: str = "edp", extra_levels: tuple = ()):
        self.arch, self.graph, self.context = arch, graph, context
        self.extra_levels = extra_levels     # (level key, LevelConstraints) added to every op's space
        self.seconds_einsum, self.seconds_stream = seconds_einsum, seconds_stream
        self.objective = parse_objective(objective, arch)
        self.level = fusion_level(arch)
        self._found: dict = {}

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

    def _run(self, i: int, whole, reserve: float = 0.0):
        key = (i, whole, reserve)
        if key not in self._found:
            self._found[key] = self._search(i, whole, reserve)
        return self._found[key]

    def _reserved(self, reserve: float) -> Arch:
        levels = list(self.arch.levels)
        levels[self.level] = dataclasses.replace(levels[self.level], capacity=levels[self.level].capacity - reserve)
        gpu = self.arch.gpu
        if gpu is not None:
            gpu = dataclasses.replace(gpu, smem_per_sm=gpu.smem_per_sm - reserve)
        return dataclasses.replace(self.arch, levels=tuple(levels), gpu=gpu)

    def _search(self, i: int, whole, reserve: float = 0.0):
        op = self.graph.ops[i]
        wl = op.workload
        arch = self._reserved(reserve) if reserve else self.arch
        constraints = load_constraints("default" if op.family == "einsum" else "unaligned")
        seconds = self.seconds_einsum if op.family == "einsum" else self.seconds_stream
        if whole is not None:
            constraints = dataclasses.replace(constraints, levels=self._fusable_levels(wl, whole))
        if self.extra_levels:
            constraints = dataclasses.replace(constraints, levels=self._with_extra(constraints.levels))
        try:
            space = Mapspace(arch, wl, constraints)
            space.stop = self.context.stopped
            strategy = make_strategy("joint", {"seed": 0}, where="fuse")
            result = strategy.run(space, self.objective, self.context.share(seconds))
        except MapperError as exc:
            return f"no mapping: {exc}"
        word_bytes = {t.name: t.bytes_per_word for t in wl.tensors}
        ev = evaluate(self.arch, wl, result.mapping) if reserve else result.evaluation
        output = wl.tensors[wl.output].name
        if whole is not None and not completes_output(ev, output, self.level):
            return f"its best mapping under the constraints reads partial sums of {output} back above the fusion level"
        price = from_evaluation(self.arch, ev, word_bytes, op.flops, owner=i)
        return Mapped(i, whole, result.mapping, ev, price, bool(result.optimal),
                      result.gap, result.seconds, result.evaluated)

    def _with_extra(self, levels: tuple) -> tuple:
        """`levels` and the extra levels (a `--mapspace` preset's) for the keys it does not set:
        fusion's own constraints win where both constrain a level."""
        taken = {key for key, _ in levels}
        return tuple(levels) + tuple((key, lc) for key, lc in self.extra_levels if key not in taken)

    def _fusable_levels(self, wl, whole) -> tuple:
        """Constraints under which the output tile is final at the fusion level: no reduction
        factor at the levels above it but the one right above, where the reduction loops are
        innermost (the tile below stays resident across them: one write, no partial sums read
        back) and none is spatial (no split-k across instances)."""
        output_dims = wl.tensors[wl.output].dims
        reduction = [wl.dims[d] for d in range(len(wl.dims)) if d not in output_dims]
        one = tuple((d, Range(1, 1)) for d in reduction)
        levels = []
        for lv in range(self.level):
            temporal = () if lv == self.level - 1 else one
            innermost = tuple(reduction) if lv == self.level - 1 and reduction else None
            levels.append((self.arch.levels[lv].name, LevelConstraints(temporal=temporal, spatial=one,
                                                                      innermost_order=innermost)))
        if whole:
            tile = tuple((d, Range(wl.sizes[wl.dim_index(d)])) for d in whole)
            levels.append((self.arch.levels[self.level].name, LevelConstraints(tile=tile)))
        return tuple(levels)


def completes_output(ev: Evaluation, output: str, level: int) -> bool:
    """Whether the output's tiles leave `level` final: no partial sum is read back at any level
    above it (its words there are written, never read)."""
    return all(lc.tensors[output].reads == 0 for lc in ev.levels[:level] if output in lc.tensors)

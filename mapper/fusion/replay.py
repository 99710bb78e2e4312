"""A grouping found at one capacity priced again on another architecture, without a search:
every kernel keeps its mapping (and a group fused through a buffer level its slice plan), and
the groups are priced by the same `Grouper`, so by the one cost model, on the new arch.

The capacity curve of an op graph uses it to stay monotone: a grouping whose kernels fit a
level of capacity S fits one of any larger capacity, with the same traffic, so each point may
keep the previous point's grouping where the new study found a worse one.

`Pins` are what a grouping needs to be priced again: each op's own (free) mapping, the mapping
of each constrained kernel it used (keyed by op, whole dims, slice and completion level, not
by the reserve, which follows the capacity) and each buffered group's slice plan.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from ..cost import evaluate
from ..errors import MapperError
from ..opgraph import OpGraph
from ..search import SearchContext
from ..search.warm import admit
from ..spec import Arch
from .buffered import Unfusable
from .grouping import Grouping
from .group_price import Refusal
from .groups import Grouper
from .kernels import Mapped, OpSearches, completes_output

NOT_PINNED = "not a kernel of the grouping priced again"


@dataclass(frozen=True)
class Pins:
    mappings: MappingProxyType        # (op, whole, sizes, at) -> Mapping
    plans: MappingProxyType           # a buffered group's ops -> its SlicePlan


def pins_of(grouping: Grouping, grouper: Grouper) -> Pins:
    """What `grouping` (priced by `grouper`) needs to be priced again elsewhere."""
    graph, searches = grouper.graph, grouper.searches
    mappings = {(i, None, None, None): searches.free(i).mapping for i in range(len(graph.ops))}
    plans = {}
    for group in grouping.groups:
        for m in ((group.anchor,) if group.anchor is not None else ()) + tuple(group.members):
            mappings[(m.op, m.whole, m.sizes, m.at)] = m.mapping
        if group.members:
            plans[group.ops] = grouper.slice_plan(group.ops)
    return Pins(MappingProxyType(mappings), MappingProxyType(plans))


def singles_pins(frees: tuple[Mapped, ...]) -> Pins:
    """The pins of the grouping of single ops, each op's mapping the given free one."""
    return Pins(MappingProxyType({(m.op, None, None, None): m.mapping for m in frees}), MappingProxyType({}))


class PinnedSearches(OpSearches):
    """Answers every kernel request from `pins`: the pinned mapping priced on this arch (where
    its space holds it), or a refusal; nothing is searched."""

    def __init__(self, arch: Arch, graph: OpGraph, pins: Pins, extra_levels: tuple = ()):
        super().__init__(arch, graph, SearchContext(), 0.0, 0.0, "energy", extra_levels)
        self.pins = pins

    def _search(self, i, whole, reserve, wl, sizes, at=None):
        mapping = self.pins.mappings.get((i, whole, sizes, at))
        if mapping is None:
            return NOT_PINNED
        # the space at the level's whole capacity: the reserve only steered the first search
        if admit(self._space(i, whole, 0.0, wl, at), mapping) is None:
            return "its mapping is not in this architecture's space"
        ev = evaluate(self.arch, wl, mapping)
        if whole is not None and not completes_output(ev, wl.tensors[wl.output].name, at or self.level):
            return "its mapping no longer completes its output at the fusion level"
        return Mapped(i, whole, mapping, ev, self._price(i, wl, ev), False, None, 0.0, 0, sizes=sizes, at=at)


class PinnedGrouper(Grouper):
    """A `Grouper` whose buffered groups take their pinned slice plans."""

    def __init__(self, arch: Arch, graph: OpGraph, pins: Pins, objective: str, extra_levels: tuple = ()):
        super().__init__(arch, graph, PinnedSearches(arch, graph, pins, extra_levels), objective)
        self.pins = pins

    def _plan(self, ops):
        if ops not in self.pins.plans:
            raise Unfusable("not searched", NOT_PINNED)
        return self.pins.plans[ops]


def repriced(arch: Arch, graph: OpGraph, pins: Pins, op_sets, objective: str,
             extra_levels: tuple = ()) -> tuple[Grouping, PinnedGrouper] | None:
    """The grouping of `op_sets` priced on `arch` with the pinned kernels, and its grouper;
    None where a group is refused there (a pinned mapping left the space)."""
    grouper = PinnedGrouper(arch, graph, pins, objective, extra_levels)
    try:
        groups = tuple(grouper.price(ops) for ops in op_sets)
    except MapperError:                 # an op's own mapping left the space
        return None
    if any(isinstance(g, Refusal) for g in groups):
        return None
    return Grouping(groups, sum(g.score(objective) for g in groups)), grouper

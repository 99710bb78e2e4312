"""Lower bounds on the objective of every mapping below a tree node (see `tree.py`).

A node at depth j has decided every level above j, and level j's tile, stages and keeps. Its
completion (the node's table) is priced by the cost model; from that pricing the bound keeps
only what no deeper decision can change:
- fills of levels <= j, and reads/updates of levels < j whose consumer is a decided level;
- the times of those levels with that known traffic (compute time bounded below by the most
  compute units the remaining fanout could reach).
What is still open is bounded below by what every completion must pay: the compute units' one
operand read (or output update and read-modify-write) per MAC at the innermost level keeping
each tensor, divided by the largest multicast the fanout below it allows; for each undecided
level, the cheapest traffic into it over every tile that fits it (`LinkBounds`), or where
larger, the words the node's own loops must refetch into it (`refetched_links`); MAC energy;
leakage over the bounded cycles. A second bound on the same open traffic enumerates the
innermost level's keep sets, tiles and splits (`innermost.py`), plus the link bounds of
the levels between; the larger one is used. Under an incumbent (`refine_below`) that second
bound is refined, for the nodes it does not beat yet, with the words the node's own loops
bring down again and again. Each level's time is also bounded by everything it
must move together: its own fills at least and, where it alone can feed an undecided level,
that level's link bound (`_moved_bound`).
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from ...cost import Costs, access_energy
from ...cost.timing import level_time, total_rate
from ...mapping import MappingTable
from ...mapspace import Mapspace, pruning
from ..objective import SLACK, TIE, Objective, beaten, cost_bound
from .energy import ValidShares, may_draw_masked, valid_shares
from .latency import decided_latency_bound, feeder_wait
from .link import LinkBounds
from .operand import independent_bound, operand_bound, read_modify_write, serving_options
from .refetch import Refetched, deepest_keeper, refetches, refetched_links

class NodeBounds(NamedTuple):
    """Lower bounds on every completion of each node: on the objective (a pair for a
    lexicographic one), and on the energy and the cycles, the next two ranking keys."""
    objective: np.ndarray
    energy: np.ndarray
    cycles: np.ndarray

def least_macs(space: Mapspace, table: MappingTable | None = None, depth: int | None = None):
    """The fewest MACs the units run below each node (of `table`, else anywhere in the space):
    its padded extents' (the workload's), raised by the least fragment padding, for nodes at
    `depth` that of an innermost tile within their tile (`fragment_padding_within`)."""
    macs = space.workload.macs if table is None else table.factors.prod(axis=(0, 1, 2))
    if table is not None and depth is not None:
        spans = table.factors[min(depth, space.n_levels - 1):].prod(axis=(0, 1))
        padding = pruning.fragment_padding_within(space, spans)
        return macs * np.where(padding > 1, padding * (1 - 1e-12), 1.0)
    padding = pruning.fragment_padding(space)
    # a rounding error must not lift a ceil above the MACs' true cycles
    return macs * (padding * (1 - 1e-12)) if padding > 1 else macs

def reachable_units(space: Mapspace, depth: int, decided_units: np.ndarray, links: LinkBounds | None = None):
    """The most compute units a node reaches: its decided spatial splits (`decided_units`, their
    product over the decided levels) times every fanout still open below depth `depth`."""
    arch = space.arch
    reach = (math.prod(links.units[depth:]) if links is not None
             else math.prod(arch.fanout_units(lv) for lv in range(depth, space.n_levels)))
    return np.minimum(decided_units * reach, arch.compute.instances)

def compute_bound(space: Mapspace, depth: int, decided_units: np.ndarray,
                  links: LinkBounds | None = None, macs=None) -> np.ndarray:
    """The fewest cycles the MACs (`macs`, default `least_macs` of the space) take on the
    compute units a node reaches (`reachable_units`)."""
    units = reachable_units(space, depth, decided_units, links)
    macs = least_macs(space) if macs is None else macs
    return np.ceil(macs / (units * space.arch.compute.macs_per_cycle))

class ComputeOn(NamedTuple):
    """A node's compute time when at most some instances of a level are busy: each holds the
    units below it, no more than the node reaches."""
    space: Mapspace
    macs: np.ndarray | float
    units: np.ndarray           # (N,) `reachable_units`

    def __call__(self, j: int, busy: int) -> np.ndarray:
        """At most `busy` instances of level j (of the compute units at j = n_levels) busy."""
        compute = self.space.arch.compute
        instances = compute.instances if j == self.space.n_levels else self.space.arch.levels[j].instances
        below = -(-compute.instances // instances)
        units = np.minimum(self.units, busy * below)
        return np.ceil(self.macs / (units * compute.macs_per_cycle))

def lower_bound(space: Mapspace, objective: Objective, depth: int, table: MappingTable,
                costs: Costs, links: LinkBounds | None = None) -> np.ndarray:
    """The objective's lower bound on every completion of each node (`lower_bounds`)."""
    return lower_bounds(space, objective, depth, table, costs, links).objective

class _Known(NamedTuple):
    """What a node's decided levels fix, whatever the completion: the energy of the MACs and of
    their traffic, and per level the bytes per instance, by direction (reads; fills and
    updates), and of those the ones no buffering hides (adding traffic never shortens a
    level's time)."""
    energy: np.ndarray          # (N,)
    read: np.ndarray            # (L, N)
    write: np.ndarray
    exposed_read: np.ndarray
    exposed_write: np.ndarray
    by_tensor: np.ndarray | None = None     # (T, N) the decided traffic's energy, tensor by tensor
    moved: np.ndarray | None = None         # (2, T, L, N) `read` and `write`, tensor by tensor

class _Open(NamedTuple):
    """The bound on what is still open below a node, beside what the cycles bound and the
    refinement need of it."""
    energy: np.ndarray          # (N,) the decided energy plus the open traffic's bound
    known: _Known               # the decided traffic, with the bytes the refetches must move
    spans: np.ndarray | None    # (D, N) the node's tile at its level, bounding every tile below
    refetched: Refetched | None
    instances: np.ndarray | None    # (L, 1)
    deepest: list | None        # per tensor, (N,) its deepest decided keeper
    innermost: np.ndarray | None    # the innermost level's bound (None: disabled or decided)
    between: np.ndarray | float     # the link bounds of the undecided levels above the innermost
    undecided_links: np.ndarray | float     # the link bounds of every undecided level
    inner_share: np.ndarray | float         # what traffic into the compute units is scaled by

def lower_bounds(space: Mapspace, objective: Objective, depth: int, table: MappingTable,
                 costs: Costs, links: LinkBounds | None = None, refine_below: tuple | None = None) -> NodeBounds:
    """Bounds on every completion of each node at `depth` (its completion `table`, priced as
    `costs`): on the objective, the energy and the cycles. With `links` (`LinkBounds`) the
    open traffic is bounded per link, by the node's refetches and by the innermost level's
    choices; under `refine_below` (the incumbent's ranking key) the nodes it does not beat
    yet are refined by the words their own loops bring down again and again."""
    arch = space.arch
    n_levels, n = len(arch.levels), len(table)
    decided_units = np.ones(n, np.int64)
    for lv in range(min(depth, n_levels)):
        decided_units = decided_units * table.factors[lv, 1:].prod(axis=(0, 1))
    macs = least_macs(space, table, depth)
    compute_on = ComputeOn(space, macs, reachable_units(space, depth, decided_units, links))
    shares = valid_shares(space, table)
    # under an incumbent the operand bound waits for the nodes the rest of the bound leaves open
    lazy = refine_below is not None and links is not None and objective.kind != "bytes"
    open_ = _open(space, depth, table, links, _known(space, depth, table, costs, shares, macs), shares,
                  with_operand=not lazy)
    known = open_.known
    cycles = _cycles(space, depth, table, links, open_, compute_on, costs.fetch_requests)
    # with "utilized" (Timeloop's rule) idle instances do not leak: no term
    leak = leak_per_cycle(arch)
    energy = open_.energy + leak * cycles
    if objective.kind == "bytes":
        bound = (known.read + known.write)[objective.level] * costs.level_instances[objective.level]
        if shares is not None and objective.level < shares.masked:
            bound = bound * shares.least         # per-instance bytes are the padded tiles'
        return NodeBounds(bound, energy, cycles)
    bound = cost_bound(objective, energy, cycles)
    if lazy:
        rows = np.flatnonzero(~beaten(objective, bound, refine_below))
        if len(rows):
            open_ = _with_operand(space, depth, table, links, shares, open_, rows)
            energy = open_.energy + leak * cycles
            bound = cost_bound(objective, energy, cycles)
    if refine_below is not None and links is not None and open_.innermost is not None:
        energy = _refined(space, objective, depth, table, links, refine_below, bound, energy, cycles, open_, leak,
                          shares)
        bound = cost_bound(objective, energy, cycles)
    return NodeBounds(bound, energy, cycles)

def leak_per_cycle(arch) -> float:
    """The leakage energy every completion pays per cycle, whatever it keeps busy: every
    instance's under "all"; none certain under "utilized" (Timeloop's rule: idle instances
    do not leak)."""
    return sum(lv.leak * lv.instances for lv in arch.levels) if arch.leakage == "all" else 0.0

class SplitTerms(NamedTuple):
    """What a bound on a node's children from the splits they decide over a fanout that
    shares nothing takes from the node (`InnermostBound.with_split`, `joint/copies_cut.py`)."""
    base: np.ndarray                    # (N,) decided energy plus the links of the levels between
    inner_share: np.ndarray | float     # what the innermost level's traffic is scaled by
    deepest: list                       # per tensor, (N,) its deepest decided keeper
    split: np.ndarray | None            # (D, N) the nodes' own such splits (`node_split`)

def split_terms(space: Mapspace, depth: int, table: MappingTable, costs: Costs, links: LinkBounds) -> SplitTerms:
    """The nodes' `SplitTerms` (their completion `table`, priced as `costs`): a child's energy is
    at least `base` plus `inner_share` times the innermost level's bound under its split."""
    shares = valid_shares(space, table)
    open_ = _open(space, depth, table, links, _known(space, depth, table, costs, shares, least_macs(space, table, depth)),
                  shares, with_operand=False)
    return SplitTerms(open_.known.energy + open_.between, open_.inner_share, open_.deepest,
                      links.innermost.node_split(depth, table))

def order_free_parts(space: Mapspace, depth: int, table: MappingTable, costs: Costs,
                     links: LinkBounds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A node's energy bound in two parts: (T, N) the decided traffic's energy tensor by
    tensor, which the loop order of the level above the node changes, and (N,) what no such
    order changes: the MACs' energy, the innermost level's bound (under the node's split
    over fanouts that share nothing) and the link bounds of the levels between, without the
    node's refetches (`joint/order_free.py` takes each tensor's least over a few orders);
    and (2, T, L, N) the decided traffic's bytes per instance, read and written at each
    level, tensor by tensor (what its cycles bound takes the least of)."""
    shares = valid_shares(space, table)
    macs = least_macs(space, table, depth)
    known = _known(space, depth, table, costs, shares, macs)
    rest = macs * space.arch.compute.energy_per_mac
    deepest = [deepest_keeper(space, t, depth, table) for t in range(len(space.workload.tensors))]
    innermost = _innermost(links, depth, table, deepest)
    if innermost is not None:
        n_levels = space.n_levels
        spans = table.factors[min(depth, n_levels - 1):].prod(axis=(0, 1))
        between = sum((links.energy[j].below(spans) * (shares.least if may_draw_masked(space, shares, j) else 1.0)
                       for j in range(depth + 1, n_levels - 1)), np.zeros(len(table)))
        inner_share = shares.least if may_draw_masked(space, shares, n_levels) else 1.0
        rest = rest + innermost * inner_share + between
    return known.by_tensor, rest, known.moved

def _cycles(space: Mapspace, depth: int, table: MappingTable, links: LinkBounds | None, open_: _Open,
            compute_on: ComputeOn, requests: np.ndarray | None) -> np.ndarray:
    """A bound on the cycles: every level's time with the traffic it must move (and the
    latency no mapping hides), the feeders' time for what they must send down, at least the
    compute time on the most units the node can reach (`compute_on`: fewer where the tiles
    that keep the traffic low keep fewer units busy)."""
    arch, known, n_levels = space.arch, open_.known, space.n_levels
    compute = compute_on(n_levels, arch.compute.instances)
    hidden, latency = (decided_latency_bound(space, depth, table, links.latency, requests) if links is not None
                       else (np.zeros(n_levels), np.zeros(n_levels)))
    cycles = compute
    for lv, level in enumerate(arch.levels):
        cycles = np.maximum(cycles, level_time(level, arch.cycle_rule, compute, known.read[lv], known.write[lv],
                                               known.exposed_read[lv], known.exposed_write[lv],
                                               latency_hidden=hidden[lv], latency_exposed=latency[lv]))
    if links is not None:
        chain = links.chain(least_macs(space))
        if chain is not None:
            cycles = np.maximum(cycles, chain.of_table(depth, table.factors))
        # a link with one feeder is bounded in `_moved_bound`, on top of the feeder's other bytes
        for j in range(depth + 1, n_levels):
            if links.single_feeder[j] is None:
                cycles = np.maximum(cycles, links.time_bound(j, open_.spans, compute_on))
        cycles = np.maximum(cycles, _moved_bound(space, depth, links, open_.refetched, compute_on, open_.spans,
                                                 (known.read + known.write) * open_.instances))
    return cycles

def _refined(space: Mapspace, objective: Objective, depth: int, table: MappingTable, links: LinkBounds,
             refine_below: tuple, bound: np.ndarray, energy: np.ndarray, cycles: np.ndarray, open_: _Open,
             leak: float, shares: ValidShares | None) -> np.ndarray:
    """The energy bound again, from the innermost bound with the words the node's own loops
    must bring down again and again, for the nodes still open under the incumbent (whose
    ranking key is `refine_below`): it depends on the node, and computed for every node it
    would cost more than the pruning it brings saves (docs/RESULTS.md)."""
    decided, between, tensors = open_.known.energy, open_.between, space.workload.tensors
    cap = _energy_cap(objective, refine_below, cycles) - leak * cycles - decided - between
    rows = np.flatnonzero(~beaten(objective, bound, refine_below) & np.isfinite(cap))
    if len(rows):                   # of those, where some tensor comes down more than once
        open_nodes = table.take(rows)
        repeats = [refetches(space, t, depth, open_nodes) for t in range(len(tensors))]
        more = (np.stack(repeats) > 1).any(axis=0)
        rows, repeats = rows[more], [r[more] for r in repeats]
    if len(rows):
        refined = links.innermost.refined(depth, table.take(rows), [d[rows] for d in open_.deepest], repeats,
                                          cap[rows])
        if may_draw_masked(space, shares, space.n_levels):
            refined = refined * shares.least[rows]
        energy = energy.copy()
        energy[rows] = np.maximum(energy[rows], decided[rows] + refined + between[rows] + leak * cycles[rows])
    return energy

def _known(space: Mapspace, depth: int, table: MappingTable, costs: Costs, shares: ValidShares | None,
           macs: np.ndarray) -> _Known:
    """The traffic the decided levels fix: fills of levels <= depth, and reads and updates of
    levels < depth whose consumer is a decided level. A masked level's energy counts its
    valid words (`shares`); its bytes per instance (for the times) are the padded tiles'."""
    arch, workload = space.arch, space.workload
    n_levels, n = len(arch.levels), len(table)
    by_tensor = np.zeros((len(workload.tensors), n))
    moved = np.zeros((2, len(workload.tensors), n_levels, n))     # summed over tensors at the end
    exposed_read, exposed_write = np.zeros((n_levels, n)), np.zeros((n_levels, n))
    for t, tensor in enumerate(workload.tensors):
        known_read, known_write = moved[0, t], moved[1, t]
        child = np.full(n, -1)                  # nearest decided level below that keeps t
        for lv in range(min(depth, n_levels - 1), -1, -1):
            level = arch.levels[lv]
            wb = level.word_bytes(tensor)
            kept = table.keep[lv, t]
            inst = costs.level_instances[lv]
            if shares is not None and lv < shares.masked:
                inst = inst * shares.tensor[t]
            fills = costs.level_fills[lv, t]
            e = access_energy(level, fills, wb, "write")
            by_tensor[t] += np.where(kept, e * inst, 0)
            known_write[lv] += np.where(kept, fills * wb, 0)
            exposed_write[lv] += np.where(kept & (table.stages[lv] == 1), fills * wb, 0)
            if lv < depth:
                passing_known = kept & (child >= 0)
                reads, updates = costs.level_reads[lv, t], costs.level_updates[lv, t]
                e = access_energy(level, reads, wb, "read") + access_energy(level, updates, wb, "update")
                by_tensor[t] += np.where(passing_known, e * inst, 0)
                child_stages = np.take_along_axis(table.stages, np.maximum(child, 0)[None], axis=0)[0]
                waits = passing_known & (child_stages == 1)
                known_read[lv] += np.where(passing_known, reads * wb, 0)
                known_write[lv] += np.where(passing_known, updates * wb, 0)
                exposed_read[lv] += np.where(waits, reads * wb, 0)
                exposed_write[lv] += np.where(waits, updates * wb, 0)
            child = np.where(kept, lv, child)
    # the energy of the fewest MACs any completion runs, and of the decided traffic
    energy = macs * arch.compute.energy_per_mac + by_tensor.sum(axis=0)
    read, write = moved.sum(axis=1)
    return _Known(energy, read, write, exposed_read, exposed_write, by_tensor, moved)

def _open(space: Mapspace, depth: int, table: MappingTable, links: LinkBounds | None, known: _Known,
          shares: ValidShares | None, with_operand: bool = True) -> _Open:
    """The decided energy plus a bound on the open traffic's: what the innermost keepers serve
    the compute units (the output's read-modify-write included), tensor by tensor and, where
    `with_operand`, jointly over the splits still open (`_with_operand`); per undecided level its
    link bound or the node's refetches into it, or where larger the innermost level's bound.
    Adds the refetches' bytes to their parents' `known` ones. Traffic that may touch a masked
    level is scaled by the least valid share (`shares`)."""
    arch, tensors = space.arch, space.workload.tensors
    n_levels, n = len(arch.levels), len(table)
    options = [serving_options(space, t, depth, table) for t in range(len(tensors))]
    served = sum(independent_bound(space, t, options[t]) for t in range(len(tensors)))
    served = served + sum(read_modify_write(space, t, depth, table, None if links is None else links.units)
                          for t, tensor in enumerate(tensors) if tensor.is_output)
    inner_share = shares.least if may_draw_masked(space, shares, n_levels) else 1.0
    energy = known.energy + served * inner_share
    if links is None:
        return _Open(energy, known, None, None, None, None, None, 0.0, 0.0, inner_share)
    # the node's tile at level `depth` bounds every tile below it (`TileBound.below`)
    spans = table.factors[min(depth, n_levels - 1):].prod(axis=(0, 1))
    refetched = refetched_links(space, depth, table)
    link_energy = [np.maximum(links.energy[j].below(spans), refetched.energy[j])
                   * (shares.least if may_draw_masked(space, shares, j) else 1.0) if j > depth else 0.0
                   for j in range(n_levels)]
    undecided_links = sum(link_energy[depth + 1:], np.zeros(n))
    energy += undecided_links
    # the parents' side of the same traffic: bytes they must move, per instance
    instances = np.array([lv.instances for lv in arch.levels])[:, None]
    known = known._replace(read=known.read + refetched.reads / instances,
                           write=known.write + refetched.writes / instances)
    # another bound on the same open traffic, from the innermost level's choices (keep
    # sets, tiles that fit, splits): the larger of two valid bounds is one. It charges
    # the innermost level's fills and what it serves, read at or below the deepest level
    # that must keep each tensor: the traffic into the undecided levels between (their
    # fills, their parents' reads) is other accesses, bounded by their own link bounds
    deepest = [deepest_keeper(space, t, depth, table) for t in range(len(tensors))]
    innermost = _innermost(links, depth, table, deepest)
    if innermost is not None:
        innermost = innermost * inner_share
    between = 0.0
    if innermost is not None:
        between = sum(link_energy[depth + 1:n_levels - 1], np.zeros(n))
        energy = np.maximum(energy, known.energy + innermost + between)
    open_ = _Open(energy, known, spans, refetched, instances, deepest, innermost, between, undecided_links,
                  inner_share)
    return _with_operand(space, depth, table, links, shares, open_) if with_operand else open_

def _innermost(links: LinkBounds, depth: int, table: MappingTable, deepest: list) -> np.ndarray | None:
    """The innermost level's bound for the nodes (`InnermostBound.bound`), with their own
    splits over the fanouts that share nothing where they have any (`with_split`)."""
    innermost = links.innermost.bound(depth, table, deepest)
    split = None if innermost is None else links.innermost.node_split(depth, table)
    if split is not None:
        innermost = np.maximum(innermost, links.innermost.with_split(depth, deepest, split))
    return innermost

def _with_operand(space: Mapspace, depth: int, table: MappingTable, links: LinkBounds, shares: ValidShares | None,
                  open_: _Open, rows: np.ndarray | None = None) -> _Open:
    """`open_` with the energy of the nodes at `rows` (None: all) raised by the operand bound:
    what the innermost keepers serve, minimised jointly over the open splits rather than
    tensor by tensor, and with the links' energy by spread where nothing is masked (a masked
    level's traffic is scaled apart): the operand bound's split then decides the multicast of
    both. It costs more than the rest of the bound (an array over nodes and split vectors), so
    under an incumbent it is computed only for the nodes the rest does not already beat."""
    tensors = space.workload.tensors
    nodes, at = (table, slice(None)) if rows is None else (table.take(rows), rows)
    options = [serving_options(space, t, depth, nodes) for t in range(len(tensors))]
    by_spread = tuple(b for b in links.by_spread if b.j > depth) if shares is None else ()
    served = operand_bound(space, depth, nodes, options, links.splits, by_spread)
    if served is None:
        return open_
    served, joint = served
    decided, inner_share = open_.known.energy[at], open_.inner_share
    raised = decided + served * (inner_share[at] if np.ndim(inner_share) else inner_share) + open_.undecided_links[at]
    if joint is not None:
        raised = np.maximum(raised, decided + joint)
    energy = open_.energy.copy()
    energy[at] = np.maximum(energy[at], raised)
    return open_._replace(energy=energy)

def _energy_cap(objective: Objective, key: tuple, cycles: np.ndarray) -> np.ndarray:
    """(N,) the most energy a node with these cycles bounds may be bounded by without being
    beaten by the incumbent whose ranking key is `key`; NaN where no energy bound beats it
    (delay,energy: cycles below the incumbent's)."""
    if objective.kind == "energy":
        return np.full(len(cycles), key[0] * (1 + SLACK))
    if objective.kind == "edp":
        return key[0] * (1 + SLACK) / np.maximum(cycles, 1e-300)
    if objective.lexicographic:
        return np.where(cycles >= key[0] * (1 - TIE), key[1] * (1 + SLACK), np.nan)
    return np.full(len(cycles), np.nan)         # cycles: no energy in it

def _moved_bound(space: Mapspace, depth: int, links: LinkBounds, refetched: "Refetched",
                 compute_on: ComputeOn, spans: np.ndarray, known: np.ndarray) -> np.ndarray:
    """Cycles each level needs at least for everything it moves, reads and writes together
    (`known`, (L, N): the bytes the decided levels fix, over all its instances). An undecided
    level is also filled with at least its cheapest input traffic (`LinkBounds.own_bytes`),
    and a level that alone can feed an undecided link j sends down at least j's bound (or the
    node's refetches into j where more, already in `known`), on top of the latency it makes j
    wait (`feeder_wait`). The link bounds bound each link alone; a level that both fills from
    above and feeds below (h100's L2) pays for both. As in `LinkBounds.time_bound`, j with
    one stage exposes what it draws, on top of compute, and the compute time is that of the
    units j's tiles keep busy; every bound is over the tiles within the node's (`spans`)."""
    bound = 0.0
    stage_aware = space.arch.cycle_rule != "timeloop"
    for p, level in enumerate(space.arch.levels):
        rate = total_rate(level) * level.instances
        if math.isinf(rate):
            continue
        base = known[p] + (links.own_bytes[p].below(spans) if p > depth else 0.0)
        every_link = base
        for j in links.fed_by[p]:
            if j <= depth:
                continue
            refetch = refetched.by_link[j]
            options = []
            for stages, sent in links.sent_bytes[j]:
                wait = feeder_wait(space, p, j, stages)
                for busy, bound_j in sent.bins:
                    more, compute = np.maximum(bound_j.below(spans) - refetch, 0.0), compute_on(j, busy)
                    time = np.maximum(compute, (base + more) / rate)
                    if stages == 1 and stage_aware:
                        time = np.maximum(time, compute + (refetch + more) / rate)
                    options.append(time + wait)
            bound = np.maximum(bound, functools.reduce(np.minimum, options))
            # the fewest stages: the most capacity
            every_link = every_link + np.maximum(links.sent_bytes[j][0][1].below(spans) - refetch, 0.0)
        bound = np.maximum(bound, every_link / rate)
    return bound

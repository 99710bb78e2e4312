"""Groupings of a DAG beyond runs of one order: every connected group of up to `max_group` ops
priced, and the cheapest set of them that covers each op once and can run in some order, chosen
by CP-SAT (OR-Tools).

The model: a boolean per legal candidate group; each op covered by exactly one chosen group; an
integer position per op, equal inside a chosen group, strictly increasing along every edge
between groups (so the kernels run in a topological order of the groups, and a group some path
leaves and re-enters cannot be chosen); the objective the sum of the chosen groups' scores,
scaled to integers. The chosen groups are re-priced exactly (`Grouping.score`); `all_covers`
enumerates the same space one partition at a time, the check on small graphs.
"""
from __future__ import annotations

import itertools

import networkx as nx

from .grouping import Grouping
from .group_price import GroupPrice, Refusal
from .groups import Grouper

SCALE = 10**9               # the objective's integer resolution, relative to the largest candidate
# connected groups enumerated at most: a tensor many ops read (a star) has combinatorially many,
# each to price; past this the choice is the dynamic programme's over runs of the order
MAX_CANDIDATES = 5_000


def candidates(grouper: Grouper, max_group: int) -> list[GroupPrice] | None:
    """Every legal group of up to `max_group` connected ops (singletons included); None when
    the connected groups number more than MAX_CANDIDATES."""
    g = grouper.graph.graph.to_undirected()
    seen, frontier = set(), [frozenset([i]) for i in g.nodes]
    while frontier:
        seen.update(frontier)
        if len(seen) > MAX_CANDIDATES:
            return None
        grown = set()
        for group in frontier:
            if len(group) < max_group:
                grown |= {group | {j} for i in group for j in g.neighbors(i) if j not in group}
                if len(grown) > MAX_CANDIDATES:
                    return None
        frontier = [s for s in grown if s not in seen]
    out = []
    for group in sorted(seen, key=lambda s: (len(s), sorted(s))):
        price = grouper.price(tuple(sorted(group)))
        if not isinstance(price, Refusal):
            out.append(price)
    return out


def best_cover(grouper: Grouper, n: int, max_group: int = 6, seconds: float = 10.0,
               wall_seconds: float | None = None) -> tuple[Grouping, bool] | None:
    """The CP-SAT choice over `candidates` (at most `seconds` of CP-SAT's deterministic time,
    one worker: the same model gets the same answer whatever the load; `wall_seconds`, a stop
    only: the command's deadline) and whether CP-SAT proved it optimal; None when the
    candidates are too many to enumerate or CP-SAT found no cover in its budget."""
    from ortools.sat.python import cp_model
    groups = candidates(grouper, max_group)
    if groups is None:
        return None
    scores = [g.score(grouper.objective) for g in groups]
    top = max(scores) or 1.0
    model = cp_model.CpModel()
    chosen = [model.NewBoolVar(f"g{k}") for k in range(len(groups))]
    position = [model.NewIntVar(0, n - 1, f"p{i}") for i in range(n)]
    for i in range(n):
        model.AddExactlyOne(chosen[k] for k, g in enumerate(groups) if i in g.ops)
    for k, g in enumerate(groups):
        for a, b in zip(g.ops, g.ops[1:]):
            model.Add(position[a] == position[b]).OnlyEnforceIf(chosen[k])
    for u, v in grouper.graph.graph.edges:
        together = [chosen[k] for k, g in enumerate(groups) if u in g.ops and v in g.ops]
        model.Add(position[u] + 1 <= position[v] + n * sum(together))
        model.Add(position[u] <= position[v])
    model.Minimize(sum(round(s / top * SCALE) * c for s, c in zip(scores, chosen)))
    solver = cp_model.CpSolver()
    solver.parameters.max_deterministic_time = seconds
    solver.parameters.max_time_in_seconds = max(seconds, 60.0) if wall_seconds is None else wall_seconds
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    status = solver.Solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None     # none found in the time left (the singletons form one): the runs' choice stands
    picked = _in_order(grouper.graph.graph, [g for g, c in zip(groups, chosen) if solver.Value(c)])
    return Grouping(picked, sum(g.score(grouper.objective) for g in picked)), status == cp_model.OPTIMAL


def all_covers(grouper: Grouper, n: int, max_group: int = 6) -> list[Grouping]:
    """Every partition of the ops into legal groups whose kernels can run in some order (small
    graphs only: the partitions of n ops grow as the Bell numbers)."""
    if n > 9:
        raise ValueError(f"{n} ops: enumerating every partition is not attempted")
    out = []
    for blocks in _partitions(list(range(n))):
        if any(len(b) > max_group for b in blocks):
            continue
        prices = [grouper.price(tuple(sorted(b))) for b in blocks]
        if any(isinstance(p, Refusal) for p in prices) or not _orderable(grouper.graph.graph, blocks):
            continue
        out.append(Grouping(tuple(prices), sum(p.score(grouper.objective) for p in prices)))
    return out


def _in_order(g: nx.DiGraph, groups: list[GroupPrice]) -> tuple[GroupPrice, ...]:
    """The groups as their kernels run: a topological order of the groups, earliest ops first."""
    where = {i: k for k, grp in enumerate(groups) for i in grp.ops}
    quotient = nx.DiGraph()
    quotient.add_nodes_from(range(len(groups)))
    quotient.add_edges_from((where[u], where[v]) for u, v in g.edges if where[u] != where[v])
    order = nx.lexicographical_topological_sort(quotient, key=lambda k: min(groups[k].ops))
    return tuple(groups[k] for k in order)


def _orderable(g: nx.DiGraph, blocks) -> bool:
    where = {i: k for k, b in enumerate(blocks) for i in b}
    quotient = nx.DiGraph()
    quotient.add_nodes_from(range(len(blocks)))
    quotient.add_edges_from((where[u], where[v]) for u, v in g.edges if where[u] != where[v])
    return nx.is_directed_acyclic_graph(quotient)


def _partitions(items: list):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for k in range(len(rest) + 1):
        for others in itertools.combinations(rest, k):
            remaining = [i for i in rest if i not in others]
            for tail in _partitions(remaining):
                yield [[first, *others], *tail]


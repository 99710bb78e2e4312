"""The tree nodes above sampled mappings (their prefixes), and the check the pruning's soundness
rests on: a node's bounds never exceed the cost of a mapping under it (test_joint, test_clusters,
test_copies, test_window_fills, test_split_bounds)."""
from __future__ import annotations

import numpy as np

from mapper.cost import evaluate_many
from mapper.mapping import MappingTable
from mapper.mapspace import sampling

NEVER_BEATEN = (np.inf, np.inf, np.inf)      # a ranking key no bound exceeds: every node refined


def prefix_table(space, table, depth: int) -> MappingTable:
    """The tree node of `table`'s mappings at `depth`: levels above as chosen, level `depth`
    holding the rest of every dim as temporal loops, deeper levels unit."""
    factors = table.factors.copy()
    if depth < space.n_levels:
        factors[depth, 0] = factors[depth:].prod(axis=(0, 1))
        factors[depth, 1:] = 1
        factors[depth + 1:] = 1
    return MappingTable(factors, table.order.copy(), table.keep.copy(), table.stages.copy())


def prefix_nodes(space, table):
    """(depth, node, its costs) of `table`'s mappings at every depth, root (0) to leaves."""
    for depth in range(space.n_levels + 1):
        node = prefix_table(space, table, depth)
        yield depth, node, evaluate_many(space.arch, space.workload, node)


def sampled_scores(space, objective, seed: int):
    """200 mappings drawn from the space (`sampling.sample`) and their scores under `objective`;
    (None, None) where none of the draws is valid."""
    sample = sampling.sample(space, 200, np.random.default_rng(seed))
    if not len(sample):
        return None, None
    costs = evaluate_many(space.arch, space.workload, sample)
    return sample, {"edp": costs.edp, "energy": costs.energy_pj, "cycles": costs.cycles}[objective.kind]


def check_prefix_bounds(space, objective, seed: int, refined: bool = False) -> None:
    """Every prefix of 200 mappings drawn from `space` (`sampled_scores`) is bounded at or
    below the mapping's score; with `refined`, so is its bound refined exactly (as under an
    incumbent that beats none), which is at or above the plain one."""
    from mapper.search.bounds import LinkBounds, lower_bound, lower_bounds
    sample, score = sampled_scores(space, objective, seed)
    if sample is None:
        return
    links = LinkBounds(space)
    for depth, node, costs in prefix_nodes(space, sample):
        bound = lower_bound(space, objective, depth, node, costs, links)
        assert (bound <= score * (1 + 1e-9)).all(), depth
        if refined:
            again = lower_bounds(space, objective, depth, node, costs, links, refine_below=NEVER_BEATEN).objective
            assert (again >= bound).all() and (again <= score * (1 + 1e-9)).all(), depth

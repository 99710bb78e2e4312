"""The innermost level's bound on a windowed tensor (a convolution's input, p+r), from
`bounds/window.py`: its fills when its tile is one value wide along each sliding axis
(`steps`), the words each instance touches otherwise (`touched`), and the multicast of
coinciding windows (`multicast`), checked against the cost model on sampled mappings, cell
by cell."""
from __future__ import annotations

import numpy as np
import pytest

from mapper.constraints import Constraints
from mapper.cost import evaluate_many
from mapper.load import arch_from_dict, workload_from_dict
from mapper.mapspace import Mapspace, pruning, sampling
from mapper.search import parse_objective
from mapper.search.bounds import LinkBounds, lower_bounds
from mapper.search.bounds import operand, window
from mapper.search.bounds.window import cutoff as window_cutoff
from mapper.units import Where

from prefixes import NEVER_BEATEN, prefix_nodes

W = Where("<test>")

CASES = [
    # (einsum, sizes, PE capacity)
    # cancellations possible: s of 2 (q up, s back), and q of 8 split into loops
    ("O[k,p,q] += I[c,p+r,q+s] * W[k,c,r,s]", {"k": 2, "c": 2, "p": 4, "q": 8, "r": 2, "s": 2}, "4 B"),
    ("O[k,p,q] += I[c,2*p+r,q+s] * W[k,c,r,s]", {"k": 1, "c": 2, "p": 4, "q": 4, "r": 3, "s": 2}, "4 B"),
    ("O[k,p] += I[c,p+2*r] * W[k,c,r]", {"k": 2, "c": 2, "p": 8, "r": 4}, "4 B"),
    # odd trips (least primes 3): no cancellation by a wrap of one
    ("O[k,p,q] += I[c,p+r,q+s] * W[k,c,r,s]", {"k": 4, "c": 1, "p": 6, "q": 9, "r": 3, "s": 3}, "4 B"),
    # wider tiles fit: the touched-words rule beside the one-value-wide one
    ("O[k,p] += I[c,p+r] * W[k,c,r]", {"k": 3, "c": 2, "p": 12, "r": 4}, "6 B"),
]


def _space(einsum: str, sizes: dict, capacity: str) -> Mapspace:
    """DRAM / a buffer whose network multicasts / 16 one-word-per-tensor PEs under it."""
    level = {"max_stages": 1, "block_size": 1}
    arch = arch_from_dict({"name": "array", "clock": "1 GHz", "levels": [
        dict(level, name="DRAM", energy={"read": 100, "write": 100, "update": 100}),
        dict(level, name="Buf", capacity="4096 B", max_stages=2, energy={"read": 8, "write": 8, "update": 8}),
        dict(level, name="PE", capacity=capacity, instances=16, mesh=[4, 4],
             energy={"read": 1, "write": 1, "update": 1})],
        "compute": {"mesh": [4, 4], "instances": 16, "energy": 0.5}}, W)
    workload = workload_from_dict({"name": "conv", "einsum": einsum, "sizes": sizes, "dtype": 8}, W)
    return Mapspace(arch, workload, Constraints())


def test_the_window_cutoff_by_hand():
    """I[c, p+r, q+s] over dims (k, c, p, q, r, s) = 0..5."""
    tensor = workload_from_dict({"name": "c", "einsum": "O[k,p,q] += I[c,p+r,q+s] * W[k,c,r,s]",
                                 "sizes": {"k": 2, "c": 2, "p": 2, "q": 2, "r": 2, "s": 2}, "dtype": 8}, W).tensors[1]
    assert tensor.has_sliding_axis
    # q then s innermost: q's step may be undone by s wrapping back, nothing certain
    assert window_cutoff(tensor, (3, 5)) == 0
    # c's axis inside p+r's: every step out to c moves the tile
    assert window_cutoff(tensor, (2, 4, 1)) == 3
    # s, then p, then r: q+s ends first, p+r has two dims past it (p up, r back): out to s only
    assert window_cutoff(tensor, (5, 2, 4)) == 1
    # p, then s, then r: only r of p+r past s, and s's steps wrap r back: every step counts
    assert window_cutoff(tensor, (2, 5, 4)) == 3
    # one dim of the innermost axis past the second: every step out to it
    assert window_cutoff(tensor, (4, 5, 2)) == 3
    # k (not indexed) outside: its steps wrap p back, so they count
    assert window_cutoff(tensor, (0, 2)) == 2
    reversed_ = workload_from_dict({"name": "c", "einsum": "O[p] += I[p+r] * W[r]",
                                    "sizes": {"p": 4, "r": 2}, "dtype": 8}, W).tensors[1]
    assert window_cutoff(reversed_, (0, 1)) == 0


@pytest.mark.parametrize("einsum, sizes, capacity", CASES)
def test_a_windowed_tensors_fills_stay_below_every_mapping_of_their_cell(einsum, sizes, capacity):
    """For each sampled mapping whose PE keeps the input, the least over the merged orders of
    the bound's fills of its cell (tile and split) is at or below the cost model's fills; the
    bound meets some mapping exactly, and the one-value-wide rule raises it above the words
    each instance touches for some cell."""
    space = _space(einsum, sizes, capacity)
    inner = LinkBounds(space).innermost
    bound = inner.cells
    workload = space.workload
    t = next(i for i, tensor in enumerate(workload.tensors) if tensor.has_sliding_axis)
    least = inner.prices.fills(t).min(axis=0)
    touched = bound.instances * np.maximum(bound.words[t], window.touched(space.workload.tensors[t], bound.tile, bound.trips))
    assert (least >= touched * (1 - 1e-9)).all()
    assert (least > touched * (1 + 1e-9)).any()
    sample = sampling.sample(space, 20000, np.random.default_rng(5))
    costs = evaluate_many(space.arch, workload, sample)
    j = bound.level
    rows = np.flatnonzero(pruning.valid_mask(space, sample) & sample.keep[j, t].astype(bool))
    tile = sample.factors[j:].prod(axis=(0, 1))
    split = sample.factors[1, 1:].prod(axis=0)
    ratios = []
    for n in rows:
        cell = np.flatnonzero((bound.tile == tile[:, n][:, None]).all(axis=0)
                              & (bound.vectors[:, 1] == split[:, n][None]).all(axis=1))
        assert len(cell) == 1
        ratios.append(least[cell[0]] / (costs.level_fills[j, t, n] * costs.level_instances[j, n]))
    assert len(ratios) > 300
    assert max(ratios) <= 1 + 1e-9
    assert max(ratios) > 1 - 1e-9


@pytest.mark.parametrize("einsum, sizes, capacity", CASES[:2])
def test_node_bounds_on_windows_stay_below_every_mapping(monkeypatch, einsum, sizes, capacity):
    """At every depth the node bounds (energy; EDP refined as under an incumbent that beats
    none) stay at or below each sampled mapping, with the split vectors enumerated past
    `MAX_VECTORS` for the innermost level alone (`SplitVectors.above`)."""
    monkeypatch.setattr(operand, "MAX_VECTORS", 8)
    space = _space(einsum, sizes, capacity)
    links = LinkBounds(space)
    assert links.innermost.cells.vectors is not None and len(links.innermost.cells.vectors) > 8
    assert operand.SplitVectors(space).at_depth[0] is None
    arch, workload = space.arch, space.workload
    sample = sampling.sample(space, 6000, np.random.default_rng(2))
    sample = sample.take(np.flatnonzero(pruning.valid_mask(space, sample)))
    costs = evaluate_many(arch, workload, sample)
    objective = parse_objective("edp", arch)
    for depth, node, node_costs in prefix_nodes(space, sample):
        bounds = lower_bounds(space, objective, depth, node, node_costs, links, refine_below=NEVER_BEATEN)
        assert (bounds.energy <= costs.energy_pj * (1 + 1e-9)).all(), depth
        assert (bounds.objective <= costs.edp * (1 + 1e-9)).all(), depth


def test_a_sweep_revisited_by_hand():
    """Loops over q (trips 28) inside X, s (3) and k (128) outside: each of the 384 sweeps
    visits 28 places, at least 14 of q's trips inside (28 / 2), so 384 x 14 fills beyond the
    sweeps' first places; the split q, s inside: 14 + 2 beyond one a sweep."""
    trips = np.array([[128.0], [28.0], [3.0]])           # dims k, q, s
    kept = trips - trips / window.least_prime(trips)
    assert window.revisited(trips, kept, (0, 2), ((1,),))[0] == 384 * 14
    assert window.revisited(trips, kept, (0,), ((1, 2),))[0] == 128 * (14 + 2)
    assert window.revisited(trips, kept, (0, 1, 2), ((),))[0] == 0
    assert list(window.least_prime(np.array([1.0, 2, 9, 28, 49, 97]))) == [1, 2, 3, 2, 7, 97]


def test_coinciding_windows_share_a_transfer_in_the_bound():
    """p and r split 2 ways each over the same fanout: 2 + 2 - 1 = 3 distinct windows among 4
    units, a multicast of 4/3 (the cost model's count, `cost/multicast.py`), not 1 as if
    every unit held its own window."""
    space = _space(*CASES[0][:3])
    bound = LinkBounds(space).innermost.cells
    t = 1
    dims = space.workload.dims
    vector = np.ones(len(dims), np.int64)
    vector[dims.index("p")], vector[dims.index("r")] = 2, 2
    vector[dims.index("q")] = 1
    cells = np.flatnonzero((bound.vectors[:, 1] == vector).all(axis=1) & (bound.tile == 1).all(axis=0))
    assert len(cells)
    spread = window.multicast(space.arch, space.workload.tensors[t], bound.vectors, bound.tile, bound.level, [1])[cells]
    assert np.allclose(spread, 4 / 3)


def test_window_steps_counted_once_per_distinct_trips_are_the_direct_counts():
    """`window.steps_once` (each distinct column of trips counted once into a memo kept per
    space) gives what `window.steps` gives cell by cell, on columns repeated and asked twice."""
    space = _space(*CASES[0])
    bound = LinkBounds(space).innermost.cells
    t = next(i for i, tensor in enumerate(space.workload.tensors) if tensor.has_sliding_axis)
    some = bound.trips[:, ::max(1, bound.trips.shape[1] // 40)]
    trips = np.concatenate([some, some[:, ::-1], some[:, :5]], axis=1)
    direct = window.steps(space.workload.tensors[t], trips, bound.way_orders, {})
    assert (direct > 1).any()
    known, tensor = {}, space.workload.tensors[t]
    for _ in range(2):
        assert np.array_equal(window.steps_once(tensor, trips, bound.way_orders, known, {}), direct)
    assert len(known) < trips.shape[1]

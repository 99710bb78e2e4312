"""The walk on several cores (`parallel.py`): the shares cover the tree exactly, the workers
together return what one does (and what exhaustive search does), and a worker that fails has
its share walked by the parent; and the walk's cut of children before they are priced
(`joint._Cut`), which keeps every optimum."""
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mapper.constraints import Constraints
from mapper.cost import evaluate_many
from mapper.load import arch_from_dict, load_arch
from mapper.mapping import from_table
from mapper.mapspace import Mapspace
from mapper.search import Exhaustive, Joint, parse_objective
from mapper.search.objective import table_of_key
from mapper.search.parallel import mine
from mapper.search.keep_parts import bounded_part
from mapper.search.result import Budget, Incumbent
from mapper.search.tree import LevelTree
import mapper.search.joint as joint_module

from test_mapspace import W, gemm


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 6), st.integers(1, 5), st.integers(0, 2**31 - 1))
def test_the_shares_partition_the_nodes_and_spread_them(workers, rows, seed):
    # the decided factors of nodes: powers of two, as on every bench case
    prefix = 2 ** np.random.default_rng(seed).integers(0, 12, size=(rows, 4_000))
    shares = np.stack([mine(prefix, w, workers) for w in range(workers)])
    assert (shares.sum(axis=0) == 1).all()          # every node in exactly one share
    distinct = len(np.unique(prefix, axis=1).T)
    if distinct >= 1_000:                            # many distinct nodes: none starved
        assert shares.sum(axis=1).min() > 0.7 * prefix.shape[1] / workers


@pytest.mark.parametrize("workers", [2, 3])
def test_the_shares_of_a_walk_hold_every_leaf_once(workers):
    arch = load_arch("toy")
    space = Mapspace(arch, gemm(8, 4, 4), Constraints(imperfect=True))
    objective = parse_objective("edp", arch)
    tree = LevelTree(space)

    def leaves(split):
        """Every leaf the walk offers, as content rows; the incumbent takes none, so that
        nothing is pruned."""
        walk = joint_module._Walk(space, objective, tree, Incumbent(space, objective), Budget(None), 4_000, None)
        walk.split, seen = split, []
        walk.incumbent.offer = lambda table, *a, **k: seen.append(_rows(table))
        assert walk.search_parts([bounded_part(space, objective, tree, walk.links)])
        return np.concatenate(seen)

    whole = leaves(None)
    shares = [leaves((w, workers)) for w in range(workers)]
    assert sum(map(len, shares)) == len(whole) > 1_000
    assert len(np.unique(np.concatenate(shares), axis=0)) == len(np.unique(whole, axis=0)) == len(whole)
    assert min(map(len, shares)) > 0.3 * len(whole) / workers      # none starved


def _rows(table):
    return np.concatenate([a.reshape(-1, len(table)) for a in (table.factors, table.order, table.keep, table.stages)]).T


def test_a_key_gives_back_its_mapping():
    arch = load_arch("toy")
    space = Mapspace(arch, gemm(8, 4, 4), Constraints())
    incumbent = Incumbent(space, parse_objective("edp", arch))
    incumbent.offer(space.sample(300, np.random.default_rng(3)))
    again = table_of_key(incumbent.key, incumbent.table)
    for ours, theirs in zip((again.factors, again.order, again.keep, again.stages),
                            (incumbent.table.factors, incumbent.table.order, incumbent.table.keep, incumbent.table.stages)):
        assert ours.dtype == theirs.dtype and (ours == theirs).all()


def _space():
    arch = load_arch("toy")
    return Mapspace(arch, gemm(16, 8, 8), Constraints()), arch


@pytest.mark.parametrize("objective", ["edp", "delay,energy"])
def test_several_cores_return_what_one_core_and_exhaustive_search_do(objective):
    space, arch = _space()
    goal = parse_objective(objective, arch)
    exact = Exhaustive().run(space, goal)
    # and the walk alone, from a poor mapping given (the dives find this optimum by themselves)
    poor = from_table(space.sample(1, np.random.default_rng(0)), 0)
    walk_only = dict(warm_start=False, cpsat_seconds=0, local_search=False, dives=0, incumbents=(poor,))
    for workers in (1, 2, 3):
        for options in ({}, walk_only):
            result = Joint(time_limit=None, parts_above=0, parallel_above=0, workers=workers, **options).run(space, goal)
            assert result.optimal and result.score == exact.score and result.mapping == exact.mapping
            assert any("cores" in note for note in result.notes) == (workers > 1)


def test_a_failed_worker_has_its_share_walked_by_the_parent(monkeypatch):
    space, arch = _space()
    goal = parse_objective("edp", arch)
    parent = os.getpid()
    walk_parts = joint_module._Walk.search_parts

    def failing_in_children(self, parts):
        if os.getpid() != parent:
            raise RuntimeError("lost")
        return walk_parts(self, parts)

    monkeypatch.setattr(joint_module._Walk, "search_parts", failing_in_children)
    result = Joint(time_limit=None, parts_above=0, parallel_above=0, workers=2).run(space, goal)
    exact = Exhaustive().run(space, goal)
    assert result.optimal and result.mapping == exact.mapping
    assert any("worker 1 failed (RuntimeError: lost)" in note for note in result.notes)


def _compute_bound_arch():
    """small_arch without bandwidth limits: every mapping's cycles are its compute cycles, so
    a bound on them from the units reached is tight, and any overstatement of it shows."""
    return arch_from_dict({
        "name": "compute-bound", "clock": "1 GHz",
        "levels": [{"name": "DRAM", "max_stages": 1, "energy": {"read": 100, "write": 100, "update": 100}},
                   {"name": "Buf", "capacity": "24 B", "max_stages": 2, "energy": {"read": 6, "write": 6, "update": 6}},
                   {"name": "RF", "capacity": "6 B", "instances": 4, "mesh": [2, 2],
                    "energy": {"read": 1, "write": 1, "update": 1}}],
        "compute": {"mesh": [2, 2], "instances": 4, "energy": 0.5}}, W)


@pytest.mark.parametrize("objective", ["cycles", "edp", "delay,energy"])
def test_the_units_cut_keeps_every_optimum_where_compute_binds(objective):
    # the walk drops children whose compute units bound them above the incumbent before it
    # prices them (`joint._Cut`); with compute binding, the optimum's own subtree is at the
    # edge of that cut. The walk alone starts from the costliest mapping among the fastest,
    # so that from the start the cut's bound meets the incumbent's cycles
    arch = _compute_bound_arch()
    space = Mapspace(arch, gemm(8, 4, 4), Constraints(imperfect=True, max_padding=0.25))
    goal = parse_objective(objective, arch)
    exact = Exhaustive().run(space, goal)
    table = next(space.tables(batch=10**6))
    costs = evaluate_many(arch, space.workload, table)
    fastest = np.flatnonzero(costs.valid & (costs.cycles == costs.cycles[costs.valid].min()))
    start = from_table(table, int(fastest[np.argmax(costs.energy_pj[fastest])]))
    for options in ({}, dict(warm_start=False, cpsat_seconds=0, local_search=False, dives=0, incumbents=(start,))):
        result = Joint(time_limit=None, workers=1, **options).run(space, goal)
        assert result.optimal and result.mapping == exact.mapping

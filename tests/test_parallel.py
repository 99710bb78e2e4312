"""The walk on several cores (`joint/parallel.py`): the shares cover the tree exactly, the
workers together return what one does (and what exhaustive search does), and a worker that
fails has its share walked by the parent; and the walk's cut of children before they are
priced (`joint/cut.py`), which keeps every optimum."""
import functools
import os
import time

import numpy as np
import pytest

from mapper.constraints import Constraints
from mapper.cost import evaluate_many
from mapper.load import arch_from_dict, load_arch
from mapper.mapping import from_table
from mapper.mapspace import Mapspace, sampling
from mapper.search import Exhaustive, Joint, JointTuning, SearchContext, parse_objective
from mapper.search.bounds import LinkBounds
from mapper.search.joint import synced
from mapper.search.joint.parallel import Claims, content_hashes
from mapper.search.joint.parts import bounded_part
from mapper.search.joint.walk import Walk, WalkSetup
from mapper.search.joint.workers import walk_in_parallel
from mapper.search.objective import table_of_key
from mapper.search.result import Incumbent
from mapper.search.tree import LevelTree

from test_mapspace import W, gemm


def test_content_hashes_tell_nodes_apart():
    # the decided factors of nodes: powers of two, as on every bench case, and every node once
    rng = np.random.default_rng(0)
    columns = np.unique(2 ** rng.integers(0, 12, size=(6, 200_000)), axis=1)
    first, second = content_hashes(columns)
    assert len(np.unique(np.stack([first, second]), axis=1).T) == columns.shape[1]
    assert len(np.unique(first)) == columns.shape[1]          # one hash alone already does here
    assert (first[:100] == content_hashes(columns[:, :100])[0]).all()       # a function of the column


def test_claims_hand_each_unit_to_one_worker_and_track_it():
    claims = Claims(slots=64)
    first, second = np.arange(1, 11) * 7, np.arange(1, 11) * 13
    mine, slots = claims.take(first, second)
    assert mine.all() and (slots >= 0).all()
    other = _as_worker(claims, 1)
    theirs, same = other.take(first[:5], second[:5])
    assert not theirs.any() and (same == slots[:5]).all()
    extra, _ = other.take(np.array([999]), np.array([5]))
    assert extra.all()
    claims.done(slots[:4])
    assert claims.pending()             # six of worker 0's and worker 1's one are not done
    claims.done(slots[4:])
    assert claims.pending()
    other.release(1)
    again, _ = claims.take(np.array([999]), np.array([5]))  # released: the next to reach it walks it
    assert again.all()


def test_a_full_claims_table_lets_every_worker_walk_the_unit():
    claims = Claims(slots=4)
    mine, slots = claims.take(np.arange(1, 9), np.arange(1, 9))
    assert mine.all() and (slots < 0).sum() >= 4
    theirs, _ = _as_worker(claims, 1).take(np.arange(1, 9), np.arange(1, 9))
    assert theirs[slots < 0].all() and not theirs[slots >= 0].any()


def test_fixed_owners_give_worker_0_what_it_reached_alone_and_share_the_rest():
    started = np.zeros(1, np.int64)     # `synced.SyncedKey.started`: set by worker 0 alone
    claims = Claims(slots=1024, fixed=2, started=started)
    other = claims.for_worker(1)
    first, second = np.arange(200) * 2 + 1, np.arange(200) * 3 + 1
    alone, _ = claims.take(first[:100], second[:100])
    assert alone.all()          # the others not started yet: every unit worker 0 reaches is its own
    started[0] = 4              # worker 0 has walked alone for 4 epochs: the others start
    late, _ = other.take(first, second)
    zero, _ = claims.take(first[100:], second[100:])
    assert not late[:100].any()             # what worker 0 reached alone stays its own
    assert (zero != late[100:]).all()       # the rest each walked by one
    assert 0.3 < late[100:].mean() < 0.7    # shared out by hash


def _as_worker(claims, worker):
    """The same table as another worker sees it (its own memo of answers)."""
    return claims.for_worker(worker)


@pytest.mark.parametrize("workers, clock", [(2, "wall"), (3, "wall"), (2, "work")])
def test_the_workers_walk_every_leaf_once(workers, clock, tmp_path, monkeypatch):
    """Forked workers claiming the units of one walk: the leaves they offer together are the
    leaves of the walk on one core, each once; the incumbent takes none, so that nothing is
    pruned. On a work clock the others start once worker 0 has priced an epoch's rows alone
    (`synced.SyncedKey.start`, here 200): they walk a share of what is left."""
    monkeypatch.setattr(synced, "SYNC_ROWS", 200)
    monkeypatch.setattr(synced, "JOIN_EPOCHS", 1)
    arch = load_arch("toy")
    space = Mapspace(arch, gemm(8, 4, 4), Constraints(factors="imperfect"))
    objective = parse_objective("edp", arch)
    tree = LevelTree(space)

    context = SearchContext() if clock == "wall" else SearchContext.for_command(None).for_search()
    setup = WalkSetup(space, objective, tree, LinkBounds(space), context, context.budget(None), JointTuning(),
                      4_000, False)

    def walk_and_record(walk, path):
        seen = []
        walk.incumbent.offer = lambda table, *a, **k: seen.append(_rows(table))
        complete = walk.search_parts([bounded_part(space, objective, tree, walk.links, walk.context)])
        np.save(path, np.concatenate(seen) if seen else np.zeros((0, 1), np.int64))
        return complete

    whole = tmp_path / "whole.npy"
    assert walk_and_record(Walk(setup, Incumbent(space, objective, context)), whole)
    incumbent = Incumbent(space, objective, context)
    incumbent.offer(sampling.sample(space, 1, np.random.default_rng(0)))
    incumbent.key = (np.inf,) * len(incumbent.key)      # a key to share that prunes nothing
    complete, _ = walk_in_parallel(setup, incumbent, workers,
                                   lambda walk: walk_and_record(walk, tmp_path / f"{os.getpid()}.npy"), [], [])
    assert complete
    shares = [np.load(path) for path in tmp_path.glob("*.npy") if path != whole]
    whole = np.load(whole)
    assert len(shares) == workers and sum(map(len, shares)) == len(whole) > 1_000
    walked = np.concatenate([share for share in shares if len(share)])     # a worker may get none
    assert len(np.unique(walked, axis=0)) == len(np.unique(whole, axis=0)) == len(whole)
    if clock == "work":             # the late one walked its share
        assert all(len(share) for share in shares)


def _rows(table):
    return np.concatenate([a.reshape(-1, len(table)) for a in (table.factors, table.order, table.keep, table.stages)]).T


def test_a_key_gives_back_its_mapping():
    arch = load_arch("toy")
    space = Mapspace(arch, gemm(8, 4, 4), Constraints())
    incumbent = Incumbent(space, parse_objective("edp", arch), SearchContext())
    incumbent.offer(sampling.sample(space, 300, np.random.default_rng(3)))
    again = table_of_key(incumbent.key, incumbent.table)
    for ours, theirs in zip((again.factors, again.order, again.keep, again.stages),
                            (incumbent.table.factors, incumbent.table.order, incumbent.table.keep, incumbent.table.stages)):
        assert ours.dtype == theirs.dtype and (ours == theirs).all()


def _space():
    arch = load_arch("toy")
    return Mapspace(arch, gemm(16, 8, 8), Constraints()), arch


@functools.cache
def _optimum(objective: str):
    """Exhaustive search's result on `_space()` under `objective` (once a process: three tests
    compare with edp's)."""
    space, arch = _space()
    return Exhaustive().run(space, parse_objective(objective, arch))


# edp on several cores in the slow run (the default run has it in test_search's and the
# sweep's parallel checks); the lexicographic key, shared between workers, in both
@pytest.mark.parametrize("objective", [pytest.param("edp", marks=pytest.mark.slow), "delay,energy"])
def test_several_cores_return_what_one_core_and_exhaustive_search_do(objective):
    space, arch = _space()
    goal = parse_objective(objective, arch)
    exact = _optimum(objective)
    # and the walk alone, from a poor mapping given (the dives find this optimum by themselves)
    poor = from_table(sampling.sample(space, 1, np.random.default_rng(0)), 0)
    walk_only = dict(warm_start=False, cpsat_seconds=0, local_search=False, dives=0, incumbents=(poor,))
    # two workers: the failed-worker tests below (the same claims, one child fewer)
    for workers in (1, 3):
        for options in ({}, walk_only):
            result = Joint(parts_above=0, parallel_above=0, workers=workers, **options).run(space, goal)
            assert result.optimal and result.score == exact.score and result.mapping == exact.mapping
            assert any("cores" in note for note in result.notes) == (workers > 1)


def test_a_failed_worker_has_its_share_walked_by_the_parent(monkeypatch):
    space, arch = _space()
    goal = parse_objective("edp", arch)
    parent = os.getpid()
    walk_parts = Walk.search_parts

    def failing_in_children(self, parts):
        if os.getpid() != parent:
            raise RuntimeError("lost")
        return walk_parts(self, parts)

    monkeypatch.setattr(Walk, "search_parts", failing_in_children)
    result = Joint(parts_above=0, parallel_above=0, workers=2).run(space, goal)
    exact = _optimum("edp")
    assert result.optimal and result.mapping == exact.mapping
    assert any("worker 1 failed (RuntimeError: lost)" in note for note in result.notes)


def lose_worker_one_mid_walk(monkeypatch, after: int = 0) -> None:
    """Worker 1 (a forked child) fails while pricing children of depth 2 or more, after
    `after` such calls, holding units it claimed and never finished; the parent starts its
    walk a second late, so that the child claims units first."""
    parent, price, search_parts, calls = os.getpid(), Walk.price, Walk.search_parts, []

    def failing_in_children(self, children, force_polish=False):
        if os.getpid() != parent and self.setup.claims is not None and children.depth >= 2:
            calls.append(1)
            if len(calls) > after:
                raise RuntimeError("lost")
        return price(self, children, force_polish)

    def parent_late(self, parts):
        if os.getpid() == parent:
            time.sleep(1.0)
        return search_parts(self, parts)

    monkeypatch.setattr(Walk, "price", failing_in_children)
    monkeypatch.setattr(Walk, "search_parts", parent_late)


def test_units_a_failed_worker_claimed_are_walked_by_the_parent(monkeypatch):
    # the worker fails in the middle of its walk, holding units it claimed and never finished
    space, arch = _space()
    goal = parse_objective("edp", arch)
    lose_worker_one_mid_walk(monkeypatch, after=1)
    # the walk alone, started at once in both, from a poor mapping: the child claims units
    poor = from_table(sampling.sample(space, 1, np.random.default_rng(0)), 0)
    result = Joint(parts_above=0, parallel_above=0, workers=2, warm_start=False, cpsat_seconds=0,
                   local_search=False, dives=0, incumbents=(poor,)).run(space, goal)
    exact = _optimum("edp")
    assert any("worker 1 failed (RuntimeError: lost)" in note for note in result.notes)
    assert result.optimal and result.mapping == exact.mapping


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
    # prices them (`joint/cut.py`); with compute binding, the optimum's own subtree is at the
    # edge of that cut. The walk alone starts from the costliest mapping among the fastest,
    # so that from the start the cut's bound meets the incumbent's cycles
    arch = _compute_bound_arch()
    space = Mapspace(arch, gemm(8, 4, 4), Constraints(factors="imperfect", max_padding=0.25))
    goal = parse_objective(objective, arch)
    exact = Exhaustive().run(space, goal)
    table = next(sampling.all_tables(space, batch=10**6))
    costs = evaluate_many(arch, space.workload, table)
    fastest = np.flatnonzero(costs.valid & (costs.cycles == costs.cycles[costs.valid].min()))
    start = from_table(table, int(fastest[np.argmax(costs.energy_pj[fastest])]))
    for options in ({}, dict(warm_start=False, cpsat_seconds=0, local_search=False, dives=0, incumbents=(start,))):
        result = Joint(workers=1, **options).run(space, goal)
        assert result.optimal and result.mapping == exact.mapping

"""The joint search's incumbents and the walk in keep parts on several cores: the units are
the parts' roots and their children's first dim (`walk.Walk._search_across`), done only once
the depth-1 nodes they became are walked, so that the workers still cover every leaf once and a
failed worker's units are walked by the parent; worker 0's polished dives, the cap on greedy's
start and the local search going on from another worker's better mapping change how soon the
optimum comes, never which."""
import functools
import os

import numpy as np

from mapper.constraints import Constraints, LevelConstraints
from mapper.load import load_arch
from mapper.mapping import from_table
from mapper.mapspace import Mapspace, pruning, sampling
from mapper.search import Exhaustive, Greedy, Joint, JointTuning, SearchContext, parse_objective
from mapper.search.bounds import LinkBounds
from mapper.search.joint import incumbents
from mapper.search.joint.dives import dive_parts
from mapper.search.joint.parts import split_by_keeps
from mapper.search.joint.walk import Walk, WalkSetup
from mapper.search.joint.workers import walk_in_parallel
from mapper.search.objective import key_of
from mapper.search.result import Incumbent
from mapper.search.tree import LevelTree

from test_mapspace import gemm
from test_parallel import lose_worker_one_mid_walk

BYPASS = Constraints(levels=(("every", LevelConstraints(bypass=True)),))


def _space(objective="energy", shape=(4, 2, 2)):
    arch = load_arch("toy")
    space = Mapspace(arch, gemm(*shape), BYPASS)
    return space, parse_objective(objective, arch)


@functools.cache
def _optimum():
    """Exhaustive search's result on `_space()`, which three tests compare with (computed once
    a process)."""
    return Exhaustive().run(*_space())


def _setup(space, objective, context=None, **tuning):
    context = context or SearchContext()
    return WalkSetup(space, objective, LevelTree(space), LinkBounds(space), context, context.budget(None),
                     JointTuning(**tuning), 4_000, False)


def _parts(setup):
    return split_by_keeps(setup.space, setup.objective, setup.tree, setup.links, setup.budget)


def _rows(table):
    return np.concatenate([a.reshape(-1, len(table)) for a in (table.factors, table.order, table.keep, table.stages)]).T


def test_workers_across_parts_walk_every_leaf_once(tmp_path):
    """Units at the parts' roots: the leaves two workers offer together are those one walk
    offers, each once (a shared key that prunes nothing)."""
    space, objective = _space(shape=(2, 2, 2))
    setup = _setup(space, objective)
    parts = _parts(setup)
    assert parts is not None and len(parts) > 2

    def walk_and_record(walk, path):
        seen = []
        walk.incumbent.offer = lambda table, *a, **k: seen.append(_rows(table))
        complete = walk.search_parts(parts)
        np.save(path, np.concatenate(seen) if seen else np.zeros((0, 1), np.int64))
        return complete

    whole = tmp_path / "whole.npy"
    assert walk_and_record(Walk(setup, Incumbent(space, objective, setup.context)), whole)
    incumbent = Incumbent(space, objective, setup.context)
    incumbent.offer(sampling.sample(space, 1, np.random.default_rng(0)))
    incumbent.key = (np.inf,) * len(incumbent.key)      # a key to share that prunes nothing
    complete, _ = walk_in_parallel(setup, incumbent, 2,
                                   lambda walk: walk_and_record(walk, tmp_path / f"{os.getpid()}.npy"), parts, [])
    assert complete
    shares = [np.load(path) for path in tmp_path.glob("*.npy") if path != whole]
    whole = np.load(whole)
    assert len(shares) == 2 and sum(map(len, shares)) == len(whole) > 1_000
    walked = np.concatenate([share for share in shares if len(share)])
    assert len(np.unique(walked, axis=0)) == len(np.unique(whole, axis=0)) == len(whole)


def test_units_a_failed_worker_held_across_parts_are_walked_by_the_parent(monkeypatch):
    """The child claims units at the parts' roots, collects their depth-1 nodes and fails
    while walking them: those units were never marked done, so the parent walks them and the
    result is still exhaustive search's."""
    space, objective = _space()
    # the first depth-1 nodes it walks: it holds the units they came from, not done
    lose_worker_one_mid_walk(monkeypatch)
    poor = from_table(sampling.sample(space, 1, np.random.default_rng(0)), 0)
    result = Joint(parts_above=0, parallel_above=0, workers=2, warm_start=False, cpsat_seconds=0,
                   local_search=False, dives=0, incumbents=(poor,)).run(space, objective)
    exact = _optimum()
    assert any("walked in" in note and "parts" in note for note in result.notes)
    assert any("worker 1 failed (RuntimeError: lost)" in note for note in result.notes)
    assert result.optimal and result.mapping == exact.mapping


def test_polished_dives_into_parts_end_after_their_patience():
    """Holding the optimum already, the polished dives find nothing better: they end after
    `polished_dive_patience` of them, where quick ones go on to `dive_patience`."""
    space, objective = _space()
    exact = _optimum()
    made = {}
    for polish in (True, False):
        setup = _setup(space, objective, polished_dive_patience=2, dive_patience=5)
        parts = _parts(setup)
        incumbent = Incumbent(space, objective, setup.context)
        incumbent.offer(_table(space, exact.mapping))
        walk = Walk(setup, incumbent)
        with walk.polishing(polish):
            made[polish] = dive_parts(walk, parts, 24, setup.context.budget(None), polish)
        assert incumbent.score == exact.score
    assert made == {True: 2, False: 5}


def _table(space, mapping):
    from mapper.mapping import to_table
    return to_table([mapping], space.n_dims, len(space.workload.tensors))


def test_greedy_start_is_one_quick_look_per_level():
    """The joint search's first incumbent is greedy's quick pass: it prices at most one quick
    look per level (a slice each, where the whole greedy pass prices more) and is a complete
    mapping of the space, the same on every run."""
    arch = load_arch("toy")
    space = Mapspace(arch, gemm(64, 64, 64), BYPASS)
    objective = parse_objective("energy", arch)
    full = SearchContext(time_limit=60, max_evaluations=10**8)
    Greedy().run(space, objective, full)
    starts = []
    for _ in range(2):
        context = SearchContext(time_limit=60, max_evaluations=10**8)
        incumbent, events = Incumbent(space, objective, context), []
        Joint()._warm_start(space, objective, incumbent, context, events)
        assert incumbent.table is not None and pruning.valid_mask(space, incumbent.table).all()
        assert context.priced < full.priced
        assert context.priced <= Greedy().slice * space.n_levels
        starts.append((incumbent.key, context.priced))
    assert starts[0] == starts[1]


class _Better:
    """A shared key (`parallel.SharedKey`) another worker lowers to `key` once `when()` holds."""

    def __init__(self, key, when=lambda: True):
        self.key, self.when = key, when

    def read(self):
        return self.key if self.when() else None

    def lower_to(self, key):
        if self.when():
            self.key = min(self.key, key)


def _poor_and_better():
    """A space, its objective, a poor mapping of it and the key of a better one."""
    space, objective = _space("energy")
    context = SearchContext()
    sample = sampling.sample(space, 400, np.random.default_rng(1))
    costs = context.price(space.arch, space.workload, sample)
    valid = np.flatnonzero(costs.valid & pruning.valid_mask(space, sample))
    order = valid[np.argsort(objective.score(costs)[valid])]
    return space, objective, sample.take(order[-1:]), key_of(objective, costs, sample, order[len(order) // 2])


def test_the_local_search_outdone_while_it_improves_goes_on():
    """Another worker's better mapping (a quick dive's) arrives once the local search from a
    poor mapping has improved on it: the search goes on (from that mapping where it ends at a
    local optimum above it), ending no worse than it and never below the optimum."""
    space, objective, poor, key = _poor_and_better()
    context = SearchContext()
    incumbent = Incumbent(space, objective, context)
    incumbent.offer(poor)
    start = incumbent.score
    assert start > key[0]
    incumbent.share(_Better(key, when=lambda: incumbent.score < start))
    event = incumbents.local_search(Joint().starts, Walk(_setup(space, objective, context), incumbent))
    assert event.rounds >= 1 and incumbent.score <= key[0] and not incumbent.outdone()
    assert _optimum().score <= incumbent.score == event.after


def test_the_local_search_outdone_before_it_improves_stops():
    """Outdone from the start (a dive found a better mapping before the local search from
    greedy's improved on it): polishing this one cannot help the walk, so it stops at once."""
    space, objective, poor, key = _poor_and_better()
    context = SearchContext()
    incumbent = Incumbent(space, objective, context)
    incumbent.offer(poor)
    start, priced = incumbent.score, context.priced
    incumbent.share(_Better(key))
    event = incumbents.local_search(Joint().starts, Walk(_setup(space, objective, context), incumbent))
    assert event.rounds == 0 and incumbent.score == start and context.priced == priced

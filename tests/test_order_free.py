"""The bound on a leaf factor choice before its loop orders are crossed in
(`search/joint/order_free.py`): each tensor finds its fewest fetches among a few orders, and
the joint search that cuts by it still returns what exhaustive search does."""
import itertools
from dataclasses import replace

import numpy as np
import pytest

from mapper.constraints import Constraints, LevelConstraints
from mapper.cost import evaluate_many
from mapper.load import workload_from_dict
from mapper.mapping import LevelMapping, Mapping, along_last, to_table
from mapper.mapspace import Mapspace, pruning
from mapper.orders import tensor_best_orders
from mapper.search import Exhaustive, Joint, parse_objective
from mapper.search.joint import order_free
from mapper.search.tree import Nodes
from mapper.units import Where

from scaled import quick_and_full
from strategies import problems
from test_mapspace import small_arch


def _reordered(mapping: Mapping, level: int, orders) -> list[Mapping]:
    """`mapping` with level `level`'s temporal loops in each of `orders` (of their dims)."""
    loops = dict(mapping.levels[level].temporal)
    out = []
    for order in orders:
        levels = list(mapping.levels)
        levels[level] = replace(levels[level], temporal=tuple((d, loops[d]) for d in order))
        out.append(Mapping(tuple(levels)))
    return out


def _least_over(arch, workload, mapping, level, dims, orders):
    """Each cost's least over every order of level `level`'s loops (`dims`) and over `orders`:
    (per-tensor energy, reads, fills, updates, MACs' energy, compute cycles) for both."""
    every = list(itertools.permutations(dims))
    n_dims, n_tensors = len(workload.dims), len(workload.tensors)
    costs = evaluate_many(arch, workload, to_table(_reordered(mapping, level, every + list(orders)),
                                                   n_dims, n_tensors))
    per_tensor = costs.level_energy.sum(axis=0)                 # (T, rows)
    leak = sum(lv.leak * lv.instances for lv in arch.levels)
    macs = costs.energy_pj - per_tensor.sum(axis=0) - leak * costs.cycles
    assert np.allclose(macs, macs[0], rtol=1e-12) and (costs.compute_cycles == costs.compute_cycles[0]).all()
    values = {"energy": per_tensor, "reads": costs.level_reads, "fills": costs.level_fills,
              "updates": costs.level_updates}
    return ({k: v[..., :len(every)].min(axis=-1) for k, v in values.items()},
            {k: v[..., len(every):].min(axis=-1) for k, v in values.items()})


def _reached(least_best, least_all) -> np.ndarray:
    return least_best <= least_all * (1 + 1e-12) + 1e-9


@quick_and_full(60, 400, problems(latency=True))
def test_each_tensor_finds_its_fewest_fetches_among_its_best_orders(problem):
    """For every level of a random mapping (bypass, stages, sliding and strided windows), the
    least energy each tensor takes over every order of the level's loops, and the fewest words
    it reads, is filled with and takes back at each level, are reached among
    `tensor_best_orders(every_link=True)`; without `every_link`, the fewest fills of each level
    directly below (no non-unit loop between), and the reads and updates it serves, are. The
    MACs' energy and the compute time do not depend on the order at all."""
    arch, workload, mapping = problem
    n_levels = len(arch.levels)
    for level in range(n_levels):
        dims = tuple(d for d, _ in mapping.levels[level].temporal)
        if len(dims) < 2:
            continue
        every = set(itertools.permutations(dims))
        narrow, wide = tensor_best_orders(workload, dims), tensor_best_orders(workload, dims, every_link=True)
        assert set(narrow) <= set(wide) <= every
        least_all, least_wide = _least_over(arch, workload, mapping, level, dims, wide)
        for key, value in least_wide.items():
            assert _reached(value, least_all[key]).all(), (key, dims, value, least_all[key])
        # the levels directly below `level`, and the levels above it (which no order changes)
        direct = [lv <= level or all(b == 1 for between in mapping.levels[level + 1:lv] for _, b in between.temporal)
                  for lv in range(n_levels)]
        _, least_narrow = _least_over(arch, workload, mapping, level, dims, narrow)
        for t in range(len(workload.tensors)):
            for lv in range(n_levels):
                consumer = next((c for c in range(lv + 1, n_levels) if t in mapping.levels[c].keep), None)
                checks = (["fills"] if direct[lv] else []) + (
                    ["reads", "updates"] if consumer is None or direct[consumer] else [])
                for key in checks:
                    assert _reached(least_narrow[key][lv, t], least_all[key][lv, t]), (key, lv, t, dims)


def test_a_sliding_window_fetched_below_a_split_loop_may_need_the_others_outside():
    """CI's counterexample to the narrow orders on every link: I[c,p+r,q+s] kept only two
    levels down, under a loop r2 at the level between. With k innermost at the top level each
    of k's steps undoes that r2 and breaks the chain of cancelling slides (26 fetches at
    best); with k outside the chain, 20. `every_link` reaches 20, and the level directly below
    (which keeps nothing here) has nothing to miss."""
    workload = _conv2d(k=2, c=1, p=2, q=2, r=4, s=1)
    arch = small_arch(capacity="1 KB", rf="1 KB")
    keep = lambda *tensors: frozenset(tensors)
    top = LevelMapping(temporal=((0, 2), (2, 2), (3, 2), (4, 2)), spatial=(), keep=keep(0, 1, 2), stages=1)
    mapping = Mapping((top, LevelMapping(temporal=((4, 2),), spatial=(), keep=keep(), stages=1),
                       LevelMapping(temporal=(), spatial=(), keep=keep(1), stages=1)))
    dims = (0, 2, 3, 4)
    least_all, least_narrow = _least_over(arch, workload, mapping, 0, dims, tensor_best_orders(workload, dims))
    _, least_wide = _least_over(arch, workload, mapping, 0, dims, tensor_best_orders(workload, dims, every_link=True))
    assert least_all["reads"][0, 1] == 20
    assert least_narrow["reads"][0, 1] == 26 and least_wide["reads"][0, 1] == 20


def _conv2d(k=2, c=2, p=4, q=2, r=2, s=2):
    return workload_from_dict({"name": "c2", "einsum": "O[k,p,q] += I[c,p+r,q+s] * W[k,c,r,s]",
                               "sizes": {"k": k, "c": c, "p": p, "q": q, "r": r, "s": s}, "dtype": 8,
                               "dtypes": {"O": 32}}, Where("<test>"))


# The default run's convolution has p=2 (every one of its six dims still 2, the cut still
# cutting under each objective): the exhaustive reference takes a third of the time. With bypass
# (each keep set a choice too: nine times the space) the default run's has q=1 as well, five
# dims of 2 (the cut still cuts 50 choices; 1 s instead of 5 s). The slow run repeats every
# objective with bypass at p=4.
SMALL = {"p": 2}
SIZES = {"p2": SMALL, "p2q1": {"p": 2, "q": 1}, "p4": {}}


@pytest.mark.parametrize("objective,bypass,size", [(o, False, "p2") for o in ("edp", "energy", "cycles", "delay,energy")]
                         + [("edp", True, "p2q1")]
                         + [pytest.param(o, True, "p4", marks=pytest.mark.slow)
                            for o in ("edp", "energy", "cycles", "delay,energy")])
def test_the_joint_search_cutting_factor_choices_before_their_orders_returns_the_optimum(monkeypatch, objective,
                                                                                          bypass, size):
    """On a 2-D convolution (every order of its six loops its own class), the joint search
    bounds the buffer's factor choices before crossing in its orders, cuts some, and still
    returns exactly exhaustive search's mapping (the register files keeping every tensor, or
    choosing what to keep)."""
    arch = small_arch(capacity="96 B", rf="8 B")
    constraints = Constraints(levels=(("innermost", LevelConstraints(bypass=True)),)) if bypass else Constraints()
    space = Mapspace(arch, _conv2d(**SIZES[size]), constraints)
    objective = parse_objective(objective, arch)
    seen = []
    beaten = order_free.OrderFreeCut._beaten

    def counted(self, choices, allowed, parents, bar):
        out = beaten(self, choices, allowed, parents, bar)
        seen.append((len(out), int(out.sum())))
        return out
    monkeypatch.setattr(order_free.OrderFreeCut, "_beaten", counted)
    exact = Exhaustive().run(space, objective)
    # no incumbent before the walk: the cut meets choices better than what the walk holds
    joint = Joint(warm_start=False, local_search=False, dives=0, cpsat_seconds=0, parts_above=10**9,
                  parallel_above=10**9, workers=1).run(space, objective)
    assert joint.optimal and joint.score == exact.score and joint.mapping == exact.mapping
    assert sum(cut for _, cut in seen) > 0


@pytest.mark.parametrize("bypass", [False, pytest.param(True, marks=pytest.mark.slow)])   # 20 s with bypass
def test_a_factor_choice_bound_is_below_every_completion_of_it(bypass):
    """`OrderFreeCut.bounds` on every factor choice under the depth-1 nodes of a 2-D
    convolution's space: its energy and cycles bounds lie below the least energy and the
    fewest cycles among the choice's completions (every order, stage count and keep set), and
    a choice is bounded infinite exactly where none of them is valid."""
    from mapper.search.fitting_children import fitting_children
    from mapper.search.tree import LevelTree, feasible
    from test_joint import _walk
    arch = small_arch(capacity="96 B", rf="8 B")
    constraints = Constraints(levels=(("innermost", LevelConstraints(bypass=True)),)) if bypass else Constraints()
    # the default run's case at p=2 (half the time); the slow run's, with bypass, at p=4
    space = Mapspace(arch, _conv2d(**({} if bypass else SMALL)), constraints)
    tree = LevelTree(space)
    walk = _walk(space, parse_objective("edp", arch), tree)
    nodes = tree.children(tree.roots())
    nodes = nodes.take(np.flatnonzero(feasible(space, 1, tree.table(nodes))))
    assert tree.leaf_depth == 2
    cut = order_free.OrderFreeCut(walk.view(), nodes, np.zeros(len(nodes)))
    found = []
    for _ in fitting_children(tree, nodes, 10**6, cut=lambda parents, units, groups: found.append(
            (parents, groups)) or np.zeros(len(parents), bool)):
        pass
    checked = 0
    for parents, groups in found:
        choices = Nodes(2, groups, *(along_last(a, parents) for a in (nodes.orders, nodes.stages, nodes.keeps)))
        allowed = tree.fitting_choices(choices)
        energy, cycles = cut.bounds(choices, allowed, parents)
        rows, choice_of = tree.expand(choices, 1, allowed=allowed)
        table = tree.table(rows)
        valid = pruning.valid_mask(space, table)
        costs = evaluate_many(arch, space.workload, table)
        least_energy, fewest_cycles = np.full(len(parents), np.inf), np.full(len(parents), np.inf)
        np.minimum.at(least_energy, choice_of[valid], costs.energy_pj[valid])
        np.minimum.at(fewest_cycles, choice_of[valid], costs.cycles[valid])
        assert (np.isinf(energy) == np.isinf(least_energy)).all()
        assert (energy <= least_energy * (1 + 1e-9)).all() and (cycles <= fewest_cycles * (1 + 1e-9)).all()
        checked += int(np.isfinite(energy).sum())
    assert checked > 100

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
from mapper.mapping import Mapping, along_last, to_table
from mapper.mapspace import Mapspace
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


@quick_and_full(60, 400, problems(latency=True))
def test_each_tensor_finds_its_fewest_fetches_among_its_best_orders(problem):
    """For every level of a random mapping (bypass, stages, sliding and strided windows), the
    least energy each tensor takes over every order of the level's loops, and the fewest words
    it reads and writes at each level, are reached among `tensor_best_orders`; the MACs'
    energy and the compute time do not depend on the order at all."""
    arch, workload, mapping = problem
    n_dims, n_tensors = len(workload.dims), len(workload.tensors)
    for level in range(len(arch.levels)):
        dims = tuple(d for d, _ in mapping.levels[level].temporal)
        if len(dims) < 2:
            continue
        every = list(itertools.permutations(dims))
        best = tensor_best_orders(workload, dims)
        assert set(best) <= set(every)
        costs = evaluate_many(arch, workload, to_table(_reordered(mapping, level, every + list(best)),
                                                       n_dims, n_tensors))
        per_tensor = costs.level_energy.sum(axis=0)                 # (T, rows)
        # each tensor's energy, and its reads and writes at every level, at their least
        for values in (per_tensor, costs.level_reads, costs.level_fills + costs.level_updates):
            least_all, least_best = values[..., :len(every)].min(axis=-1), values[..., len(every):].min(axis=-1)
            assert (least_best <= least_all * (1 + 1e-12) + 1e-9).all(), (dims, least_best, least_all)
        others = costs.energy_pj - per_tensor.sum(axis=0)
        leak = sum(lv.leak * lv.instances for lv in arch.levels)
        macs = others - leak * costs.cycles
        assert np.allclose(macs, macs[0], rtol=1e-12) and (costs.compute_cycles == costs.compute_cycles[0]).all()


def _conv2d(k=2, c=2, p=4, q=2, r=2, s=2):
    return workload_from_dict({"name": "c2", "einsum": "O[k,p,q] += I[c,p+r,q+s] * W[k,c,r,s]",
                               "sizes": {"k": k, "c": c, "p": p, "q": q, "r": r, "s": s}, "dtype": 8,
                               "dtypes": {"O": 32}}, Where("<test>"))


# with bypass at the register files, each search takes about 12 s here: one in the default run
@pytest.mark.parametrize("objective,bypass", [(o, False) for o in ("edp", "energy", "cycles", "delay,energy")]
                         + [("edp", True)]
                         + [pytest.param(o, True, marks=pytest.mark.slow) for o in ("energy", "cycles", "delay,energy")])
def test_the_joint_search_cutting_factor_choices_before_their_orders_returns_the_optimum(monkeypatch, objective,
                                                                                          bypass):
    """On a 2-D convolution (every order of its six loops its own class), the joint search
    bounds the buffer's factor choices before crossing in its orders, cuts some, and still
    returns exactly exhaustive search's mapping (the register files keeping every tensor, or
    choosing what to keep)."""
    arch = small_arch(capacity="96 B", rf="8 B")
    constraints = Constraints(levels=(("innermost", LevelConstraints(bypass=True)),)) if bypass else Constraints()
    space = Mapspace(arch, _conv2d(), constraints)
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
    space = Mapspace(arch, _conv2d(), constraints)
    tree = LevelTree(space)
    walk = _walk(space, parse_objective("edp", arch), tree)
    nodes = tree.children(tree.roots())
    nodes = nodes.take(np.flatnonzero(feasible(space, 1, tree.table(nodes))))
    assert tree.leaf_depth == 2
    cut = order_free.OrderFreeCut(walk, nodes, np.zeros(len(nodes)))
    found = []
    for _ in fitting_children(tree, nodes, 10**6, cut=lambda parents, units, groups: found.append(
            (parents, groups)) or np.zeros(len(parents), bool)):
        pass
    checked = 0
    for parents, groups in found:
        choices = Nodes(2, groups, *(along_last(a, parents) for a in (nodes.orders, nodes.stages, nodes.keeps)))
        allowed = tree._fitting_choices(choices)
        energy, cycles = cut.bounds(choices, allowed, parents)
        rows, choice_of = tree.expand(choices, 1, allowed=allowed)
        table = tree.table(rows)
        valid = space.valid_mask(table)
        costs = evaluate_many(arch, space.workload, table)
        least_energy, fewest_cycles = np.full(len(parents), np.inf), np.full(len(parents), np.inf)
        np.minimum.at(least_energy, choice_of[valid], costs.energy_pj[valid])
        np.minimum.at(fewest_cycles, choice_of[valid], costs.cycles[valid])
        assert (np.isinf(energy) == np.isinf(least_energy)).all()
        assert (energy <= least_energy * (1 + 1e-9)).all() and (cycles <= fewest_cycles * (1 + 1e-9)).all()
        checked += int(np.isfinite(energy).sum())
    assert checked > 100

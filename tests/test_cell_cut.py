"""The factor choices that decide the innermost level's cell, each bounded by its own cell
before its orders are crossed in (`joint/cell_cut.py`, `InnermostBound.cell_least`): below
every completion of the choice, and the joint search with it equal to exhaustive search."""
import numpy as np
import pytest

from mapper.cost import evaluate_many
from mapper.search import Exhaustive, Joint, parse_objective
from mapper.search.joint import cell_cut
from mapper.search.tree import LevelTree, feasible

from test_copies import _completions, factor_choices
from test_joint import _walk
from test_window_fills import CASES, _space

GEMM = ("Z[m,n] += A[m,k] * B[k,n]", {"m": 8, "n": 4, "k": 6}, "4 B")


# the 2-D convolutions (7 and 40 s) in the slow run
@pytest.mark.parametrize("einsum, sizes, capacity", [CASES[2], CASES[4], GEMM] + [
    pytest.param(*case, marks=pytest.mark.slow) for case in (CASES[0], CASES[3])])
def test_a_choice_is_cut_only_where_every_completion_of_it_is_beaten(einsum, sizes, capacity):
    """For every factor choice of the depth-1 nodes (the buffer's, which leaves the PEs their
    tile): under bars at the 10th, 50th and 90th percentile of the choices' least energies,
    the cut drops none whose completions beat the bar, and drops some."""
    space = _space(einsum, sizes, capacity)
    tree = LevelTree(space)
    objective = parse_objective("energy", space.arch)
    walk = _walk(space, objective, tree)
    nodes = tree.children(tree.roots())
    nodes = nodes.take(np.flatnonzero(feasible(space, 1, tree.table(nodes))))
    assert tree.leaf_depth == 2 and cell_cut.CellCut.applies(walk.view(), nodes)
    cut = cell_cut.CellCut(walk.view(), nodes, np.zeros(len(nodes)))
    parents, groups, choices = factor_choices(tree, nodes)
    expanded, choice_of = tree.expand(choices, 1)
    completions, origin = _completions(tree, space, expanded)
    least = np.full(len(choices), np.inf)
    np.minimum.at(least, choice_of[origin], evaluate_many(space.arch, space.workload, completions).energy_pj)
    finite = np.isfinite(least)
    assert finite.sum() > 20
    dropped = 0
    for bar in np.quantile(least[finite], [0.1, 0.5, 0.9]):
        beaten = cut(parents, groups, (bar, bar, 0.0))
        assert not (beaten & (least < bar * (1 - 1e-9))).any()
        dropped += int(beaten[finite].sum())
    assert dropped > 0


@pytest.mark.parametrize("einsum, sizes, capacity", [CASES[1], CASES[2], GEMM])
@pytest.mark.parametrize("objective", ["edp", "energy"])
def test_the_joint_search_with_the_cell_cut_returns_the_optimum(monkeypatch, einsum, sizes, capacity, objective):
    """Joint search, its leaves' factor choices cut by their cells, returns exactly
    exhaustive search's mapping, and the cut drops some choices."""
    space = _space(einsum, sizes, capacity)
    objective = parse_objective(objective, space.arch)
    seen = []
    call = cell_cut.CellCut.__call__

    def counted(self, *args):
        out = call(self, *args)
        seen.append(int(out.sum()))
        return out
    monkeypatch.setattr(cell_cut.CellCut, "__call__", counted)
    exact = Exhaustive().run(space, objective)
    joint = Joint(local_search=False, dives=0, cpsat_seconds=0, parts_above=10**9,
                  parallel_above=10**9, workers=1).run(space, objective)
    assert joint.optimal and joint.score == exact.score and joint.mapping == exact.mapping
    assert sum(seen) > 0

"""Partial factor choices dropped while their dims are crossed in, by the most compute units
their later dims can still reach (`Cut.reaching`, `fitting_children._most_later_units`): the
children that come out are exactly those the cut keeps without it, and some are dropped."""
import numpy as np
import pytest

from mapper.search import Exhaustive, parse_objective
from mapper.search.fitting_children import _most_later_units, _child_values, fitting_children
from mapper.search.joint.cut import Cut
from mapper.search.tree import LevelTree, feasible
from mapper.search.warm import admit

from test_joint import _walk
from test_window_fills import CASES, _space

GEMM = ("Z[m,n] += A[m,k] * B[k,n]", {"m": 8, "n": 8, "k": 4}, "4 B")


def _children(tree, nodes, cut) -> tuple[np.ndarray, ...]:
    """Every child `fitting_children` gives under `cut`, as columns (groups, orders, stages,
    keeps), in the order they come."""
    out = [child for _, child in fitting_children(tree, nodes, 64, cut=cut) if child is not None]
    if not out:
        return ()
    return tuple(np.concatenate([getattr(c, name).reshape(-1, len(c)) if name != "groups" else c.groups.T
                                 for c in out], axis=1) for name in ("groups", "orders", "stages", "keeps"))


def depth_one_under_optimum(space, objective):
    """The tree, a walk of it whose incumbent is the optimum, the depth-1 nodes that fit and
    their bounds (priced before the optimum was offered: kept under no incumbent)."""
    tree = LevelTree(space)
    walk = _walk(space, objective, tree)
    nodes = tree.children(tree.roots())
    nodes = nodes.take(np.flatnonzero(feasible(space, 1, tree.table(nodes))))
    rows, known, _ = walk.price(nodes)
    walk.incumbent.offer(admit(space, Exhaustive().run(space, objective).mapping))
    return tree, walk, nodes.take(rows), known


@pytest.mark.parametrize("einsum, sizes, capacity, objective", [(*CASES[2], "edp"), (*GEMM, "cycles")])
def test_partial_choices_dropped_by_their_units_are_only_those_the_cut_drops(einsum, sizes, capacity, objective):
    """Under the optimum as incumbent and under a bar half as high (which beats more), the
    depth-1 nodes' children with the partial choices' units test are the children without
    it, and the test drops some partial choices under the lower bar."""
    space = _space(einsum, sizes, capacity)
    tree, walk, nodes, known = depth_one_under_optimum(space, parse_objective(objective, space.arch))
    optimum = walk.incumbent.key
    dropped = 0
    for scale in (1.0, 0.5):
        bar = (optimum[0] * scale,) + tuple(optimum[1:])
        walk.incumbent.key = bar       # a stand-in key, its score scaled: what the cut prunes against
        with_reach = Cut(walk, nodes, known)
        assert with_reach.reaching is not None
        asked = []

        def reaching(parents, most, first, cut=with_reach):
            keep = cut._reaching(parents, most, first)
            asked.append(int((~keep).sum()))
            return keep
        with_reach.reaching = reaching
        without = Cut(walk, nodes, known)
        without.reaching = None
        expected, got = _children(tree, nodes, without), _children(tree, nodes, with_reach)
        assert len(expected) == len(got)
        for a, b in zip(expected, got):
            assert np.array_equal(a, b)
        dropped += sum(asked)
    assert dropped > 0


def test_the_most_later_units_are_the_products_of_each_nodes_largest_later_splits():
    """Node by node on the PE array's 4 x 4 mesh, from each node's own child groups: per
    dim, the later dims' largest spatial factors multiplied, capped by the fanout, and 1 past
    the last dim."""
    space = _space(*GEMM)
    tree = LevelTree(space)
    nodes = tree.children(tree.roots())
    values = [_child_values(tree, d, 1) for d in range(tree.n_dims)]
    most = _most_later_units(tree, 1, values, nodes)
    lo, count = tree.factor_rows.child_ranges(nodes.depth, nodes.groups)
    fanout = np.array(space.arch.fanout(1))
    assert (most[-1] == 1).all()
    for n in range(len(nodes)):
        largest = np.array([[values[d][axis][lo[n, d]:lo[n, d] + count[n, d]].max() for axis in (0, 1)]
                            for d in range(tree.n_dims)])
        for d in range(tree.n_dims):
            assert (most[d, :, n] == np.minimum(np.prod(largest[d:], axis=0), fanout)).all()
    assert (most[0] > 1).any() and (most[0] < fanout[:, None]).any()

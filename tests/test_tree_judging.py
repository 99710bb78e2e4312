"""What the tree decides about a factor choice before its loop orders are crossed in: which
stage and keep options are valid or feasible (`LevelTree._judged`), and slices cut in pieces
(`fitting_children`'s `most_rows`): neither changes the children, only how they are made."""
import numpy as np
import pytest

from mapper.constraints import Constraints, LevelConstraints
from mapper.mapspace import Mapspace, pruning
from mapper.search.fitting_children import fitting_children
from mapper.search.tree import JUDGED_ABOVE, LevelTree, Nodes, feasible

from test_mapspace import small_arch
from test_order_free import _conv2d


def _rows(tree: LevelTree, nodes: Nodes) -> set:
    table = tree.table(nodes)
    return {tuple(column) for column in np.vstack([table.factors.reshape(-1, len(table)),
                                                   table.order.reshape(-1, len(table)),
                                                   table.stages, table.keep.reshape(-1, len(table))]).T}


def _kept(space: Mapspace, tree: LevelTree, children: Nodes) -> Nodes:
    """The children a pricing would keep: valid if complete, else feasible."""
    table = tree.table(children)
    complete = children.depth >= tree.leaf_depth
    ok = pruning.valid_mask(space, table) if complete else feasible(space, children.depth, table)
    return children.take(np.flatnonzero(ok))


@pytest.mark.parametrize("bypass", [False, True])
def test_judging_a_choice_on_one_order_keeps_exactly_what_pricing_would(monkeypatch, bypass):
    """On a 2-D convolution (up to 720 orders a level), at every depth: the children the tree
    makes are the children it made before judging, less exactly those that pricing would rule
    out (invalid complete mappings, infeasible partial ones); and where it judged any apart."""
    constraints = Constraints(levels=(("innermost", LevelConstraints(bypass=True)),)) if bypass else Constraints()
    # a native shape whose roles the convolution's dims fill together (m = p.q, k = c.r.s):
    # fragments then rule out tiles the capacities allow
    arch = small_arch(capacity="96 B", rf="32 B", native_shape={"m": 2, "n": 1, "k": 4})
    space = Mapspace(arch, _conv2d(p=2), constraints)     # p=2: every dim 2, a third of p=4's time
    tree = LevelTree(space)
    judged = []
    original = LevelTree._judged

    def counted(self, nodes, fits):
        out = original(self, nodes, fits)
        judged.append(int(fits.sum() - out.sum()))
        return out
    nodes = tree.roots()
    for depth in range(tree.leaf_depth):
        monkeypatch.setattr(LevelTree, "_judged", counted)
        children = tree.children(nodes)
        monkeypatch.setattr(LevelTree, "_judged", lambda self, nodes, fits: fits)
        reference = _kept(space, tree, tree.children(nodes))
        assert _rows(tree, children) == _rows(tree, reference)
        nodes = _kept(space, tree, children)
        monkeypatch.setattr(LevelTree, "_judged", original)
    assert tree.expansion(1) >= JUDGED_ABOVE and sum(judged) > 0


def test_a_slice_in_pieces_holds_the_same_children():
    """`fitting_children` with `most_rows` far below a slice's children gives the same
    children, in the same order, in more pieces, none above the limit by more than a choice."""
    space = Mapspace(small_arch(capacity="96 B", rf="8 B"), _conv2d())
    tree = LevelTree(space)
    nodes = tree.children(tree.roots())
    nodes = nodes.take(np.flatnonzero(feasible(space, 1, tree.table(nodes)))[:20])
    whole = [c for _, c in fitting_children(tree, nodes, 10**6) if c is not None]
    pieces = [c for _, c in fitting_children(tree, nodes, 10**6, most_rows=lambda: 50) if c is not None]
    assert len(pieces) > len(whole)
    joined = Nodes.concat(pieces)
    assert (Nodes.concat(whole).groups == joined.groups).all()
    assert (Nodes.concat(whole).orders == joined.orders).all()
    most = tree.expansion(1)
    assert all(len(p) <= 50 + most for p in pieces)

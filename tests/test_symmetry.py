"""The symmetries the joint search uses: a level whose mesh axes are interchangeable
(`Mapspace.mirrored`; the walk generates one of each pair of mirror images,
`fitting_children`), and the workload's dim permutations that map it onto itself
(`joint/images.py`: a new best's images are offered to the incumbent). Both rest on equal
costs, checked here on random architectures, workloads and mappings; that the joint search
still returns exactly what exhaustive search does is `test_joint.py`'s and `test_search.py`'s
(their random architectures have such levels, their GEMMs square shapes)."""
import dataclasses

import numpy as np
from hypothesis import assume, strategies as st

from mapper.constraints import Constraints, LevelConstraints
from mapper.cost import evaluate, evaluate_many
from mapper.load import load_arch, load_constraints, load_workload, workload_from_dict
from mapper.mapping import MappingTable, from_table, to_table
from mapper.mapspace import Mapspace, sampling
from mapper.search import Exhaustive, SearchContext, parse_objective
from mapper.search.fitting_children import fitting_children
from mapper.search.joint.cut import Cut
from mapper.search.joint.images import image_of, offer_images, symmetries
from mapper.search.result import Incumbent
from mapper.search.tree import LevelTree, feasible
from mapper.search.warm import admit
from mapper.units import Where

from scaled import quick_and_full
from strategies import archs, workloads
from test_units_reach import depth_one_under_optimum
from test_window_fills import _space

BYPASS = Constraints(levels=(("every", LevelConstraints(bypass=True)),))
GEMM_8 = ("Z[m,n] += A[m,k] * B[k,n]", {"m": 8, "n": 8, "k": 4}, "4 B")


def _costs_equal(a, b) -> list[str]:
    """The fields of two `Costs` that differ (arrays compared exactly)."""
    return [f.name for f in dataclasses.fields(a) if isinstance(getattr(a, f.name), np.ndarray)
            and not np.array_equal(getattr(a, f.name), getattr(b, f.name), equal_nan=True)]


def _mirrored(table: MappingTable, level: int) -> MappingTable:
    factors = table.factors.copy()
    factors[level, [1, 2]] = table.factors[level, [2, 1]]
    return MappingTable(factors, table.order, table.keep, table.stages)


@quick_and_full(25, 300, st.data())
def test_a_mirror_image_costs_exactly_the_same(data):
    """Swapping a mirrored level's x and y factors changes no count, energy, time or validity,
    in either path of the cost model, and leaves a member of the space."""
    arch = data.draw(archs(min_levels=2, max_levels=4, latency=data.draw(st.booleans()),
                           capacity=data.draw(st.booleans()), native=data.draw(st.booleans()),
                           gpu=data.draw(st.booleans()), clusters=data.draw(st.booleans())))
    workload = data.draw(workloads())
    space = Mapspace(arch, workload, BYPASS if data.draw(st.booleans()) else Constraints())
    levels = [lv for lv in range(space.n_levels) if space.mirrored[lv]]
    table = sampling.sample(space, 200, np.random.default_rng(data.draw(st.integers(0, 99))))
    assume(levels and len(table))        # about half the draws have a mirrored level
    costs = evaluate_many(space.arch, space.workload, table)
    for lv in levels:
        image = _mirrored(table, lv)
        assert _costs_equal(costs, evaluate_many(space.arch, space.workload, image)) == []
        for row in range(min(3, len(table))):
            a = evaluate(space.arch, space.workload, from_table(table, row))
            b = evaluate(space.arch, space.workload, from_table(image, row))
            assert (a.energy_pj, a.cycles) == (b.energy_pj, b.cycles)
            assert admit(space, from_table(image, row)) is not None


def test_which_levels_are_mirrored():
    """A fanout with the same children on both axes, and no constraint on one axis alone."""
    def mirrored(arch, constraints="default"):
        return Mapspace(load_arch(arch), load_workload("gemm-256"), load_constraints(constraints)).mirrored
    assert mirrored("pe-array") == (False, True, False)
    assert mirrored("eyeriss") == (False, False, False)          # 14 x 12
    assert not any(mirrored("h100"))
    one_axis = {"name": "x", "levels": {"GlobalBuffer": {"spatial_x": {"m": {"max": 4}}}}}
    assert mirrored("pe-array", one_axis) == (False, False, False)


def _children(tree, nodes, mirror):
    out = [c for _, c in fitting_children(tree, nodes, 256, mirror=mirror) if c is not None]
    return [tuple(column) for c in out
            for column in np.concatenate([c.groups.T, c.orders.reshape(-1, len(c)), c.stages, c.keeps]).T]


def test_the_walk_generates_one_of_each_pair_of_mirror_images():
    """The children generated with `mirror` are exactly those without it whose x factors
    come first by content at the split level (the one of the pair exhaustive search's ranking
    prefers), and some are left out."""
    space = _space(*GEMM_8)
    tree = LevelTree(space)
    nodes = tree.children(tree.roots())
    nodes = nodes.take(np.flatnonzero(feasible(space, 1, tree.table(nodes))))
    every, one = _children(tree, nodes, False), _children(tree, nodes, True)
    assert 0 < len(one) < len(every)
    kept = []
    for child in every:
        groups = np.array(child[:tree.n_dims])
        x = [int(tree.factor_rows.level_factors(2, groups[None], 1)[1, d, 0]) for d in range(tree.n_dims)]
        y = [int(tree.factor_rows.level_factors(2, groups[None], 1)[2, d, 0]) for d in range(tree.n_dims)]
        if x <= y:
            kept.append(child)
    assert one == kept


def _gemm(m, n, k, a="int8", b="int8"):
    return workload_from_dict({"name": "g", "einsum": "Z[m,n] += A[m,k] * B[k,n]", "sizes": {"m": m, "n": n, "k": k},
                               "dtype": "int8", "dtypes": {"A": a, "B": b, "Z": "int32"}}, Where("<test>"))


def test_the_symmetries_of_a_workload():
    """A square GEMM's m <-> n (A <-> B); none where the sizes or the operands' formats
    differ; a convolution's p <-> q with r <-> s."""
    assert symmetries(_gemm(8, 8, 4)) == [((1, 0, 2), (0, 2, 1))]
    assert symmetries(_gemm(8, 4, 4)) == []
    assert symmetries(_gemm(8, 8, 4, b="bf16")) == []
    conv = workload_from_dict({"name": "c", "einsum": "O[k,p,q] += I[c,p+r,q+s] * W[k,c,r,s]",
                               "sizes": {"k": 2, "c": 3, "p": 4, "q": 4, "r": 3, "s": 3}, "dtype": 8}, Where("<test>"))
    assert symmetries(conv) == [((0, 1, 3, 2, 5, 4), (0, 1, 2))]


def test_a_new_best_s_image_settles_a_tie_on_content():
    """On a square GEMM, the exhaustive optimum's mirror image through m <-> n costs the same
    and ranks after it; with the image as the incumbent, offering its images makes the
    optimum the incumbent."""
    space = _space(*GEMM_8)
    objective = parse_objective("energy", space.arch)
    best = Exhaustive().run(space, objective)
    (dims, tensors), = symmetries(space.workload)
    optimum = to_table([best.mapping], space.n_dims, len(space.workload.tensors))
    image = admit(space, from_table(image_of(optimum, dims, tensors), 0))
    assert image is not None
    a, b = evaluate_many(space.arch, space.workload, optimum), evaluate_many(space.arch, space.workload, image)
    assert (a.energy_pj[0], a.cycles[0]) == (b.energy_pj[0], b.cycles[0])
    assert not np.array_equal(image.factors, optimum.factors)
    incumbent = Incumbent(space, objective, SearchContext())
    incumbent.offer(image)
    assert from_table(incumbent.table, 0) != best.mapping
    offer_images(incumbent, symmetries(space.workload))
    assert from_table(incumbent.table, 0) == best.mapping


def test_nodes_kept_under_an_earlier_incumbent_are_checked_again():
    """A part's depth-1 nodes are kept when the part is expanded, and walked later: under a
    better incumbent found since, the cut drops those it beats at its first call (`fresh`
    False); a list made just above (`fresh`) is taken as kept under the incumbent of now."""
    space = _space(*GEMM_8)
    _, walk, nodes, known = depth_one_under_optimum(space, parse_objective("energy", space.arch))
    beaten = known.objective > walk.incumbent.score * (1 + 1e-6)
    assert beaten.any() and not beaten.all()
    everyone = np.arange(len(nodes))
    assert Cut(walk.view(), nodes, known).alive(everyone).all()
    assert not Cut(walk.view(), nodes, known, fresh=False).alive(everyone)[beaten].any()

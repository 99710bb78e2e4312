"""Partial loop orders (`innermost_order`, Timeloop's partial `permutation`): the named dims'
loops are a level's innermost, in the given order; the others are free outside them. Checked
against an independent filter of the unconstrained space, by the joint search against
exhaustive search, and on Timeloop's constraint files."""
import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import strategies as st

from mapper.constraints import Constraints, LevelConstraints
from mapper.errors import SpecError
from mapper.load import constraints_from_dict
from mapper.mapping import from_table
from mapper.mapspace import Mapspace, counting, sampling
from mapper.orders import signature
from mapper.search import Exhaustive, Joint, parse_objective
from mapper.search.warm import admit
from mapper.units import Where

from strategies import archs, workloads
from test_mapspace import conv1d, gemm, small_arch
from scaled import quick_and_full

TUTORIAL = Path(__file__).parent / "data" / "timeloop_format" / "tutorial_eyeriss_vgg"


def _qualifies(order: tuple[int, ...], tail: tuple[int, ...]) -> bool:
    """The rule itself, on one order of non-unit dims: its innermost loops are the non-unit dims
    of `tail`, in that order."""
    wanted = tuple(d for d in tail if d in order)
    return order[len(order) - len(wanted):] == wanted


def _keys(space: Mapspace):
    """(factor rows, order signature per level, keeps, stages) of every mapping in the space."""
    wl = space.workload
    out = set()
    for table in sampling.all_tables(space):
        for row in range(len(table)):
            mapping = from_table(table, row)
            out.add((table.factors[..., row].tobytes(),
                     tuple(signature(wl, tuple(d for d, _ in lm.temporal)) for lm in mapping.levels),
                     tuple(tuple(sorted(lm.keep)) for lm in mapping.levels),
                     tuple(lm.stages for lm in mapping.levels)))
    return out


def _orders_of(table, space):
    for row in range(len(table)):
        yield from_table(table, row)


@pytest.mark.parametrize("workload,tail", [(gemm(m=4, n=2, k=2), ("k",)), (gemm(m=4, n=2, k=2), ("n", "m")),
                                           (conv1d(), ("p",)), (conv1d(), ("r", "k"))])
def test_space_is_the_unconstrained_space_filtered_by_the_rule(workload, tail):
    """Every mapping of the constrained space obeys the rule, and every mapping of the
    unconstrained space that obeys it (or costs the same as one that does) is in it."""
    arch = small_arch()
    names = {d: i for i, d in enumerate(workload.dims)}
    tail_dims = tuple(names[d] for d in tail)
    constrained = Mapspace(arch, workload, Constraints(levels=(("Buf", LevelConstraints(innermost_order=tail)),)))
    free = Mapspace(arch, workload, Constraints())
    buf = arch.level_names.index("Buf")
    kept = _keys(constrained)
    for table in sampling.all_tables(constrained):
        for mapping in _orders_of(table, constrained):
            assert _qualifies(tuple(d for d, _ in mapping.levels[buf].temporal), tail_dims)
    expected = set()
    free_keys = _keys(free)
    for key in free_keys:
        sig = key[1][buf]
        # the non-unit dims at Buf are those of any order with this signature: recover them from
        # a mapping of the free space with this key; every order of them with the same signature
        # that obeys the rule makes the key admissible
        expected.add(key) if any(signature(workload, p) == sig and _qualifies(p, tail_dims)
                                 for p in _candidates(key, buf, workload, free)) else None
    assert kept == expected
    assert len(kept) < len(free_keys)                      # it prunes
    funnel = counting.funnel(constrained)
    assert funnel.exact and funnel.after["occupancy"] == len(kept)    # and counts what it keeps


def _candidates(key, lv, workload, space):
    factors = np.frombuffer(key[0], dtype=np.int64).reshape(space.n_levels, 3, space.n_dims)
    nonunit = [d for d in range(space.n_dims) if factors[lv, 0, d] > 1]
    return itertools.permutations(nonunit)


@quick_and_full(3, 25, st.data())
def test_joint_equals_exhaustive_with_partial_orders(data):
    workload = data.draw(workloads(kinds=("gemm", "conv1d", "batched"), max_macs=24))
    arch = data.draw(archs(min_levels=3, max_levels=4))
    levels = []
    for level in arch.levels:
        dims = data.draw(st.permutations(workload.dims))
        tail = tuple(dims[:data.draw(st.integers(0, 2))])
        if tail:
            levels.append((level.name, LevelConstraints(innermost_order=tail, bypass=data.draw(st.booleans()))))
    space = Mapspace(arch, workload, Constraints(levels=tuple(levels)))
    objective = parse_objective(data.draw(st.sampled_from(["edp", "energy", "cycles"])), arch)
    if counting.funnel(space).after["divisibility"] > 200_000:
        return
    exact = Exhaustive().run(space, objective)
    joint = Joint().run(space, objective)
    assert joint.optimal and joint.score == exact.score and joint.mapping == exact.mapping
    if exact.mapping is not None:
        for lv, (name, lc) in ((arch.level_names.index(n), (n, c)) for n, c in levels):
            order = tuple(d for d, _ in exact.mapping.levels[lv].temporal)
            tail = tuple(workload.dims.index(d) for d in lc.innermost_order)
            assert any(signature(workload, p) == signature(workload, order) and _qualifies(p, tail)
                       for p in itertools.permutations(order))


def test_bad_innermost_order_is_a_one_line_error():
    arch, workload = small_arch(), gemm()
    for bad, match in ((["m", "m"], "at most once"), (["q"], "innermost_order")):
        c = constraints_from_dict({"name": "x", "levels": {"Buf": {"innermost_order": bad}}}, Where("x.yaml"))
        with pytest.raises(SpecError, match=match):
            Mapspace(arch, workload, c)


def test_timeloop_partial_permutations_are_imported():
    """The tutorial's constraints say `permutation: N` at DRAM and shared_glb (N innermost);
    a hand-written `permutation: QP` (Q innermost, then P) becomes innermost_order [P, Q]."""
    from mapper.timeloop import build, read_parts
    from mapper.timeloop.constraints import translate
    imported = build(read_parts([TUTORIAL / n for n in ("arch.yaml", "problem.yaml", "map.yaml", "constraints.yaml")]))
    notes = []
    space_dict = translate(imported.arch_ctx, imported.arch, imported.workload, notes, "tutorial")
    assert space_dict["levels"]["DRAM"]["innermost_order"] == ["N"]
    assert space_dict["levels"]["shared_glb"]["innermost_order"] == ["N"]
    assert not any("partial permutation" in n for n in notes)
    space = Mapspace(imported.arch, imported.workload, constraints_from_dict(space_dict, Where("tutorial")))
    assert admit(space, imported.mapping) is not None        # Timeloop's own mapping is in the space
    ctx = imported.arch_ctx
    ctx.constraints.append({"target": "DRAM", "type": "temporal", "permutation": "QP",
                            "_where": Where("hand.yaml")})
    again = translate(ctx, imported.arch, imported.workload, [], "tutorial")
    assert again["levels"]["DRAM"]["innermost_order"] == ["P", "Q"]
    # Timeloop's mapping has DRAM loops Q2 P56 C4 M8 (M innermost): outside this space
    space = Mapspace(imported.arch, imported.workload, constraints_from_dict(again, Where("tutorial")))
    assert admit(space, imported.mapping) is None

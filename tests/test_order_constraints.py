"""Order constraints that leave some loop sets of a level no order at all (a mapspace that
forbids every order of a few dims, a stationary tensor whose orders are forbidden): the
joint and greedy searches and sampling stay inside the space, and the joint search's proven
optimum is exhaustive enumeration's (which expands each loop set over its allowed orders)."""
import itertools

import numpy as np
import pytest
from hypothesis import strategies as st

from mapper.constraints import Constraints, LevelConstraints
from mapper.errors import InfeasibleError
from mapper.mapspace import Mapspace, pruning, sampling
from mapper.search import Exhaustive, Greedy, Joint, parse_objective

from test_mapspace import gemm, small_arch
from scaled import quick_and_full


@st.composite
def order_constraints(draw):
    dims = ["m", "n", "k"]
    chosen = draw(st.lists(st.sampled_from(dims), min_size=1, max_size=3, unique=True))
    forbid = tuple(tuple(p) for p in itertools.permutations(chosen))
    if draw(st.booleans()):
        forbid = forbid[:draw(st.integers(1, len(forbid)))]
    stationary = draw(st.sampled_from([None, "output", "input", "weight"]))
    level = draw(st.sampled_from(["Buf", "RF"]))
    return Constraints(levels=((level, LevelConstraints(forbid=forbid, stationary=stationary)),))


def _check(constraints, objective_name):
    space = Mapspace(small_arch(capacity="64 B", rf="12 B"), gemm(8, 4, 4), constraints)
    objective = parse_objective(objective_name, space.arch)
    try:
        exact = Exhaustive().run(space, objective)
    except InfeasibleError:
        with pytest.raises(InfeasibleError):
            Joint(parallel_above=10**9).run(space, objective)
        return
    joint = Joint(parallel_above=10**9, cpsat_seconds=0).run(space, objective)
    assert joint.optimal and joint.score == exact.score
    greedy = Greedy().run(space, objective)
    assert greedy.score >= exact.score
    sample = sampling.sample(space, 2_000, np.random.default_rng(0))
    assert pruning.orders_allowed(space, sample.factors).all()


def test_every_order_of_two_dims_forbidden_at_the_innermost_level():
    forbid = tuple(itertools.permutations(("m", "n")))
    _check(Constraints(levels=(("RF", LevelConstraints(forbid=forbid, stationary="weight")),)), "edp")


@quick_and_full(4, 60, constraints=order_constraints(), objective=st.sampled_from(["edp", "energy", "cycles"]))
def test_joint_equals_exhaustive_under_forbidding_order_constraints(constraints, objective):
    _check(constraints, objective)

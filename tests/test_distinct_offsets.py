"""`tiles.distinct_offsets` (the cost model's multicast and a window's touched words) against
the set it counts, built by brute force: its closed forms (one run, disjoint copies) and its
enumeration must give the set's size exactly, whatever the steps' signs and order."""
from __future__ import annotations

import itertools

from hypothesis import strategies as st

from mapper.limits import MAX_INSTANCES
from mapper.tiles import MAX_OFFSETS, distinct_offsets
from scaled import quick_and_full

PROGRESSIONS = st.lists(st.tuples(st.integers(-40, 40), st.integers(1, 6)), max_size=4)


def brute_force(progressions) -> int:
    return len({sum(i * step for i, (step, _) in zip(point, progressions))
                for point in itertools.product(*(range(count) for _, count in progressions))})


@quick_and_full(200, 3000, PROGRESSIONS)
def test_the_count_is_the_size_of_the_set(progressions):
    assert distinct_offsets.__wrapped__(tuple(progressions)) == brute_force(progressions)


def test_closed_forms_on_long_runs():
    """A window sliding by its width (p + r, 2*p + r with r = 2) is one run; a stride past the
    window makes disjoint copies: counted without the set, as the set would count them."""
    assert distinct_offsets.__wrapped__(((1, 2**31 - 1), (1, 3))) == 2**31 + 1
    assert distinct_offsets.__wrapped__(((2, 2**31 - 1), (1, 2))) == 2 * (2**31 - 1)
    assert distinct_offsets.__wrapped__(((100, 2**31 - 1), (1, 3))) == 3 * (2**31 - 1)
    # steps 2 and 3 overlap irregularly: enumerated, exactly, up to MAX_OFFSETS sums
    assert distinct_offsets.__wrapped__(((2, 1000), (3, 1000))) == brute_force([(2, 1000), (3, 1000)])
    # every spatial progression of the cost model multiplies to at most the instances: exact
    assert MAX_OFFSETS >= MAX_INSTANCES

"""Every Timeloop reference case is reproduced: counts and cycles exactly, energy within 0.1% (its figures are rounded).

The figures come from Timeloop runs recorded in tests/data/timeloop_cases.yaml (see its header).
"""
import pytest


from timeloop_cases import assert_matches_timeloop, load_cases, specs

CASES = load_cases()


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_counts_energy_cycles_match_timeloop(case):
    assert_matches_timeloop(case, *specs(case))

"""Every Timeloop reference case is reproduced: counts exactly, cycles and energy within 0.1%.

The figures come from Timeloop runs recorded in tests/data/timeloop_cases.yaml (see its header).
"""
import pytest

from mapper.cost import evaluate, evaluate_many
from mapper.mapping import to_table

from timeloop_cases import load_cases, specs

CASES = load_cases()


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_counts_energy_cycles_match_timeloop(case):
    arch, workload, mapping = specs(case)
    ev = evaluate(arch, workload, mapping)
    costs = evaluate_many(arch, workload, to_table([mapping], len(workload.dims), len(workload.tensors)))
    compared = 0
    for stats in case["stats_per_level_inner_to_outer"]:
        if stats["kind"] == "compute":
            assert ev.macs == stats["computes_total"]
            assert ev.compute_instances == stats["utilized_instances"]
            assert ev.compute_energy_pj == pytest.approx(stats["energy_total_pJ"], rel=1e-3)
            continue
        lv = arch.level_names.index(stats["level"])
        level = ev.levels[lv]
        assert level.leak_pj == pytest.approx(stats["leakage_energy_total_pJ"], rel=1e-3, abs=0.01)
        for name, expected in stats["dataspaces"].items():
            t = workload.tensor_index(name)
            want = (expected["reads_per_instance"], expected["fills_per_instance"],
                    expected["updates_per_instance"])
            got = level.tensors[name]
            assert (got.reads, got.fills, got.updates) == want, (stats["level"], name)
            assert (costs.reads[0, lv, t], costs.fills[0, lv, t], costs.updates[0, lv, t]) == want
            assert level.instances == expected["utilized_instances"]
            assert got.tile_words == expected["utilized_capacity"]
            assert got.partition_words == expected["partition_size"]
            assert got.energy_pj == pytest.approx(expected["energy_total_pJ"], rel=1e-3, abs=0.01)
            compared += 1
    summary = case["summary"]
    assert ev.cycles == summary["cycles"] == costs.cycles[0]
    assert ev.energy_pj == pytest.approx(summary["energy_total_pJ_derived"], rel=1e-3)
    assert costs.energy_pj[0] == pytest.approx(summary["energy_total_pJ_derived"], rel=1e-3)
    assert f"{ev.utilization:.2%}" == summary["utilization"]
    assert compared == sum(len(s.get("dataspaces", {})) for s in case["stats_per_level_inner_to_outer"])

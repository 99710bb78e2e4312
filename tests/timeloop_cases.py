"""Turn the Timeloop reference cases (tests/data/timeloop_cases.yaml) into mapper specs.

The cases are facts: Timeloop's own per-level counts for given architectures, problems and
mappings. The conversion goes through mapper's YAML dict formats, so it exercises the loader.
"""
from __future__ import annotations

import functools
from pathlib import Path

import pytest
import yaml

from mapper.cost import evaluate, evaluate_many
from mapper.load import arch_from_dict, mapping_from_checked_dict, workload_from_dict
from mapper.mapping import to_table
from mapper.units import Where

CASES_FILE = Path(__file__).parent / "data" / "timeloop_cases.yaml"


@functools.cache
def load_cases() -> list[dict]:
    """The cases, read once a process (several test files collect their parameters from them)
    with libyaml's safe loader where PyYAML has it (the file is large: a second in pure Python)."""
    return yaml.load(CASES_FILE.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))["cases"]


def _is_dummy(level: dict) -> bool:
    return level.get("class") == "dummy_storage"


def workload_dict(case: dict) -> dict:
    problem = case["problem"]
    spaces = problem["data_spaces"]
    out = next(s for s in spaces if s["read_write"])
    ins = [s for s in spaces if not s["read_write"]]
    fmt = lambda s: f"{s['name']}[{','.join(i.replace(' ', '') for i in s['index'])}]"
    bits = case["architecture"][0]["datawidth"]
    return {"name": problem["name"], "einsum": f"{fmt(out)} += " + " * ".join(fmt(s) for s in ins),
            "sizes": dict(problem["instance"]), "dtype": bits}


def arch_dict(case: dict) -> dict:
    levels, compute = [], None
    for lv in case["architecture"]:
        ert = lv.get("ert_pJ_per_vector_action", {})
        mesh = [lv.get("meshX", lv["instances"]), lv["instances"] // lv.get("meshX", lv["instances"])]
        if lv["class"] == "intmac":
            compute = {"name": lv["name"], "instances": lv["instances"], "mesh": mesh,
                       "energy": ert["compute"]}
            continue
        if _is_dummy(lv):
            continue
        entry = {"name": lv["name"], "block_size": lv["width"] // lv["datawidth"],
                 "energy": {k: ert[k] for k in ("read", "write", "update")},
                 "leak": ert.get("leak", 0), "instances": lv["instances"], "mesh": mesh,
                 "max_stages": lv.get("multiple_buffering", 1)}
        if "depth" in lv:
            entry["capacity"] = lv["depth"] * lv["width"] // 8
        levels.append(entry)
    return {"name": case["id"], "clock": "1 GHz", "levels": levels, "compute": compute}


def mapping_dict(case: dict) -> list[dict]:
    dummies = {lv["name"] for lv in case["architecture"] if _is_dummy(lv)}
    out = []
    for entry in case["mapping_nest_outer_to_inner"]:
        loops = [{"dim": l["dim"], "bound": l["bound"]} for l in entry["loops"] if l["type"] == "temporal"]
        spatial = [{"dim": l["dim"], "bound": l["bound"], "axis": l["type"][-1]}
                   for l in entry["loops"] if l["type"].startswith("spatial")]
        if entry["level"] in dummies:      # fold a dummy fanout level into the level above
            out[-1]["spatial"] = out[-1].get("spatial", []) + spatial
            continue
        out.append({"level": entry["level"], "loops": loops, "spatial": spatial,
                    "keep": list(entry["keeps"])})
    return out


def specs(case: dict):
    where = Where(f"{CASES_FILE.name}:{case['id']}")
    arch = arch_from_dict(arch_dict(case), where)
    workload = workload_from_dict(workload_dict(case), where)
    mapping = mapping_from_checked_dict(mapping_dict(case), arch, workload, where)
    return arch, workload, mapping


def assert_matches_timeloop(case: dict, arch, workload, mapping) -> None:
    """Every count, energy, cycle figure and utilization Timeloop reported for `case`, on both
    cost paths."""
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

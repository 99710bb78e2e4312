"""The Timeloop+Accelergy tutorial's Eyeriss-like design on its VGG layer (C128 M256 P56 Q56
R3 S3), imported from Timeloop-format files: Timeloop's reported counts, cycles and energy, and
its partial loop-order constraints (tests/data/timeloop_format/tutorial_eyeriss_vgg/)."""
from pathlib import Path

import pytest
import yaml

from mapper import evaluate, evaluate_many, to_table
from mapper.timeloop import build, read_parts

DIR = Path(__file__).parent / "data" / "timeloop_format" / "tutorial_eyeriss_vgg"
REPORTED = yaml.safe_load((DIR / "reported.yaml").read_text())


def _import(rules: bool, constraints: bool = False):
    files = [DIR / n for n in ("arch.yaml", "problem.yaml", "map.yaml")]
    return build(read_parts(files + ([DIR / "constraints.yaml"] if constraints else [])),
                 timeloop_rules=rules)


def test_reported_counts_cycles_and_energy_reproduced():
    imported = _import(rules=True)
    ev = evaluate(imported.arch, imported.workload, imported.mapping)
    levels = {lc.name: lc for lc in ev.levels}
    for name, per_tensor in REPORTED["counts"].items():
        assert levels[name].instances == REPORTED["utilized"][name]
        for tensor, want in per_tensor.items():
            got = levels[name].tensors[tensor]
            assert [got.reads, got.fills, got.updates] == want, (name, tensor)
    assert ev.compute_instances == REPORTED["utilized"]["mac"]
    assert ev.macs == REPORTED["computes"]
    assert ev.cycles == REPORTED["cycles"]
    assert ev.energy_pj == pytest.approx(REPORTED["energy_pj"], rel=0.005)
    assert ev.energy_pj == pytest.approx(REPORTED["energy_pj"], rel=1e-9)     # in fact to the cent
    costs = evaluate_many(imported.arch, imported.workload,
                          to_table([imported.mapping], len(imported.workload.dims), len(imported.workload.tensors)))
    assert costs.cycles[0] == ev.cycles and costs.energy_pj[0] == pytest.approx(ev.energy_pj, rel=1e-12)


def test_this_projects_rules_differ_only_where_documented():
    """Without the Timeloop options: multicast pooled across the two fanouts (Q7 on X, S3 on Y
    slide the same input rows) reads shared_glb's Inputs less; leakage of every instance."""
    ours = _import(rules=False)
    ev = evaluate(ours.arch, ours.workload, ours.mapping)
    glb = next(lc for lc in ev.levels if lc.name == "shared_glb").tensors["Inputs"]
    assert glb.reads < REPORTED["counts"]["shared_glb"]["Inputs"][0]
    assert ev.cycles == REPORTED["cycles"]        # bandwidths applied, Timeloop's cycle rule: no throttling

"""Timeloop's published example designs, translated by hand (archs/ workloads/ constraints/
mappings/timeloop-*.yaml): the mapping Timeloop's mapper reported prices as recorded in
tests/data/timeloop_designs.yaml (Timeloop's figures, with their source), within the
differences explained there; it lies in the design's mapspace, so a search can start from it."""
from pathlib import Path

import pytest
import yaml

from mapper import evaluate, load_arch, load_mapping, load_workload
from mapper.load import load_constraints
from mapper.mapspace import Mapspace
from mapper.search.warm import admit

ROOT = Path(__file__).parent.parent
DESIGNS = yaml.safe_load((Path(__file__).parent / "data" / "timeloop_designs.yaml").read_text())["designs"]


@pytest.mark.parametrize("design", DESIGNS, ids=lambda d: d["design"])
def test_timeloop_mapping_prices_as_recorded(design):
    arch = load_arch(ROOT / design["arch"])
    workload = load_workload(ROOT / design["workload"])
    mapping = load_mapping(ROOT / design["mapping"], arch, workload)
    ev = evaluate(arch, workload, mapping)
    assert ev.cycles == design["timeloop"]["cycles"] == design["ours"]["cycles"]
    assert ev.energy_pj == pytest.approx(design["ours"]["energy_pj"], abs=0.01)
    assert ev.energy_pj == pytest.approx(design["timeloop"]["energy_pj"], rel=0.02)
    space = Mapspace(arch, workload, load_constraints(ROOT / design["mapspace"]))
    assert admit(space, mapping) is not None

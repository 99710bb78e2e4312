"""Timeloop files that almost worked: a mapping directive that targets a v0.4 container (Timeloop's
exercise 04 writes `target: PE`) reads as its fanout's dummy level, as Timeloop's front end reads
it; a container with no fanout is refused in one line; an ERT that does not match the arch is
an error naming the ERT file and key (it used to be a note and 0 pJ). The files are hand-written
(tests/data/timeloop_v04_targets/)."""
from pathlib import Path

import pytest

from mapper import evaluate
from mapper.cli import main
from mapper.timeloop import build, read_parts

HERE = Path(__file__).parent / "data" / "timeloop_v04_targets"


def imported(mapping: str, ert: Path = HERE / "ERT.yaml"):
    return build(read_parts([HERE / "arch.yaml", HERE / "problem.yaml", ert, HERE / mapping]))


def test_a_spatial_directive_on_a_container_is_its_fanout():
    by_container = imported("map_container.yaml")
    by_dummy = imported("map_dummy.yaml")
    assert by_container.mapping == by_dummy.mapping
    # the PE container's dummy has MainMemory's mesh, so it folds into it: K x 16 spreads there
    outer = by_container.mapping.levels[0]
    workload = by_container.workload
    assert [(workload.dims[d], b) for d, b, _ in outer.spatial if b > 1] == [("K", 16)]
    ev = evaluate(by_container.arch, by_container.workload, by_container.mapping)
    assert ev.macs == 4 * 32 * 3 * 16
    assert ev.cycles == ev.macs / 16                  # every PE busy on every cycle
    assert ev.compute_energy_pj == pytest.approx(ev.macs * 0.5)


def run_cli(capsys, arch, problem, ert, mapping):
    code = main(["evaluate", str(arch), str(problem), str(mapping), "--ert", str(ert), "--json"])
    err = capsys.readouterr().err.strip()
    return code, err


def test_a_container_without_a_fanout_is_refused_in_one_line(tmp_path, capsys):
    bad = tmp_path / "map.yaml"
    bad.write_text((HERE / "map_container.yaml").read_text().replace("target: PE,", "target: Core,"))
    code, err = run_cli(capsys, HERE / "arch.yaml", HERE / "problem.yaml", HERE / "ERT.yaml", bad)
    assert code == 2 and "\n" not in err and "Traceback" not in err
    assert str(bad) in err and "mapping[1].target" in err
    assert "container without a spatial fanout" in err


def test_a_constraint_on_a_container_bounds_its_fanout(tmp_path):
    cons = tmp_path / "constraints.yaml"
    cons.write_text("architecture_constraints:\n  targets:\n"
                    "  - {target: PE, type: spatial, factors: K=8}\n")
    from mapper.timeloop.constraints import translate
    got = imported("map_container.yaml")
    parts = read_parts([HERE / "arch.yaml", HERE / "problem.yaml", HERE / "ERT.yaml", cons])
    ctx = build(parts).arch_ctx
    space = translate(ctx, got.arch, got.workload, [], "t")
    assert space["levels"]["MainMemory"]["spatial"] == {"K": 8}


@pytest.mark.parametrize("edit, key, phrase", [
    # a table for a component the arch lacks
    (lambda t: t + "  - name: system.PE[0..15].Scratchpad[1..16]\n    actions: [{name: read, energy: 1.0}]\n",
     "ERT.tables[3].name", "'system.PE[0..15].Scratchpad[1..16]' is not a component"),
    # no table for a storage level the arch has
    (lambda t: t.replace("GlobalBuffer", "Buffer"), "ERT.tables[1].name", "is not a component"),
    # the compute unit's table without a MAC action
    (lambda t: t.replace("name: compute,", "name: idle,"), "ERT.tables[2].actions", "compute unit"),
])
def test_an_ert_that_does_not_match_the_arch_is_an_error(tmp_path, capsys, edit, key, phrase):
    ert = tmp_path / "ERT.yaml"
    ert.write_text(edit((HERE / "ERT.yaml").read_text()))
    code, err = run_cli(capsys, HERE / "arch.yaml", HERE / "problem.yaml", ert, HERE / "map_container.yaml")
    assert code == 2 and "\n" not in err and "Traceback" not in err
    assert str(ert) in err and key in err and phrase in err


def test_an_ert_lacking_a_level_names_it(tmp_path, capsys):
    text = (HERE / "ERT.yaml").read_text()
    ert = tmp_path / "ERT.yaml"
    ert.write_text("\n".join(line for line in text.splitlines()
                             if "GlobalBuffer" not in line and "energy: 2.0}" not in line) + "\n")
    code, err = run_cli(capsys, HERE / "arch.yaml", HERE / "problem.yaml", ert, HERE / "map_container.yaml")
    assert code == 2 and "\n" not in err
    assert str(ert) in err and "ERT.tables" in err and "no table for 'GlobalBuffer'" in err


def test_temporal_loops_on_a_fanout_container_are_refused_naming_it(tmp_path, capsys):
    bad = tmp_path / "map.yaml"
    bad.write_text((HERE / "map_container.yaml").read_text()
                   + "- {target: PE, type: temporal, factors: C=1 K=2 R=1 P=1, permutation: KCRP}\n")
    code, err = run_cli(capsys, HERE / "arch.yaml", HERE / "problem.yaml", HERE / "ERT.yaml", bad)
    assert code == 2 and "\n" not in err
    assert str(bad) in err and "mapping[3].factors" in err and "temporal loops at PE" in err

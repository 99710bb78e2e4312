"""Timeloop interoperability: Timeloop-format inputs (tests/data/timeloop_format/, written for
these tests from Timeloop's published facts) price exactly as the hand translations and as
Timeloop reported; exported mappings read back with identical costs; bad input is one line."""
from pathlib import Path

import pytest
import yaml

from mapper import evaluate, evaluate_many, load_arch, load_mapping, load_workload, to_table
from mapper.cli import main
from mapper.load import constraints_from_dict
from mapper.mapspace import Mapspace
from mapper.search.warm import admit
from mapper.timeloop import build, export, read_parts
from mapper.timeloop.constraints import translate as translate_constraints
from mapper.units import Where

from timeloop_cases import assert_matches_timeloop, load_cases

DATA = Path(__file__).parent / "data"
FORMAT = DATA / "timeloop_format"
DESIGNS = {d["design"]: d for d in yaml.safe_load((DATA / "timeloop_designs.yaml").read_text())["designs"]}
CASES = load_cases()


def design_files(design: str) -> list[Path]:
    return sorted(p for p in (FORMAT / design).glob("*.yaml") if "ERT" not in p.name)


def counts(ev, rename=None):
    rename = rename or {}
    return {rename.get(lc.name, lc.name): {t: (c.reads, c.fills, c.updates) for t, c in lc.tensors.items()}
            for lc in ev.levels if lc.tensors}


@pytest.mark.parametrize("design", sorted(DESIGNS))
def test_example_design_from_timeloop_files_matches_hand_translation(design):
    imported = build(read_parts(design_files(design)))     # the ERT is found beside the arch
    ev = evaluate(imported.arch, imported.workload, imported.mapping)
    record = DESIGNS[design]
    arch = load_arch(DATA.parent.parent / record["arch"])
    workload = load_workload(DATA.parent.parent / record["workload"])
    hand = evaluate(arch, workload, load_mapping(DATA.parent.parent / record["mapping"], arch, workload))
    short = {"Outputs": "O", "Inputs": "I", "Weights": "W"}
    ours = {lv: {short[t]: c for t, c in per.items()} for lv, per in counts(ev, {"GlobalBuffer": "GLB"}).items()}
    assert ours == counts(hand)                             # every read, fill and update, level by level
    assert ev.cycles == hand.cycles == record["timeloop"]["cycles"]
    assert ev.energy_pj == pytest.approx(hand.energy_pj, rel=1e-8)
    assert ev.energy_pj == pytest.approx(record["ours"]["energy_pj"], rel=1e-8)
    assert ev.energy_pj == pytest.approx(record["timeloop"]["energy_pj"], rel=0.02)
    # the imported constraints admit Timeloop's mapping
    notes = []
    space_dict = translate_constraints(imported.arch_ctx, imported.arch, imported.workload, notes, design)
    space = Mapspace(imported.arch, imported.workload, constraints_from_dict(space_dict, Where(design)))
    assert admit(space, imported.mapping) is not None


@pytest.mark.parametrize("design", sorted(DESIGNS))
def test_export_then_import_gives_identical_costs(design, tmp_path):
    imported = build(read_parts(design_files(design)))
    exported = tmp_path / "exported.yaml"
    exported.write_text(yaml.safe_dump(export(imported.mapping, imported.arch, imported.workload,
                                              imported.arch_ctx)))
    files = [p for p in design_files(design) if p.name != "map.yaml"] + [exported]
    again = build(read_parts(files + sorted((FORMAT / design).glob("ERT*.yaml"))))
    assert again.mapping == imported.mapping
    first = evaluate(imported.arch, imported.workload, imported.mapping)
    second = evaluate(again.arch, again.workload, again.mapping)
    assert (second.energy_pj, second.cycles) == (first.energy_pj, first.cycles)
    assert counts(second) == counts(first)


def test_export_of_a_native_mapping_reads_back(tmp_path, capsys):
    exported = tmp_path / "toy.timeloop.yaml"
    assert main(["evaluate", "toy", "gemm-256", "toy-gemm-256-os", "--json",
                 "--export-timeloop", str(exported)]) == 0
    import json
    first = json.loads(capsys.readouterr().out)
    assert main(["evaluate", "toy", "gemm-256", str(exported), "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["cost"] == first["cost"]
    directives = yaml.safe_load(exported.read_text())["mapping"]
    spatial = [d for d in directives if d["type"] == "spatial"]
    assert spatial and all("split" in d for d in spatial)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_reference_case_from_timeloop_files(case):
    folder = FORMAT / "cases" / case["id"]
    imported = build(read_parts(sorted(folder.glob("*.yaml"))))
    assert_matches_timeloop(case, imported.arch, imported.workload, imported.mapping)


def test_cli_evaluate_reads_timeloop_files(capsys):
    import json
    files = [str(FORMAT / "simba_like" / n) for n in ("arch.yaml", "problem.yaml", "map.yaml")]
    assert main(["evaluate", *files, "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["cost"]["cycles"] == DESIGNS["simba_like"]["timeloop"]["cycles"]
    assert out["cost"]["energy_pj"] == pytest.approx(DESIGNS["simba_like"]["ours"]["energy_pj"], rel=1e-8)
    assert "cluster_size" not in captured.err and "approximated by the problem" not in captured.err   # both exact now


def test_import_timeloop_writes_yaml_that_evaluates_the_same(tmp_path, capsys):
    import json
    design = "simple_output_stationary"
    assert main(["import-timeloop", *map(str, sorted((FORMAT / design).glob("*.yaml"))),
                 "-o", str(tmp_path)]) == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == [f"{design}.{k}.yaml" for k in ("arch", "mapping", "mapspace", "workload")]
    capsys.readouterr()
    assert main(["evaluate", str(tmp_path / f"{design}.arch.yaml"), str(tmp_path / f"{design}.workload.yaml"),
                 str(tmp_path / f"{design}.mapping.yaml"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cost"]["energy_pj"] == pytest.approx(DESIGNS[design]["ours"]["energy_pj"], rel=1e-8)
    assert out["cost"]["cycles"] == DESIGNS[design]["timeloop"]["cycles"]


def test_search_on_imported_design_exports_a_mapping_timeloop_files_read(tmp_path, capsys):
    design = FORMAT / "simple_weight_stationary"
    exported = tmp_path / "best.yaml"
    assert main(["search", str(design / "arch.yaml"), str(design / "problem.yaml"), "--strategy",
                 "random", "--samples", "2000", "--time-limit", "5", "--objective", "energy",
                 "--mapspace", str(design / "constraints.yaml"), "--warm-start", str(design / "map.yaml"),
                 "--export-timeloop", str(exported)]) == 0
    err = capsys.readouterr().err
    # the result is reported beside Timeloop's own mapping (its energy as recorded)
    reference = DESIGNS["simple_weight_stationary"]["ours"]["energy_pj"]
    assert f"reference {design / 'map.yaml'}: {reference:,.1f} pJ" in err
    parts = read_parts([design / "arch.yaml", design / "problem.yaml", exported])
    assert build(parts).mapping is not None


UNSUPPORTED = [
    ("problem: {shape: {dimensions: [M], data_spaces: [{name: A, projection: [[[M]]], read_write: true}]},"
     " instance: {M: 4, densities: {A: 0.5}}}", "densities"),
    ("architecture: {version: 0.4, nodes: [!Component {name: D, class: DRAM, attributes: {datawidth: 8}},"
     " !Component {name: n, class: XY_NoC}, !Component {name: mac, class: intmac}]}", "network component"),
    ("architecture: {version: 0.4, nodes: [!Mystery {name: x}]}", "unsupported node tag"),
    ("problem: {shape: {dimensions: [M]}, instance: {M: 4}}\nsparse_optimizations: {targets: [x]}",
     "sparse optimizations"),
]


@pytest.mark.parametrize("text,phrase", UNSUPPORTED, ids=["densities", "network", "tag", "sparse"])
def test_unsupported_timeloop_input_is_one_line_exit_2(tmp_path, capsys, text, phrase):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    good = FORMAT / "eyeriss_like"
    args = ["evaluate", str(bad), str(good / "problem.yaml"), str(good / "map.yaml")]
    if "problem" in text:
        args = ["evaluate", str(good / "arch.yaml"), str(bad), str(good / "map.yaml")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("mapper: error:")]
    assert len(errors) == 1 and str(bad) in errors[0] and phrase in errors[0]


def test_split_constraint_keeps_each_dim_on_its_mesh_axis():
    """simple_weight_stationary's `split: 1` on NQPSRCM: only N may use shared_glb's 16 columns
    (x), C and M only its 16 rows (y); the translated mapspace's factor tables say so."""
    from mapper.mapspace import SPATIAL_X, SPATIAL_Y
    from mapper.inputs import imported_constraints
    design = FORMAT / "simple_weight_stationary"
    imported = build(read_parts([design / "arch.yaml", design / "problem.yaml", design / "constraints.yaml"]))
    space = Mapspace(imported.arch, imported.workload, imported_constraints(imported))
    glb = imported.arch.level_names.index("shared_glb")
    x, y = space.slots.index((glb, SPATIAL_X)), space.slots.index((glb, SPATIAL_Y))
    for name in ("C", "M"):
        rows = space.dim_tables[imported.workload.dim_index(name)]
        assert (rows[:, x] == 1).all() and (rows[:, y] > 1).any()


REPORTED = yaml.safe_load((FORMAT / "reported_counts.yaml").read_text())["designs"]


@pytest.mark.parametrize("design", sorted(REPORTED))
def test_timeloop_rules_reproduce_reported_counts(design):
    """With --timeloop-rules (multicast looked for one fanout at a time, leakage of utilized
    instances), every per-level read, fill and update Timeloop reported is reproduced, except the
    input-halo fills the published (older) build gives, recorded with this tool's figure."""
    record = REPORTED[design]
    imported = build(read_parts(design_files(design)), timeloop_rules=True)
    assert imported.arch.multicast == "per_fanout" and imported.arch.leakage == "utilized"
    ev = evaluate(imported.arch, imported.workload, imported.mapping)
    levels = {lc.name: lc for lc in ev.levels}
    older = {(o["level"], o["tensor"], o["field"]): o for o in record["older_build"]}
    halo_pj = 0.0
    for name, per_tensor in record["counts"].items():
        level = levels[name]
        assert level.instances == record["utilized"][name]
        spec = imported.arch.levels[imported.arch.level_names.index(name)]
        for tensor, want in per_tensor.items():
            got = level.tensors[tensor]
            for field, value, expected in zip(("reads", "fills", "updates"),
                                              (got.reads, got.fills, got.updates), want):
                note = older.get((name, tensor, field))
                if note is None:
                    assert value == expected, (name, tensor, field)
                else:
                    assert (value, expected) == (note["ours"], note["timeloop"]), (name, tensor, field)
                    per_access = spec.energy_read if field == "reads" else spec.energy_write
                    halo_pj += (-(-expected // spec.block_size) + (value // -spec.block_size)) * per_access
    assert ev.compute_instances == record["utilized"]["mac"]
    timeloop = DESIGNS[design]["timeloop"]
    assert ev.cycles == timeloop["cycles"]
    # the issue asks for 0.5%; with word widths and cluster_size modelled every design is exact
    # (to the 0.01 pJ stats.txt gives), once the older build's halo fills are priced in
    assert ev.energy_pj + halo_pj == pytest.approx(timeloop["energy_pj"], rel=1e-9)
    # vectorised and scalar paths agree under the options
    costs = evaluate_many(imported.arch, imported.workload,
                          to_table([imported.mapping], len(imported.workload.dims), len(imported.workload.tensors)))
    assert costs.energy_pj[0] == pytest.approx(ev.energy_pj, rel=1e-12)


def test_timeloop_rules_scalar_and_vectorised_agree_on_random_mappings():
    from mapper import from_table
    from mapper.random_mappings import random_table
    imported = build(read_parts(design_files("eyeriss_like")), timeloop_rules=True)
    arch, workload = imported.arch, imported.workload
    table = random_table(arch, workload, 400, seed=3)
    costs = evaluate_many(arch, workload, table)
    checked = 0
    for row in range(len(table)):
        ev = evaluate(arch, workload, from_table(table, row))
        assert ev.energy_pj == pytest.approx(costs.energy_pj[row], rel=1e-9)
        assert ev.cycles == costs.cycles[row]
        for lv, lc in enumerate(ev.levels):
            for name, c in lc.tensors.items():
                t = workload.tensor_index(name)
                assert (c.reads, c.fills, c.updates) == (costs.level_reads[lv, t, row],
                                                         costs.level_fills[lv, t, row],
                                                         costs.level_updates[lv, t, row])
        checked += 1
    assert checked == 400
    # the per-fanout rule changes counts only where sliding windows collide across fanouts
    pooled = evaluate_many(dataclasses_replace(arch), workload, table)
    assert (pooled.level_reads <= costs.level_reads).all()


def dataclasses_replace(arch):
    import dataclasses
    return dataclasses.replace(arch, multicast="pooled", leakage="all")


def test_timeloop_spellings():
    from mapper.timeloop.yamlio import parse_factors, parse_permutation, split_range
    w = Where("x.yaml")
    expected = {"R": 3, "P": 16}
    for text in ("R=3 P=16", "R=3,P=16", "R3 P16", ["R=3", "P=16"]):
        assert parse_factors(text, w) == expected
    assert parse_permutation("RPK", ["K", "R", "P"], w) == ["R", "P", "K"]
    assert parse_permutation("H2 W K", ["W", "H2", "K"], w) == ["H2", "W", "K"]
    assert parse_permutation("HHW", ["H", "HH", "W"], w) == ["HH", "W"]      # longest name first
    assert split_range("PE[0..15]") == ("PE", 16) and split_range("DRAM[1..1]") == ("DRAM", 1)
    with pytest.raises(Exception, match="does not start with a dim"):
        parse_permutation("RX", ["R", "P"], w)

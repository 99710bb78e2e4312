"""`mapper sweep --export-timeloop DIR`: one Timeloop mapping file per point, each of which,
read back as a Timeloop mapping on the point's architecture and workload, is the stored mapping
(its buffering depth aside, which Timeloop's mapping format does not carry) and costs what the
sweep stored."""
from dataclasses import replace

import pytest

from mapper.cli import main
from mapper.cost import evaluate
from mapper.load import mapping_from_dict
from mapper.sweep.points import expand_points
from mapper.sweep.spec import load_sweep
from mapper.sweep.store import Store
from mapper.timeloop.design import build, read_parts
from mapper.units import Where

from test_sweep import TINY, sweep_file


def test_sweep_exports_each_points_mapping_that_reimports_at_the_same_cost(tmp_path, capsys):
    row = tmp_path / "row.yaml"      # the tiny machine with its 4 register files in one row
    row.write_text(TINY.read_text().replace("name: tiny", "name: row").replace("mesh: [2, 2]", "mesh: [4, 1]"))
    path = sweep_file(tmp_path, archs=(str(TINY), str(row)), sizes="m: [2, 8], n: 4, k: 4",
                      strategies=("greedy", "joint"), extra="objectives: ['delay,energy']\n")
    db, out = tmp_path / "r.sqlite", tmp_path / "timeloop"
    assert main(["sweep", str(path), "--db", str(db), "--jobs", "1", "--quiet",
                 "--export-timeloop", str(out)]) == 0
    printed = capsys.readouterr().out
    points = expand_points(load_sweep(str(path)))
    with Store(db) as store:
        rows = {row["key"]: row for row in store.rows()}
    files = sorted(out.glob("*.map.yaml"))
    # a mapping that splits one dim over both mesh axes at a level has no Timeloop spelling:
    # it is listed with the reason, the others are written
    skipped = [line for line in printed.splitlines() if "not written" in line]
    assert all("both mesh axes" in line and "-row-" not in line for line in skipped)
    assert f"Timeloop mappings: {len(files)} file(s)" in printed and len(files) >= 4
    assert len(files) + len(skipped) == len(points) == 8 and len({p.key for p in points}) == 8
    from mapper.sweep.export import file_name
    for point in points:
        exported = out / file_name(point)
        if not exported.exists():
            assert any(exported.name in line for line in skipped)
            continue
        imported = build(read_parts([exported]), arch=point.arch, workload=point.workload).mapping
        stored = mapping_from_dict(rows[point.key]["mapping"], point.arch, point.workload, Where("row"))
        # a Timeloop mapping has no buffering depth (Timeloop's arch gives it): put it back
        assert replace(imported, levels=tuple(replace(lm, stages=s.stages) for lm, s in
                                              zip(imported.levels, stored.levels))) == stored
        ev = evaluate(point.arch, point.workload, stored)
        assert ev.energy_pj == pytest.approx(rows[point.key]["energy_pj"], rel=1e-12)
        assert ev.cycles == rows[point.key]["cycles"]
        # energy never depends on the stages
        assert evaluate(point.arch, point.workload, imported).energy_pj == pytest.approx(ev.energy_pj, rel=1e-12)

"""Op graphs in a sweep (`mapper sweep ARCH --workload OPGRAPH`): one fusion study per
architecture and mapspace, stored as a chain row (fused and unfused figures, area, each
candidate group's status), run on the sweep's processes and resumed like every point; the
mapspace applied as `mapper fuse --mapspace` applies it (the same energy under one evaluation
budget); and the fronts of `mapper results --pareto` over layer rows, chain rows (fused and
"unfused" candidates) and model totals, drawn with `--plot`.

On tests/data/sweep-tiny-area-arch.yaml (the tiny three-level machine with areas) and
tests/data/sweep-tiny-chain.yaml (a 4x4x4 GEMM with bias and ReLU), with an evaluation budget
so every result is the same whatever the machine's load."""
import json
import sqlite3
from pathlib import Path

import pytest
import yaml

from mapper.cli import main
from mapper.sweep.fronts import fronts, model_totals
from mapper.sweep.fusion_grid import legality_text
from mapper.sweep.pareto import dominates
from mapper.sweep.store import Store

DATA = Path(__file__).resolve().parent / "data"
ARCH = DATA / "sweep-tiny-area-arch.yaml"
CHAIN = DATA / "sweep-tiny-chain.yaml"
ROLES = DATA / "sweep-tiny-roles.yaml"
MODEL = DATA / "sweep-tiny-chain-model.yaml"
BUDGET = ["--time-limit", "4", "--max-evaluations", "1500"]
GRID = ["--vary", "Buf.capacity=16B,64B"]


def sweep(db, *extra):
    return main(["sweep", str(ARCH), "--workload", str(CHAIN), *GRID, "--db", str(db), "--quiet", *BUDGET, *extra])


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """The op graph over two capacities and two mapspaces, on two processes."""
    db = tmp_path_factory.mktemp("opgraph") / "s.sqlite"
    assert sweep(db, "--jobs", "2", "--mapspace", f"default,{ROLES}") == 0
    with Store(db) as store:
        return db, store.rows()


def brute_front(values) -> list[int]:
    return [i for i, v in enumerate(values) if not any(dominates(w, v) for j, w in enumerate(values) if j != i)]


def test_one_chain_row_per_arch_and_mapspace_with_both_groupings_area_and_group_statuses(swept):
    _, rows = swept
    assert len(rows) == 4 and all(r["status"] == "ok" and r["strategy"] == "fuse" for r in rows)
    assert {(r["arch"], r["mapspace"]) for r in rows} == {
        (f"tiny-area[Buf.capacity={c}]", m) for c in ("16B", "64B") for m in ("default", "tiny-roles")}
    for r in rows:
        u, f = r["cost"]["unfused"], r["cost"]["fused"]
        assert r["energy_pj"] == f["energy_pj"] <= u["energy_pj"] and r["edp"] == f["energy_pj"] * f["cycles"]
        statuses = {"+".join(c["ops"]): c["status"] for c in r["cost"]["candidates"]}
        chosen = {"+".join(g["ops"]) for g in f["groups"] if len(g["ops"]) > 1}
        assert chosen and {g for g, s in statuses.items() if s == "chosen"} == chosen
        assert all(c["reason"] for c in r["cost"]["candidates"] if c["status"] in ("refused", "unsearched"))
        assert {c["status"] for c in r["cost"]["candidates"]} <= {"chosen", "legal", "refused", "unsearched"}
    # area from the architecture: the buffer's area grows with its capacity (area_per_byte)
    area = {r["arch"]: r["area_mm2"] for r in rows}
    assert area["tiny-area[Buf.capacity=64B]"] - area["tiny-area[Buf.capacity=16B]"] == pytest.approx(48 * 0.001)


def test_a_killed_sweep_resumes_and_a_finished_point_is_skipped(swept, tmp_path, capsys):
    db = tmp_path / "r.sqlite"
    Path(db).write_bytes(Path(swept[0]).read_bytes())
    with sqlite3.connect(db) as con:              # one study never finished
        con.execute("DELETE FROM points WHERE arch = 'tiny-area[Buf.capacity=16B]' AND mapspace = 'default'")
    capsys.readouterr()
    assert sweep(db, "--jobs", "2", "--mapspace", f"default,{ROLES}") == 0
    out = capsys.readouterr().out
    assert "4 chain point(s) (fusion studies): 1 studied" in out and "3 already in" in out
    with Store(db) as store:
        again = {r["key"]: r["energy_pj"] for r in store.rows()}
    assert again == {r["key"]: r["energy_pj"] for r in swept[1]}       # the same answer, the same key


@pytest.mark.parametrize("capacity, mapspace", [("16B", ROLES), ("64B", None)])
def test_the_chain_row_equals_mapper_fuse_on_the_derived_arch_with_the_same_mapspace(swept, tmp_path, capsys,
                                                                                    capacity, mapspace):
    data = yaml.safe_load(ARCH.read_text())
    data["levels"][1]["capacity"] = capacity
    arch = tmp_path / "derived.yaml"
    arch.write_text(yaml.safe_dump(data))
    capsys.readouterr()
    assert main(["fuse", str(arch), str(CHAIN), "--json", *BUDGET]
                + (["--mapspace", str(mapspace)] if mapspace else [])) == 0
    fused = json.loads(capsys.readouterr().out)
    row = next(r for r in swept[1] if r["arch"] == f"tiny-area[Buf.capacity={capacity}]"
               and r["mapspace"] == ("tiny-roles" if mapspace else "default"))
    assert row["energy_pj"] == fused["fused"]["energy_pj"]
    assert row["cost"]["unfused"]["energy_pj"] == fused["unfused"]["energy_pj"]
    assert row["cost"]["candidates"] == fused["candidates"]


def test_the_mapspace_changes_the_study(swept):
    by = {(r["arch"], r["mapspace"]): r["cost"]["unfused"]["energy_pj"] for r in swept[1]}
    assert any(by[(a, "default")] != by[(a, "tiny-roles")] for a, _ in by)


def test_fronts_over_chain_rows_are_the_brute_force_fronts_with_unfused_candidates(swept):
    rows = swept[1]
    for columns in (("energy_pj", "cycles", "area_mm2"), ("edp", "area_mm2")):
        (found,) = fronts(rows, columns)
        assert found.kind == "op graph" and len(found.candidates) == 2 * len(rows)
        assert sum(c.strategy == "unfused" for c in found.candidates) == len(rows)
        values = [[c.figures[col] for col in columns] for c in found.candidates]
        assert list(found.kept) == brute_front(values)
        # an unfused candidate carries the row's unfused figures
        u = next(c for c in found.candidates if c.strategy == "unfused")
        row = next(r for r in rows if r["arch"] == u.arch and f"({r['mapspace']})" in u.label)
        assert u.figures["energy_pj"] == row["cost"]["unfused"]["energy_pj"] and "unfused" in u.label


def test_results_pareto_plot_writes_a_png_per_front_labelled_with_the_front(swept, tmp_path, capsys):
    from mapper.sweep.pareto_plot import draw_front, point_labels
    from mapper.sweep.plots import pyplot
    out = tmp_path / "plots"
    assert main(["results", "--db", str(swept[0]), "--pareto", "energy,cycles,area", "--plot", str(out)]) == 0
    text = capsys.readouterr().out
    pngs = sorted(out.glob("*.png"))
    assert len(pngs) == 1 and pngs[0].stat().st_size > 10_000 and str(pngs[0]) in text
    assert "fused groups of tiny-gemm-bias-relu on tiny-area, mapspace default, over Buf.capacity = 16B, 64B" in text
    figures = (("energy", "energy_pj"), ("cycles", "cycles"), ("area", "area_mm2"))
    (found,) = fronts(swept[1], tuple(c for _, c in figures))
    plt = pyplot()
    fig, labelled = draw_front(plt, found, figures)
    texts, varied = point_labels(found)
    front_labels = [texts[i] for i in found.kept]
    assert varied and all("=" not in text for text in texts)      # one grid: the values alone
    assert len(fig.axes) == 3 and labelled == [front_labels] * 3
    for ax in fig.axes:       # what is written on the axes is the front's labels, and nothing else
        assert sorted(t.get_text().replace("\n", "") for t in ax.texts) == sorted(front_labels)
    plt.close(fig)


def test_a_mixed_list_and_model_totals_are_the_hand_sum(tmp_path, capsys):
    db = tmp_path / "m.sqlite"
    assert main(["sweep", str(ARCH), "--model", str(MODEL), "--phase", "prefill", "--fuse", "--workload", str(CHAIN),
                 "--gemm", "m=4 n=4 k=4", "--strategy", "greedy", *GRID, "--jobs", "1", "--db", str(db), "--quiet",
                 *BUDGET]) == 0
    with Store(db) as store:
        rows = store.rows()
    assert {r["workload"] for r in rows if r["strategy"] == "fuse"} >= {"tiny-gemm-bias-relu"}
    assert any(r["workload"] == "gemm-m4-n4-k4" for r in rows)
    found = {f.subject: f for f in fronts(rows, ("energy_pj", "cycles"))}
    model = next(f for f in found.values() if f.kind == "model")
    assert {c.strategy for c in model.candidates} == {"fused", "unfused"} and len(model.candidates) == 4
    for cand in model.candidates:
        mine = [r for r in rows if r["arch"] == cand.arch and r.get("expansion")]
        chains = [r for r in mine if r["strategy"] == "fuse"]
        side = [r if cand.strategy == "fused" else r["cost"]["unfused"] for r in chains]
        # up+gate is the one layer group outside the chains: count x its row
        (outside,) = [r for r in mine if r["layers"] == "up+gate"]
        energy = sum(r["count"] * s["energy_pj"] for r, s in zip(chains, side)) + outside["count"] * outside["energy_pj"]
        cycles = sum(r["count"] * s["cycles"] for r, s in zip(chains, side)) + outside["count"] * outside["cycles"]
        assert cand.figures["energy_pj"] == pytest.approx(energy) and cand.figures["cycles"] == pytest.approx(cycles)
    # without the chains, the layers' total: every layer group's count x its row
    layers = [r for r in rows if r.get("expansion") and r["strategy"] != "fuse"
              and r["arch"] == "tiny-area[Buf.capacity=64B]"]
    totals, lacking = model_totals(layers)
    assert not lacking and totals["layers"]["energy_pj"] == pytest.approx(sum(r["count"] * r["energy_pj"] for r in layers))
    # a layer group that never finished: the total is left off, and said
    totals, lacking = model_totals([r for r in layers if r["layers"] != "down"])
    assert totals == {} and lacking == ["1 of its 3 layer groups not in the store"]
    failed = [dict(r, status="failed") if r["layers"] == "down" else r for r in layers]
    assert model_totals(failed)[1] == ["layer group down has no finished point"]
    capsys.readouterr()
    with sqlite3.connect(db) as con:
        con.execute("DELETE FROM points WHERE layers = 'up+gate' AND arch = 'tiny-area[Buf.capacity=16B]'")
    assert main(["results", "--db", str(db), "--pareto", "edp,area"]) == 0
    assert ("totals left off (not whole): tiny-area[Buf.capacity=16B] (default): 1 of its 3 layer groups not "
            "in the store") in capsys.readouterr().out


def test_the_legality_summary_states_the_smallest_point_from_which_a_group_fuses():
    def row(capacity, mesh, qk):
        return {"strategy": "fuse", "status": "ok", "workload": "w", "mapspace": "m",
                "arch": f"t[Buf.capacity={capacity},PE.mesh={mesh}]",
                "cost": {"candidates": [{"ops": ["qk", "softmax"], "status": qk, "reason": "spills"},
                                        {"ops": ["a", "b"], "status": "refused", "reason": "two einsums"}]}}
    rows = [row("64MiB", "128x128", "chosen"), row("8MiB", "128x128", "refused"), row("32MiB", "128x128", "chosen"),
            row("8MiB", "256x256", "legal"), row("32MiB", "256x256", "chosen"), row("64MiB", "256x256", "legal")]
    text = legality_text(rows)
    assert "on t (PE.mesh=128x128), mapspace m, over Buf.capacity = 8MiB, 32MiB, 64MiB:\n" \
           "  qk+softmax: fused from Buf.capacity=32MiB\n" in text
    assert "  qk+softmax: fused at Buf.capacity=32MiB only; legal at every value\n" in text
    assert "refused (or not searched) at every value: 1 group(s), e.g. a+b: two einsums" in text


def test_tied_paths_vary_together_and_are_named_so(tmp_path):
    from mapper.sweep.arch_grid import changes_of, vary_flags
    from mapper.sweep.spec import varied_archs
    from mapper.units import Where
    archs = varied_archs(str(ARCH), vary_flags(["RF.mesh,compute.mesh=2x2,4x2"], Where("--vary")), Where("A"),
                         Where("--vary"))
    assert [a.name for a in archs] == ["tiny-area[RF.mesh+compute.mesh=2x2]", "tiny-area[RF.mesh+compute.mesh=4x2]"]
    assert [(a.levels[2].instances, a.compute.instances) for a in archs] == [(4, 4), (8, 8)]
    assert changes_of(archs[1].name) == ("tiny-area", (("RF.mesh+compute.mesh", "4x2"),))


@pytest.mark.parametrize("args, says", [
    (["sweep", str(ARCH), "--workload", str(CHAIN), "--strategy", "greedy"], "--strategy: applies to one-einsum points"),
    (["sweep", str(ARCH), "--workload", str(CHAIN), "--mapspace", "tpu-v4i-roles"], "no level 'LocalBuffer' in arch"),
    (["sweep", str(ARCH), "--workload", str(CHAIN), "--vary", "RF.mesh+Buf.capacity=2x2"], "must be of one kind"),
    (["results", "--plot", "x"], "--plot: draws the Pareto fronts: give --pareto"),
])
def test_bad_input_is_one_line(tmp_path, capsys, args, says):
    db = tmp_path / "x.sqlite"
    if args[0] == "results":
        Store(db).close()
    assert main(args + ["--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1, err

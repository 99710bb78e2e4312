"""`mapper sweep --model M --fuse` (and `fuse: true` in a sweep file): each model chain as one
fusion study stored in the results store, per-chain and model totals fused against unfused, and
resumption like every other point. Runs on tests/data/sweep-tiny-arch.yaml with the tiny chain
model (a GEMM with bias and ReLU, a GEMM with a residual add, an up/gate pair outside any chain)."""
import sqlite3
from pathlib import Path

import pytest

from mapper.cli import main
from mapper.sweep.fused import chain_points
from mapper.sweep.report import si
from mapper.sweep.spec import load_sweep
from mapper.sweep.store import Store

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
TINY = DATA / "sweep-tiny-arch.yaml"
MODEL = DATA / "sweep-tiny-chain-model.yaml"


def sweep(db, *extra):
    return main(["sweep", str(TINY), "--model", str(MODEL), "--phase", "prefill", "--fuse", "--db", str(db),
                 "--jobs", "1", "--quiet", "--time-limit", "5", *extra])


def test_fused_and_unfused_totals_per_chain_and_for_the_model(tmp_path, capsys):
    db = tmp_path / "f.sqlite"
    assert sweep(db) == 0
    out = capsys.readouterr().out
    with Store(db) as store:
        rows = store.rows()
    chains = {r["layers"]: r for r in rows if r["strategy"] == "fuse"}
    assert set(chains) == {"proj", "down"} and all(r["status"] == "ok" for r in chains.values())
    assert len(rows) == 6 + 2                     # the layer points as before, and one point per chain
    for r in chains.values():
        u, f = r["cost"]["unfused"], r["cost"]["fused"]
        assert f["energy_pj"] <= u["energy_pj"] and f["outer_bytes"] <= u["outer_bytes"]
        assert r["energy_pj"] == f["energy_pj"] and r["outer_bytes"] == f["outer_bytes"]
    # the GEMM + bias + ReLU is one kernel: its two elementwise intermediates never reach the
    # outermost level, so fused it moves less than unfused
    proj = chains["proj"]["cost"]
    assert any(g["ops"] == ["proj", "bias", "relu"] for g in proj["fused"]["groups"])
    assert proj["fused"]["outer_bytes"] < proj["unfused"]["outer_bytes"]
    # model totals, recomputed from the store: chains times their counts, plus the up+gate
    # group (outside the chains) from its best layer point, the same on both sides
    outside = min((r for r in rows if r["layers"] == "up+gate" and r["status"] == "ok"),
                  key=lambda r: r["energy_pj"])
    for side in ("unfused", "fused"):
        energy = sum(r["count"] * r["cost"][side]["energy_pj"] for r in chains.values()) + 4 * outside["energy_pj"]
        traffic = sum(r["count"] * r["cost"][side]["outer_bytes"] for r in chains.values()) + 4 * outside["outer_bytes"]
        totals = out[out.index("model totals of"):].splitlines()
        line = next(line for line in totals if line.startswith(side + " "))
        assert si(energy * 1e-12, "J") in line and si(traffic, "B") in line, line
    assert "1 layer group(s) outside the chains" in out and "fused saves" in out
    assert "proj+bias+relu" in out


def test_chain_points_resume_and_their_key_holds_the_fusion_setting(tmp_path, capsys):
    db = tmp_path / "r.sqlite"
    assert sweep(db, "--strategy", "greedy") == 0
    capsys.readouterr()
    assert sweep(db, "--strategy", "greedy") == 0
    assert "2 chain point(s) (fusion studies): 0 studied" in capsys.readouterr().out
    with sqlite3.connect(db) as con:              # an interrupted sweep: one chain never finished
        con.execute("DELETE FROM points WHERE strategy = 'fuse' AND layers = 'down'")
    assert sweep(db, "--strategy", "greedy") == 0
    out = capsys.readouterr().out
    assert "2 chain point(s) (fusion studies): 1 studied" in out and "1 already in" in out
    with Store(db) as store:
        keys = {r["key"] for r in store.rows() if r["strategy"] == "fuse"}
    assert sweep(db, "--strategy", "greedy", "--time-limit", "6") == 0           # another setting: new keys, slots replaced
    with Store(db) as store:
        fused = [r for r in store.rows() if r["strategy"] == "fuse"]
    assert len(fused) == 2 and not keys & {r["key"] for r in fused}


def test_a_sweep_file_fuse_key_gives_the_same_chain_points(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(f"archs: [{TINY}]\ntime_limit: 5\nfuse: true\n"
                    f"workloads:\n  - {{model: {MODEL}, phase: prefill}}\n")
    spec = load_sweep(str(path))
    assert [p.subject.chain.name for p in chain_points(spec)] == ["proj", "down"]
    plain = tmp_path / "p.yaml"
    plain.write_text(path.read_text().replace("fuse: true\n", ""))
    assert load_sweep(str(plain)).chains == ()


@pytest.mark.parametrize("args, message", [
    (["sweep", str(TINY), "--gemm", "m=4 n=4 k=4", "--fuse"], "--fuse: no --model with chains"),
    (["sweep", str(TINY), "--model", str(DATA / "sweep-tiny-model.yaml"), "--fuse"], "--fuse: no --model with chains"),
])
def test_fuse_without_a_model_chain_is_one_line(tmp_path, capsys, args, message):
    assert main(args + ["--db", str(tmp_path / "x.sqlite")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_fuse_key_that_is_not_a_boolean_names_the_key(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(f"archs: [{TINY}]\nfuse: yes please\nworkloads:\n  - {{model: {MODEL}}}\n")
    assert main(["sweep", str(path), "--db", str(tmp_path / "x.sqlite")]) == 2
    assert "s.yaml: fuse: expected true or false" in capsys.readouterr().err

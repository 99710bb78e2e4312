"""`mapper sweep` and `mapper results`: the size grammar, sweep files and model presets, input
hashes, the SQLite store (resume after kill -9, changed inputs, failures with reasons), CSV
export, local processes against a Dask cluster, warm starts, the report and the plots.

Every search here runs on tests/data/sweep-tiny-arch.yaml, where the joint search proves its
answer in a fraction of a second, so results do not depend on timing."""
import csv
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mapper.cli import main
from mapper.errors import SpecError
from mapper.sweep.grid import parse_dim_grid, size_values
from mapper.sweep.models import expand, load_model, model_from_dict
from mapper.sweep.points import expand_points
from mapper.sweep.runner import run_points
from mapper.sweep.spec import load_sweep, sweep_from_dict
from mapper.sweep.store import Store
from mapper.units import Where

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
TINY = DATA / "sweep-tiny-arch.yaml"
W = Where("test")
GEMM = "Z[m,n] += A[m,k] * B[k,n]"


def sweep_file(tmp_path, name="s.yaml", archs=(str(TINY),), sizes=None, strategies=("greedy", "joint"),
               extra="") -> Path:
    """A sweep of GEMMs on the tiny machine; `sizes` is YAML flow text (dim: values)."""
    size_text = sizes or "m: '2..16:x2', n: [2, 4], k: 4"
    path = tmp_path / name
    path.write_text(f"""name: test
archs: [{', '.join(archs)}]
strategies: [{', '.join(strategies)}]
time_limit: 20
workloads:
  - einsum: "{GEMM}"
    name: g
    sizes: {{{size_text}}}
    dtype: int8
{extra}""")
    return path


def swept_rows(tmp_path, sizes: str) -> tuple[list, dict]:
    """The points of `sweep_file(tmp_path, sizes=sizes)`, run on one core into a store, and the
    store's rows by key."""
    points = expand_points(load_sweep(str(sweep_file(tmp_path, sizes=sizes))))
    with Store(tmp_path / "r.sqlite") as store:
        run_points(points, store, jobs=1, progress=False)
        return points, {r["key"]: r for r in store.rows()}


def db_rows(db) -> list[tuple]:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT key, slot, status, finished_at FROM points").fetchall()


def rows_so_far(db) -> int:
    """Rows in a store another process is writing (0 while it is still being created)."""
    try:
        return len(db_rows(db)) if db.exists() else 0
    except sqlite3.OperationalError:
        return 0


# ----------------------------------------------------------------------------- grammar and files

def test_size_grammar():
    assert size_values("512..8192:x2", W) == (512, 1024, 2048, 4096, 8192)
    assert size_values("128..512:+128", W) == (128, 256, 384, 512)
    assert size_values("1024,4096", W) == (1024, 4096)
    assert size_values([4096, "1..4:x2"], W) == (4096, 1, 2, 4)
    assert parse_dim_grid("m=512..8192:x2 n=4096 k=1024,4096", W) == {
        "m": (512, 1024, 2048, 4096, 8192), "n": (4096,), "k": (1024, 4096)}
    for bad in ("8..2:x2", "1..8:x1", "a..b", "0", "1..8:*2"):
        with pytest.raises(SpecError):
            size_values(bad, W)
    with pytest.raises(SpecError, match="given twice"):
        parse_dim_grid("m=1 m=2", W)


@pytest.mark.parametrize("body, key", [
    ("archs: [toy]\nworkloads: [{workload: gemm-256}]\nstrategy: [joint]\n", "strategy: unknown key"),
    ("archs: [toy]\nworkloads: [{einsum: 'Z[m] += A[m]', sizes: {m: '8..2'}}]\n", "workloads[0].sizes.m"),
    ("archs: [nosuch]\nworkloads: [{workload: gemm-256}]\n", "archs[0]"),
    ("archs: [toy]\nworkloads: [{model: llama-7b, phase: train}]\n", "workloads[0].phase"),
    ("archs: [toy]\nworkloads: [{model: resnet50, seq: 128}]\n", "workloads[0].seq: unknown key"),
    ("archs: [toy]\nstrategies: [joint, best]\nworkloads: [{workload: gemm-256}]\n", "strategies[1]"),
    ("archs: [toy]\nobjectives: [edp, 'bytes:L2']\nworkloads: [{workload: gemm-256}]\n", "objectives[1]"),
])
def test_a_bad_sweep_file_is_one_line_naming_the_key(tmp_path, capsys, body, key):
    path = tmp_path / "bad.yaml"
    path.write_text(body)
    assert main(["sweep", str(path), "--db", str(tmp_path / "r.sqlite")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err and key in err, err


def test_gemm_flag_expands_the_grid(tmp_path):
    from mapper.sweep.spec import gemm_subjects
    subjects = gemm_subjects("m=512..8192:x2 n=4096 k=1024,4096")
    assert len(subjects) == 10
    assert {s.workload.sizes for s in subjects} == {(m, 4096, k) for m in (512, 1024, 2048, 4096, 8192)
                                                    for k in (1024, 4096)}
    with pytest.raises(SpecError, match="missing: k"):
        gemm_subjects("m=1 n=2")


# ----------------------------------------------------------------------------- model presets

def test_model_presets_have_their_published_sizes():
    """Totals against the sources' own figures: ResNet-50 3.8e9 multiply-adds (He et al. 2016);
    LLaMA-7B's weight matrices are 6.7e9 parameters less the 0.13e9 of the token embedding, so
    one decoded token costs that many MACs outside attention; BERT-base's blocks hold 85e6."""
    resnet = expand(load_model("resnet50"), None, {})
    assert 3.8e9 <= sum(g.workload.macs * g.count for g in resnet.groups) <= 3.9e9
    assert sum(g.count for g in resnet.groups) == 1 + 16 * 3 + 4 + 1      # 53 conv/fc layers
    decode = expand(load_model("llama-7b"), "decode", {"batch": 1, "seq": 2048})
    linear = sum(g.workload.macs * g.count for g in decode.groups if "attn" not in g.workload.name)
    assert abs(linear - (6.738e9 - 32000 * 4096)) / linear < 0.01
    up_gate = [g for g in decode.groups if g.layers == ("gate", "up")]
    assert len(up_gate) == 1 and up_gate[0].count == 64          # identical: one search, counted twice
    bert = expand(load_model("bert-base"), None, {})
    assert abs(sum(g.workload.macs * g.count for g in bert.groups if "attn" not in g.workload.name) / 128
               - 85e6) / 85e6 < 0.01
    prefill = expand(load_model("llama-7b"), "prefill", {"seq": 512})
    qkv = next(g for g in prefill.groups if g.layers == ("qkv",))
    assert dict(zip(qkv.workload.dims, qkv.workload.sizes)) == {"m": 512, "n": 12288, "k": 4096}


def test_model_layer_graph_must_be_acyclic_and_named():
    base = {"name": "x", "layers": [
        {"name": "a", "einsum": GEMM, "sizes": {"m": 2, "n": 2, "k": 2}, "after": ["b"]},
        {"name": "b", "einsum": GEMM, "sizes": {"m": 2, "n": 2, "k": 2}, "after": ["a"]}]}
    with pytest.raises(SpecError, match="cycle"):
        model_from_dict(base, W)
    base["layers"][0]["after"] = ["nosuch"]
    with pytest.raises(SpecError, match=r"layers\[0\].after\[0\]"):
        model_from_dict(base, W)
    base["layers"][0]["after"] = []
    base["layers"][1]["sizes"]["m"] = "seq * 2"
    with pytest.raises(SpecError, match="unknown name 'seq'"):
        model_from_dict(base, W)


# ----------------------------------------------------------------------------- hashes

def test_keys_hash_contents_not_paths_or_descriptions(tmp_path):
    text = TINY.read_text()
    (tmp_path / "copy.yaml").write_text(text.replace("name: tiny", "name: tiny\ndescription: same machine"))
    (tmp_path / "bigger.yaml").write_text(text.replace("capacity: 64 B", "capacity: 128 B"))
    keys = {}
    for name in (str(TINY), str(tmp_path / "copy.yaml"), str(tmp_path / "bigger.yaml")):
        spec = sweep_from_dict({"archs": [name], "workloads": [{"einsum": GEMM, "sizes": {"m": 4, "n": 4, "k": 4},
                                                                "dtype": "int8"}]}, W)
        keys[name] = [p.key for p in expand_points(spec)]
    assert keys[str(TINY)] == keys[str(tmp_path / "copy.yaml")]
    assert not set(keys[str(TINY)]) & set(keys[str(tmp_path / "bigger.yaml")])
    # a setting the strategy does not use changes nothing; one it uses changes its points only
    spec = load_sweep(str(sweep_file(tmp_path)))
    from dataclasses import replace
    a = {(p.strategy, p.workload.sizes): p.key for p in expand_points(spec)}
    b = {(p.strategy, p.workload.sizes): p.key for p in
         expand_points(replace(spec, settings=replace(spec.settings, cpsat_seconds=1.0, samples=7)))}
    assert all((a[k] == b[k]) == (k[0] == "greedy") for k in a)


# ----------------------------------------------------------------------------- the store

def test_kill_9_mid_sweep_loses_nothing_and_duplicates_nothing(tmp_path):
    """A real `mapper sweep` process (with its worker processes) is killed while it runs; the
    store is intact, and the resumed sweep searches exactly the points that were missing."""
    path = sweep_file(tmp_path, sizes="m: '1..16:x2', n: [2, 4], k: 4")
    db = tmp_path / "r.sqlite"
    total = 5 * 2 * 2
    proc = subprocess.Popen([sys.executable, "-m", "mapper", "sweep", str(path), "--db", str(db), "--jobs", "2",
                             "--quiet"], cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    try:
        while time.time() < deadline:
            if rows_so_far(db) >= 4:
                break
            assert proc.poll() is None, "the sweep ended before it could be killed"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)          # the sweep and its worker processes
        proc.wait()
    before = {key: (slot, status, at) for key, slot, status, at in db_rows(db)}
    assert 4 <= len(before) < total
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    with Store(db) as store:
        run = run_points(expand_points(load_sweep(str(path))), store, jobs=1, progress=False)
    after = db_rows(db)
    assert len(after) == len({key for key, *_ in after}) == len({slot for _, slot, *_ in after}) == total
    assert len(run.computed) == total - len(before) and run.skipped == len(before)
    assert all(before[key] == (slot, status, at) for key, slot, status, at in after if key in before)
    assert all(status == "ok" for _, _, status, _ in after)


def test_a_changed_input_recomputes_only_its_points(tmp_path):
    other = tmp_path / "other.yaml"
    other.write_text(TINY.read_text().replace("name: tiny", "name: other").replace("4 B/cycle", "8 B/cycle"))
    path = sweep_file(tmp_path, archs=(str(TINY), str(other)), sizes="m: [2, 4], n: 2, k: 4")
    db = tmp_path / "r.sqlite"
    assert main(["sweep", str(path), "--db", str(db), "--jobs", "1", "--quiet"]) == 0
    first = {slot: (key, at) for key, slot, _, at in db_rows(db)}
    assert len(first) == 8
    other.write_text(other.read_text().replace("capacity: 12 B", "capacity: 16 B"))
    with Store(db) as store:
        run = run_points(expand_points(load_sweep(str(path))), store, jobs=1, progress=False)
    assert sorted(row["arch"] for row in run.computed) == ["other"] * 4 and run.skipped == 4
    second = {slot: (key, at) for key, slot, _, at in db_rows(db)}
    assert second.keys() == first.keys()                      # replaced in place, one row per slot
    for slot, (key, at) in second.items():
        assert ((key, at) == first[slot]) == slot.startswith("tiny|")


def test_infeasible_points_are_stored_with_their_reason(tmp_path, capsys):
    full = tmp_path / "full.yaml"              # every unit busy: no dim of 3 x 3 x 3 splits over a 2 x 2 array
    full.write_text("name: full\nmin_utilization: 1.0\n")
    path = sweep_file(tmp_path, sizes="m: [3, 4], n: 3, k: 3",
                      extra=f"mapspaces: [{full}]\n")
    db = tmp_path / "r.sqlite"
    assert main(["sweep", str(path), "--db", str(db), "--jobs", "1", "--quiet"]) == 1
    captured = capsys.readouterr()
    out = captured.out
    # said first, and the status says so too (a script sees it) unless --keep-going
    assert out.startswith("FAILED: 2 of 4 searches found no mapping (2 infeasible)")
    assert "2 sweep point(s) found no mapping" in captured.err
    with Store(db) as store:
        rows = {(r["sizes"]["m"], r["strategy"]): r for r in store.rows()}
    assert len(rows) == 4
    for strategy in ("greedy", "joint"):          # m = 3: the mapspace prunes to nothing
        bad = rows[(3, strategy)]
        assert bad["status"] == "infeasible" and "no mapping" in bad["reason"] and bad["mapping"] is None
    # m = 4 splits over the array: greedy's top-down choice dead-ends at first, backs up, and
    # like joint finds a mapping
    for strategy in ("greedy", "joint"):
        assert rows[(4, strategy)]["status"] == "ok" and rows[(4, strategy)]["utilization"] > 0
    assert "points without a mapping" in out and "infeasible" in out
    # run again (every point stored): the failures are still the sweep's
    assert main(["sweep", str(path), "--db", str(db), "--jobs", "1", "--quiet", "--keep-going"]) == 0
    assert capsys.readouterr().out.startswith("FAILED: 2 of 4 searches")


def test_results_csv_has_one_row_per_point_with_sizes_as_columns(tmp_path, capsys):
    path = sweep_file(tmp_path, sizes="m: [2, 4, 8], n: 2, k: 4", strategies=("greedy",))
    db, out = tmp_path / "r.sqlite", tmp_path / "r.csv"
    assert main(["sweep", str(path), "--db", str(db), "--jobs", "1", "--quiet"]) == 0
    assert main(["sweep", str(path), "--db", str(db), "--jobs", "1", "--quiet"]) == 0    # all cached
    assert "0 searched" in capsys.readouterr().out
    assert main(["results", "--db", str(db), "--csv", str(out)]) == 0
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3 and len({r["key"] for r in rows}) == 3
    assert sorted(int(r["m"]) for r in rows) == [2, 4, 8] and {r["n"] for r in rows} == {"2"}
    assert all(r["status"] == "ok" and float(r["energy_pj"]) > 0 and r["mapping"].startswith("[") for r in rows)
    assert main(["results", "--db", str(db)]) == 0
    assert "3 point(s)" in capsys.readouterr().out
    assert main(["results", "--db", str(tmp_path / "none.sqlite")]) == 2


# ----------------------------------------------------------------------------- where it runs

SAME = ("key", "slot", "status", "score", "energy_pj", "cycles", "mapping", "optimal")


def _answers(db) -> dict:
    with Store(db) as store:
        return {r["key"]: tuple(str(r[c]) for c in SAME) for r in store.rows()}


# the Dask cluster's workers as threads of this process in the default run (the same client,
# submissions and waits), as worker processes in the slow run (their start-up takes seconds)
@pytest.mark.parametrize("processes", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["dask-threads", "dask-processes"])
def test_local_processes_and_a_dask_cluster_give_the_same_rows(tmp_path, processes):
    distributed = pytest.importorskip("distributed")
    path = sweep_file(tmp_path, sizes="m: [2, 4, 8], n: [2, 4], k: 4")
    points = expand_points(load_sweep(str(path)))
    with Store(tmp_path / "one.sqlite") as store:
        run_points(points, store, jobs=1, progress=False)
    with Store(tmp_path / "cold.sqlite") as store:
        run_points(points, store, jobs=1, progress=False, warm_start=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=processes,
                                  dashboard_address=None) as cluster:
        with Store(tmp_path / "dask.sqlite") as store:
            run = run_points(points, store, scheduler=cluster.scheduler_address, progress=False)
    assert run.workers == 2 and "Dask" in run.where
    one, cold, dask = (_answers(tmp_path / f"{n}.sqlite") for n in ("one", "cold", "dask"))
    assert len(one) == 12 and one == dask == cold
    with Store(tmp_path / "dask.sqlite") as store:
        assert {r["worker"] for r in store.rows()} - {None} and all(r["status"] == "ok" for r in store.rows())


def test_warm_starts_hand_joint_points_their_neighbours(tmp_path):
    path = sweep_file(tmp_path, sizes="m: '2..16:x2', n: 4, k: 4", strategies=("joint",))
    with Store(tmp_path / "r.sqlite") as store:
        run = run_points(expand_points(load_sweep(str(path))), store, jobs=1, progress=False)
    rows = sorted(run.computed, key=lambda r: r["macs"])
    assert rows[0]["warm_given"] == 0                 # the first shape has no finished neighbour
    assert all(r["warm_given"] >= 1 and r["warm_admitted"] >= 1 for r in rows[1:])
    assert all(r["warm_score"] >= r["score"] for r in rows[1:])       # a start, never below the optimum
    from mapper.sweep.report import warm_text
    assert "warm starts: 3 of 4 joint point(s)" in warm_text(run.computed)


# ----------------------------------------------------------------------------- report and plots

def test_model_sweep_report_gap_bottleneck_and_weighted_totals(tmp_path, capsys):
    db = tmp_path / "r.sqlite"
    assert main(["sweep", str(TINY), "--model", str(DATA / "sweep-tiny-model.yaml"), "--phase", "prefill",
                 "--batch", "1", "--db", str(db), "--jobs", "1", "--quiet", "--plot", str(tmp_path / "plots")]) == 0
    out = capsys.readouterr().out
    assert "greedy loses" in out and "joint bottleneck" in out
    for layer in ("proj", "up+gate", "down"):
        assert f"\n{layer} " in out
    with Store(db) as store:
        rows = store.rows()
    assert len(rows) == 6                              # up and gate searched once
    counts = {r["layers"]: r["count"] for r in rows}
    assert counts == {"proj": 2, "up+gate": 4, "down": 2}
    joint_time = sum(r["count"] * r["seconds_kernel"] for r in rows if r["strategy"] == "joint")
    from mapper.sweep.report import si
    assert f"joint     {si(joint_time, 's')}" in out
    pngs = sorted(p.name for p in (tmp_path / "plots").glob("*.png"))
    assert pngs == ["model-tiny-model-prefill-seq4-batch1-tiny-edp.png", "roofline-tiny.png"]
    assert all((tmp_path / "plots" / p).stat().st_size > 5_000 for p in pngs)


def test_grid_plots_are_written(tmp_path):
    pytest.importorskip("matplotlib")
    from mapper.sweep.plots import write_plots
    points, rows = swept_rows(tmp_path, "m: [2, 4], n: [2, 4], k: [2, 4]")
    written = sorted(p.name.split("-")[0] for p in write_plots(points, rows, tmp_path / "plots"))
    assert written == ["gap", "roofline", "tiles"]


def test_retry_failed_searches_failed_points_again(tmp_path):
    path = sweep_file(tmp_path, sizes="m: [2, 4], n: 2, k: 4", strategies=("greedy",))
    points = expand_points(load_sweep(str(path)))
    db = tmp_path / "r.sqlite"
    with Store(db) as store:
        run_points(points, store, jobs=1, progress=False)
        row = store.rows()[0]
        store.write({**row, "status": "failed", "reason": "RuntimeError: simulated", "finished_at": 0.0})
        assert len(run_points(points, store, jobs=1, progress=False).computed) == 0      # stored: skipped
        again = run_points(points, store, jobs=1, progress=False, retry_failed=True)
        assert [r["key"] for r in again.computed] == [row["key"]] and again.computed[0]["status"] == "ok"
        assert len(store.rows()) == 2


def test_an_unreachable_dask_scheduler_says_so(tmp_path, monkeypatch, capsys):
    pytest.importorskip("distributed")
    import socket
    from mapper.sweep import runner
    monkeypatch.setattr(runner, "CONNECT_SECONDS", 1)
    with socket.socket() as sock:       # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert main(["sweep", "toy", "--gemm", "m=8 n=8 k=8", "--scheduler", f"tcp://127.0.0.1:{port}",
                 "--db", str(tmp_path / "r.sqlite"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mapper: error: --scheduler tcp://127.0.0.1:{port}: cannot reach the Dask scheduler "
                          "within 1 s") and len(err.splitlines()) == 1, err


def test_the_progress_bar_goes_to_a_terminal_only(tmp_path, capsys):
    """A sweep's stderr captured (a log, a pipe, CI) gets no bar redraws."""
    path = sweep_file(tmp_path, sizes="m: [2, 4], n: 2, k: 2", strategies=("greedy",))
    with Store(tmp_path / "r.sqlite") as store:
        run_points(expand_points(load_sweep(str(path))), store, jobs=1, progress=True)
    assert "sweep" not in capsys.readouterr().err


def test_a_model_on_two_mapspaces_reports_the_per_layer_pick_and_its_totals(tmp_path, capsys):
    """Two mapspaces over one model (as `default,cta-pairs` on b200): per layer group the one whose
    joint mapping scores best, and the model's time and energy so, the hand sum over the store."""
    db = tmp_path / "r.sqlite"
    assert main(["sweep", str(TINY), "--model", str(DATA / "sweep-tiny-model.yaml"), "--phase", "prefill",
                 "--batch", "1", "--mapspace", "default,bypass", "--strategy", "joint", "--db", str(db),
                 "--jobs", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    section = out[out.index("a kernel library picking per layer"):]
    with Store(db) as store:
        rows = [r for r in store.rows() if r["strategy"] == "joint"]
    picks = {}
    for row in rows:        # the lower score; a tie to the mapspace listed first
        best = picks.get(row["layers"])
        if best is None or (row["score"], row["mapspace"] != "default") < (best["score"], best["mapspace"] != "default"):
            picks[row["layers"]] = row
    assert any(row["mapspace"] == "bypass" for row in picks.values())     # not the first listed alone
    for layer, row in picks.items():
        assert re.search(rf"\n{re.escape(layer)} +{row['mapspace']} ", section), layer
    from mapper.sweep.report import si
    time_s = sum(r["count"] * r["seconds_kernel"] for r in picks.values())
    energy = sum(r["count"] * r["energy_pj"] for r in picks.values())
    assert f"model totals so: {si(time_s, 's')}, {si(energy * 1e-12, 'J')}" in section

"""`mapper explain`: bounds never above the traffic, regimes, threshold, pipeline advice, plots."""
import json
import math
import subprocess
from pathlib import Path
import sys

import numpy as np

from mapper.cost import evaluate
from mapper.explain import explain
from mapper.explain.traffic_bounds import (bilinear, compulsory_words, level_traffic, min_traffic, smith_bound,
                                   threshold_bytes)
from mapper.explain.regimes import structure
from mapper.load import (arch_from_dict, load_constraints, load_arch, load_mapping, load_workload, mapping_from_checked_dict,
                         workload_from_dict)
from mapper.mapspace import Mapspace
from mapper.search import Joint, SearchContext, parse_objective
from mapper.units import Where

from strategies import problems
from scaled import quick_and_full
from presets_sync import H100_SYNC, H100_SYNC_EDP


def gemm(m, n, k, name=None):
    return workload_from_dict({"name": name or f"gemm-{m}x{n}x{k}", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                               "sizes": {"m": m, "n": n, "k": k}, "dtype": "bf16", "dtypes": {"Z": "fp32"}},
                              Where("test"))


def h100_gemm_mapping(arch, workload, block=(128, 128, 64), warps=(2, 2), rf_k=64, smem_stages=2,
                      rf_keep=("Z", "A", "B")):
    """A CUTLASS-like mapping: thread-block tiles over the SMs (up to 8 x 16 of the 132 SMs,
    the rest as loops), warps over the block, the k loop above L2 (L2 holds one k slab of the
    SMs' blocks), output accumulated in registers."""
    m, n, k = workload.sizes
    bm, bn, bk = block
    grid_m, grid_n = m // bm, n // bn
    sm_m = math.gcd(grid_m, 8)
    sm_n = math.gcd(grid_n, 16)
    wm, wn = warps
    return mapping_from_checked_dict({"mapping": [
        {"level": "HBM", "loops": [{"dim": "m", "bound": grid_m // sm_m}, {"dim": "n", "bound": grid_n // sm_n},
                                   {"dim": "k", "bound": k // bk}], "keep": ["Z", "A", "B"]},
        {"level": "L2",
         "spatial": [{"dim": "m", "bound": sm_m, "axis": "x"}, {"dim": "n", "bound": sm_n, "axis": "x"}],
         "keep": ["Z", "A", "B"]},
        {"level": "SMEM", "loops": [{"dim": "k", "bound": bk // rf_k}],
         "spatial": [{"dim": "m", "bound": wm, "axis": "x"}, {"dim": "n", "bound": wn, "axis": "x"}],
         "keep": ["A", "B"], "stages": smem_stages},
        {"level": "RF", "loops": [{"dim": "m", "bound": bm // wm}, {"dim": "n", "bound": bn // wn},
                                  {"dim": "k", "bound": rf_k}], "keep": list(rf_keep), "stages": 1},
    ]}, arch, workload, Where("test-mapping"))


# ----------------------------------------------------------------------------- bounds

@quick_and_full(20, 300, problems())
def test_traffic_is_never_below_the_bound(problem):
    """Any mapping, any level: traffic >= max(compulsory, Smith et al.) (capacity ignored: a
    mapping that does not fit only makes S look smaller than what it uses, so capacities are
    raised to what the mapping holds)."""
    import dataclasses
    arch, workload, mapping = problem
    ev = evaluate(arch, workload, mapping)
    levels = tuple(dataclasses.replace(level, capacity=max(level.capacity, lc.footprint_bytes))
                   for level, lc in zip(arch.levels, ev.levels))
    arch = dataclasses.replace(arch, levels=levels)
    for tr in level_traffic(arch, workload, mapping, ev):
        assert tr.traffic >= tr.bound * (1 - 1e-9), tr


def test_joint_best_is_never_below_the_bound():
    """The best mapping the joint search finds (proven optimal on these small spaces)."""
    kinds = set()
    for arch_name, wl in (("toy", gemm(32, 32, 64)), ("eyeriss", gemm(16, 16, 32))):
        arch = load_arch(arch_name)
        result = Joint().run(Mapspace(arch, wl), parse_objective("edp", arch), SearchContext(5))
        ex = explain(arch, wl, result.mapping)
        assert all(tr.traffic >= tr.bound for tr in ex.traffic)
        kinds |= {tr.bound_kind for tr in ex.traffic}
    assert kinds == {"compulsory", "capacity (Smith et al.)"}      # both bounds bite somewhere


def test_h100_bounds_on_square_gemms():
    """Square bf16 GEMMs at h100's shared-memory level against the Smith et al. bound. S counts
    the whole SM (228 KiB shared memory + 4 x 64 KiB registers) in bf16 words, so the bound's
    ideal output tile is sqrt(S) ~ 498 while the registers hold at most a 256 x 256 fp32 tile:
    a traffic-minimal mapping stays ~2x above the bound (measured 2.60 at 4096, 2.03 at 8192,
    1.97 at 16384, where the -2S term fades); the issue's 1.3x is not reached (docs/RESULTS.md)."""
    arch = load_arch(H100_SYNC)
    wl = load_workload("gemm-4096")
    edp_best = explain(arch, wl, load_mapping(H100_SYNC_EDP, arch, wl))
    smem = edp_best.traffic[1]
    assert smem.level == "SMEM" and smem.bound_kind.startswith("capacity")
    assert 1.0 <= smem.ratio < 6.0                       # 128 x 128 blocks: 5.2x
    for size, within in ((4096, 2.7), (8192, 2.1), (16384, 2.0)):
        wl = gemm(size, size, size)
        minimal = h100_gemm_mapping(arch, wl, block=(256, 256, 16), warps=(2, 2), rf_k=16, rf_keep=("Z",))
        tr = explain(arch, wl, minimal).traffic[1]
        assert 1.0 <= tr.ratio < within, (size, tr.ratio)


def test_min_traffic_follows_the_square_root_law_then_the_threshold():
    wl = gemm(1024, 1024, 1024)
    small, big = min_traffic(wl, 64 * 1024), min_traffic(wl, 256 * 1024)
    assert 1.6 < small / big < 2.4                     # 4x capacity, ~2x less traffic
    assert min_traffic(wl, threshold_bytes(wl)) == compulsory_words(wl)
    assert min_traffic(wl, threshold_bytes(wl) * 0.99) > compulsory_words(wl)
    shape = bilinear(wl)
    for cap in (2**12, 2**16, 2**20):                  # the bound holds on the minimum too
        assert min_traffic(wl, cap) >= smith_bound(shape.macs, cap / 2)


# ----------------------------------------------------------------------------- regimes

def test_gemv_is_memory_bound_at_every_capacity():
    arch, wl = load_arch("h100"), load_workload("gemv-4096")
    shape = structure(arch, wl)
    assert shape.memory_bound and shape.once_used == ("B",) and not shape.elementwise   # B[k,n]: the matrix
    assert "fusion" in shape.label and "every capacity" in shape.label
    macs = wl.macs
    for cap in np.geomspace(2**10, 2**30, 11):
        words = min_traffic(wl, cap)
        assert macs / (words * 2) < shape.balance     # MACs per byte stays below the balance


def test_elementwise_is_flagged_compulsory():
    arch = load_arch("h100")
    wl = workload_from_dict({"name": "mul", "einsum": "Z[m,n] += A[m,n] * B[m,n]",
                             "sizes": {"m": 4096, "n": 4096}, "dtype": "bf16"}, Where("test"))
    shape = structure(arch, wl)
    assert shape.elementwise and shape.memory_bound and "compulsory" in shape.label and "fusion" in shape.label
    for cap in (2**10, 2**20, 2**30):
        assert min_traffic(wl, cap) == compulsory_words(wl)
    result = Joint().run(Mapspace(arch, wl, load_constraints("unaligned")), parse_objective("edp", arch),
                         SearchContext(2))
    ex = explain(arch, wl, result.mapping)
    assert "structurally memory-bound: elementwise" in ex.overall
    assert all(tr.capacity_part == 0 for tr in ex.traffic)        # only compulsory traffic


def test_threshold_regime_at_l2():
    arch = load_arch(H100_SYNC)
    small, large = gemm(1024, 1024, 1024), gemm(16384, 16384, 16384)
    ex_small = explain(arch, small, h100_gemm_mapping(arch, small))
    ex_large = explain(arch, large, h100_gemm_mapping(arch, large))
    assert ex_small.capacity_regimes[0] == "threshold" and ex_small.traffic[0].level == "L2"
    assert ex_large.capacity_regimes[0] != "threshold"
    assert ex_large.capacity_regimes[0] == "continuous"


def _toy_latency_arch():
    """One DRAM with a long latency feeding a four-stage buffer: regimes are easy to place."""
    return arch_from_dict({"name": "lat", "clock": "1 GHz", "levels": [
        {"name": "DRAM", "bandwidth": 64, "latency": "1 us"},
        {"name": "BUF", "capacity": "512 KiB", "max_stages": 4}],
        "compute": {"macs_per_cycle": 64}}, Where("test-arch"))


def _toy_mapping(arch, wl, tile):
    outer = [{"dim": d, "bound": s // t} for d, s, t in zip(wl.dims, wl.sizes, tile) if s // t > 1]
    inner = [{"dim": d, "bound": t} for d, t in zip(wl.dims, tile) if t > 1]
    return mapping_from_checked_dict({"mapping": [
        {"level": "DRAM", "loops": outer}, {"level": "BUF", "loops": inner, "stages": 1}]},
        arch, wl, Where("toy"))


def test_stage_advice_follows_the_regime():
    """Compute-bound: double buffer; memory-bound: double buffer, no deeper; latency-bound:
    deepen. The same architecture, three shapes (or tiles)."""
    arch = _toy_latency_arch()
    big = gemm(512, 512, 512)
    gemv = workload_from_dict({"name": "gemv", "einsum": "Z[m] += A[m,k] * B[k]",
                               "sizes": {"m": 4096, "k": 4096}, "dtype": "bf16"}, Where("t"))
    cases = [(big, (128, 128, 64)), (gemv, (128, 512)), (big, (8, 8, 8))]
    advice = []
    for wl, tile in cases:
        row = explain(arch, wl, _toy_mapping(arch, wl, tile)).stages[0]
        advice.append((row.regime, row.recommended))
        assert row.cycles[1] <= row.cycles[0]              # two stages never slower than one here
    assert advice[0] == ("compute-bound", 2)
    assert advice[1] == ("bandwidth-bound", 2)
    assert advice[2][0] == "latency-bound" and advice[2][1] > 2
    deep = explain(arch, cases[2][0], _toy_mapping(arch, *cases[2])).stages[0]
    assert deep.cycles[3] < deep.cycles[1]                 # deeper really is faster there


# ----------------------------------------------------------------------------- CLI and plots

# in this process (the command's code path, without a second interpreter's start-up); the bad
# level's refusal below runs as a real process, whose stderr must hold no traceback
def test_cli_explain_json_and_plots(tmp_path, capsys):
    from mapper.cli import main
    assert main(["explain", "h100", "gemm-4096", "h100-gemm-4096-edp", "--json", "--plot", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["levels"]["SMEM"]["ratio_to_bound"] >= 1
    assert set(out["stages"]) >= {"SMEM"}
    assert out["occupancy"]["resident_blocks"] >= 1
    pngs = sorted(p.name for p in tmp_path.iterdir())
    assert pngs == ["gemm-4096-h100-roofline.png", "gemm-4096-h100-traffic-SMEM.png"]
    for p in tmp_path.iterdir():
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000


def test_cli_explain_searches_when_no_mapping_is_given(capsys):
    from mapper.cli import main
    assert main(["explain", "toy", "gemm-256", "--max-evaluations", "20000"]) == 0   # a counted budget: steady
    out = capsys.readouterr().out
    assert "joint search's best" in out and "Pipeline depth" in out


def test_cli_explain_bad_level():
    done = subprocess.run([sys.executable, "-m", "mapper", "explain", "toy", "gemm-256", "toy-gemm-256-os",
                           "--level", "nope"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--level" in done.stderr and "Traceback" not in done.stderr


def test_roofline_labels_keep_their_digits_and_levels_without_bandwidth_get_points(tmp_path):
    """0.256 TMAC/s read '256 GMAC/s', not '0 TMAC/s'; a design whose levels declare no bandwidth
    (Timeloop's examples) still gets every level's point, and the legend says why no roof."""
    from mapper.explain import explain
    from mapper.explain.plots import _rate, plot_roofline
    assert _rate(2.56e11, "MAC/s") == "256 GMAC/s" and _rate(4.95e14, "MAC/s") == "495 TMAC/s"
    assert _rate(480e6, "B/s") == "480 MB/s" and _rate(12.0, "B/s") == "12 B/s"
    arch, workload = load_arch("pe-array"), load_workload("gemm-256")
    mapping = load_mapping("toy-gemm-256-os", arch, workload)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    saved = {}
    original = plt.Figure.savefig

    def keep(fig, path, **kwargs):
        saved["labels"] = fig.axes[0].get_legend_handles_labels()[1]
        saved["points"] = sum(len(line.get_xdata()) == 1 for line in fig.axes[0].lines)
        return original(fig, path, **kwargs)
    plt.Figure.savefig = keep
    try:
        plot_roofline(explain(arch, workload, mapping, None), tmp_path / "r.png")
    finally:
        plt.Figure.savefig = original
    assert (tmp_path / "r.png").stat().st_size > 0
    assert saved["labels"][0].startswith("compute peak 256 GMAC/s (256 MACs/cycle x 1 GHz)")
    assert sum("no bandwidth declared, no roof" in label for label in saved["labels"]) == 3
    assert saved["points"] == 3          # DRAM, GlobalBuffer, RegisterFile


def test_explain_reads_timeloop_files_with_their_ert(capsys, tmp_path):
    """`explain` takes Timeloop's arch, problem and mapping files and `--ert`, as `evaluate` does,
    and prices the same mapping the same way."""
    from mapper.cli import main
    design = Path(__file__).parent / "data" / "timeloop_format" / "simple_weight_stationary"
    files = [str(design / n) for n in ("arch.yaml", "problem.yaml", "map.yaml")]
    assert main(["explain", *files, "--ert", str(design / "ERT.yaml"), "--json"]) == 0
    explained = json.loads(capsys.readouterr().out)
    assert main(["evaluate", *files, "--ert", str(design / "ERT.yaml"), "--json"]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert explained["cycles"] == evaluated["cost"]["cycles"]
    assert main(["explain", *files, "--ert", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml" in capsys.readouterr().err

"""scripts/gpu_check.py: imports without a GPU (and without triton); its whole path runs in
Triton's CPU interpreter on small shapes; its Spearman correlation is checked by hand."""
import csv
import importlib.util
import os
import pathlib
import sys

import numpy as np
import pytest

# before any triton import: its library functions are decorated for the interpreter at import
os.environ.setdefault("TRITON_INTERPRET", "1")
SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "gpu_check.py"


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module          # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_imports_without_gpu_and_lists_the_shapes():
    module = load_script()
    labels = [label for label, *_ in module.FULL_SHAPES]
    assert "square-1024" in labels and "square-16384" in labels and "odd-3000x5000x1000" in labels
    assert sum("llama7b-prefill" in l for l in labels) == 4 and sum("llama7b-decode" in l for l in labels) == 4
    assert any(l.startswith("tall-skinny") for l in labels)


def test_spearman_by_hand():
    module = load_script()
    assert module.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert module.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ranks (1, 2, 3) and (2, 1, 3): 1 - 6 * (1 + 1 + 0) / (3 * 8) = 0.5
    assert module.spearman([1, 2, 3], [5, 4, 6]) == pytest.approx(0.5)
    assert np.isnan(module.spearman([1, 2], [2, 1]))


@pytest.mark.triton
@pytest.mark.slow          # ~15 s: three short searches and the interpreter (the triton CI step runs it)
def test_interpreter_runs_the_whole_path(tmp_path):
    pytest.importorskip("triton", reason="triton not installed: pip install -e '.[triton]'")
    pytest.importorskip("torch", reason="torch not installed: pip install -e '.[triton]'")
    module = load_script()
    out = tmp_path / "check.csv"
    rows = module.main(["--interpret", "--shapes", "small", "--csv", str(out), "--time-limit", "2", "--top", "3"])
    assert [r["shape"] for r in rows] == [label for label, *_ in module.SMALL_SHAPES]
    with out.open() as f:
        written = list(csv.DictReader(f))
    assert len(written) == len(rows)
    for r in rows:
        assert r["pick_tflops"] > 0 and r["autotune_best_tflops"] > 0
        assert r["configs_tried"] == 1 + 2 + len(module.SMALL_AUTOTUNE_LIST)     # pick, top-3 others, list
    with (tmp_path / "check_configs.csv").open() as f:
        configs = list(csv.DictReader(f))
    assert {c["source"] for c in configs} == {"pick", "top", "autotune"}
    assert all(float(c["measured_ms"]) > 0 for c in configs)


def planned(module, arch, size, capability, descriptors=True, extra=()):
    """gpu_check's plan of a size^3 GEMM (bf16, as on a GPU) for a device of `capability`."""
    args = module.parse_args(["--time-limit", "1", "--top", "3", "--shapes", "small", *extra])
    shape, view = module.plan_shape(arch, f"square-{size}", size, size, size, args)
    module.assign_forms(shape, view, size, size, size, capability, descriptors, module.element_bytes(args))
    return shape, view


def test_tma_refusal_by_hand():
    from mapper.emit.triton_forms import tma_refusal
    assert tma_refusal((100, 96), (96, 1), 4) is None                   # 384-byte rows
    assert "180 bytes" in tma_refusal((100, 90), (90, 1), 2)            # 1000x700-like bf16 rows: 180 B
    assert tma_refusal((1000, 700), (700, 1), 2) is not None and tma_refusal((1000, 704), (704, 1), 2) is None
    assert "not contiguous" in tma_refusal((64, 64), (1, 64), 2)        # a transposed view
    assert "past a 16-byte boundary" in tma_refusal((64, 64), (64, 1), 2, address=4096 + 8)
    assert tma_refusal((3, 40, 48), (1920, 48, 1), 4) is None


def test_kernel_form_rules():
    """The Ampere form below 9.0 (one CTA, pointer loads); on 9.0 TMA, the cluster's num_ctas and,
    for a warpgroup MMA, whole warpgroups where a CTA's rows are whole MMAs."""
    from mapper.emit.triton import TritonConfig
    from mapper.emit.triton_forms import kernel_form
    aligned = (("A", (256, 256), (256, 1), 2), ("B", (256, 256), (256, 1), 2))
    cluster_config = TritonConfig(256, 128, 64, 3, 2, num_ctas=2)
    ampere = kernel_form(cluster_config, (64, 8, 16), (2, 1), (8, 0), True, aligned)
    assert (ampere.label, ampere.num_ctas, ampere.num_warps) == ("Ampere mma", 1, 2)
    assert "needs sm90" in ampere.notes[0]
    hopper = kernel_form(cluster_config, (64, 8, 16), (2, 1), (9, 0), True, aligned)
    assert (hopper.label, hopper.num_ctas, hopper.num_warps) == ("Hopper wgmma+TMA", 2, 4)   # 128 rows a CTA
    small = kernel_form(TritonConfig(64, 64, 32, 3, 2, num_ctas=2), (64, 8, 16), (2, 1), (9, 0), True, aligned)
    assert (small.mma, small.num_warps) == ("mma.sync", 2) and "32 block rows" in small.notes[0]
    mma_sync = kernel_form(TritonConfig(128, 128, 32, 3, 4), (16, 8, 16), (1, 1), (9, 0), True, aligned)
    assert mma_sync.label == "Hopper mma+TMA"
    no_descriptors = kernel_form(TritonConfig(128, 128, 32, 3, 4), (64, 8, 16), (1, 1), (9, 0), False, aligned)
    assert no_descriptors.label == "Hopper wgmma" and "no tensor descriptors" in no_descriptors.notes[0]
    odd = kernel_form(TritonConfig(64, 64, 32, 3, 4, num_ctas=3), (64, 8, 16), (3, 1), (9, 0), True,
                      (("A", (1000, 700), (700, 1), 2),))
    assert (odd.tma, odd.num_ctas) == (False, 1) and any("1400 bytes" in n for n in odd.notes)


def test_capability_flag():
    module = load_script()
    assert module.device_capability(module.parse_args(["--capability", "8.6", "--plan"])) == (8, 6)
    assert module.device_capability(module.parse_args(["--capability", "9"])) == (9, 0)
    assert module.device_capability(module.parse_args(["--plan"])) == (9, 0)       # no GPU: Hopper


def test_plan_for_a_hopper_device_picks_the_hopper_form():
    """The plan of a GEMM for CC 9.0: every config in the Hopper form (TMA where the operands
    allow it), num_ctas its mapping's; for 8.0 the Ampere form. No GPU, triton or torch."""
    module = load_script()
    shape, view = planned(module, load_arch_h100(), 64, (9, 0))
    assert {t.source for t in shape.tried} == {"pick", "top", "autotune"}
    for t in shape.tried:
        assert t.form.hopper and t.form.tma and t.form.label.startswith("Hopper") and t.form.label.endswith("+TMA")
        assert t.form.num_ctas == getattr(t.config, "num_ctas", 1) == t.cluster[0] * t.cluster[1]
    shape, _ = planned(module, load_arch_h100(), 64, (8, 0))
    assert {t.form.label for t in shape.tried} == {"Ampere mma"} and {t.form.num_ctas for t in shape.tried} == {1}


def test_plan_follows_the_mapping_mma_shape():
    """On h100's wgmma preset the plan reads the MMA off the mapping (the `kernel` key's shape):
    wgmma where a CTA's rows are whole m64s, whole warpgroups; mma.sync elsewhere, said."""
    module = load_script()
    shape, view = planned(module, load_arch_h100(), 256, (9, 0))
    m, n, k = view.instruction
    # wgmma for bf16: m64, n a multiple of 8 up to 256 (the largest dividing the unit's tile), k16
    assert (m, k) == (64, 16) and n % 8 == 0 and 8 <= n <= 256, view.instruction
    for t in shape.tried:
        whole = t.config.block_m // t.cluster[0] % 64 == 0
        assert (t.form.mma == "wgmma") == whole, (t.config, t.form)
        assert not whole or t.form.num_warps % 4 == 0
    assert shape.best("pick").form.mma == "wgmma"          # the search aligns the pick to the MMA


def test_plan_command_prints_each_form(capsys):
    module = load_script()
    shapes = module.main(["--plan", "--capability", "8.0", "--shapes", "small", "--only", "square-64",
                          "--time-limit", "1", "--top", "2"])
    out = capsys.readouterr().out
    assert [s.label for s in shapes] == ["square-64"] and out.startswith("square-64:")
    assert out.count("Ampere mma, num_ctas 1") == len(shapes[0].tried)


def load_arch_h100():
    from mapper.load import load_arch
    return load_arch("h100")


@pytest.mark.triton
@pytest.mark.slow          # ~20 s: a search, helper processes and the interpreter
def test_grid_precompile_and_deadline_in_the_interpreter(tmp_path):
    """`--grid` adds the calibration configs (source grid), `--precompile` compiles them first in
    helper processes, `--deadline` stops the timing: what was timed is in the CSVs."""
    pytest.importorskip("triton", reason="triton not installed: pip install -e '.[triton]'")
    pytest.importorskip("torch", reason="torch not installed: pip install -e '.[triton]'")
    module = load_script()
    out = tmp_path / "check.csv"
    rows = module.main(["--interpret", "--shapes", "small", "--only", "odd", "--grid", "odd", "--grid-stages", "2",
                        "--precompile", "2", "--top", "2", "--time-limit", "2", "--csv", str(out)])
    assert [r["shape"] for r in rows] == ["odd-100x70x192"]
    with (tmp_path / "check_configs.csv").open() as f:
        configs = list(csv.DictReader(f))
    grid = [c for c in configs if c["source"] == "grid"]
    assert grid and all(c["num_stages"] == "2" for c in grid) and all(float(c["measured_ms"]) > 0 for c in grid)
    stopped = module.main(["--interpret", "--shapes", "small", "--only", "odd", "--deadline", "0.001", "--top", "2",
                           "--time-limit", "2", "--csv", str(tmp_path / "none.csv")])
    assert stopped == []


@pytest.mark.triton
@pytest.mark.slow
def test_microbenchmarks_run_in_the_interpreter(tmp_path):
    """scripts/gpu_micro.py's Triton streaming read and torch copy at small sizes: every figure
    positive and written."""
    pytest.importorskip("triton", reason="triton not installed: pip install -e '.[triton]'")
    spec = importlib.util.spec_from_file_location("gpu_micro", SCRIPT.parent / "gpu_micro.py")
    micro = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(micro)
    rows = micro.main(["--interpret", "--parts", "memory", "--csv", str(tmp_path / "micro.csv")])
    assert [r[0] for r in rows] == ["hbm_copy", "hbm_read", "l2_read_1MiB"] and all(r[1] > 0 for r in rows)
    with (tmp_path / "micro.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 3


def test_replay_ranks_measured_configs_with_the_model(tmp_path):
    """scripts/gpu_replay.py on a hand-made configs CSV of five configs: times proportional to the
    model's cycles but for its favourite, timed 10x slower. By hand: the favourite ranks last of
    the four priced (Spearman 1 - 6 * (9 + 1 + 1 + 1) / (4 * 15) = -0.2), the model's best timed
    config runs at (second best / 10 x best) of the best; a spilling config (128x256 over 4 warps)
    is refused, counted apart."""
    spec = importlib.util.spec_from_file_location("gpu_replay", SCRIPT.parent / "gpu_replay.py")
    replay = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(replay)
    check = replay.load_check()
    from mapper.emit.common import BlockConfig
    from mapper.load import load_arch
    arch = load_arch("h200")
    workload = check.gemm_workload("square-1024", 1024, 1024, 1024, "bf16")
    configs = [(64, 64, 64, 3, 4), (128, 128, 64, 3, 4), (128, 256, 64, 3, 8), (64, 128, 32, 4, 4), (128, 256, 64, 3, 4)]
    path = tmp_path / "c_configs.csv"
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["shape", "source", "BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps", "GROUP_M",
                         "predicted_cycles", "measured_ms", "form", "num_ctas", "num_warps_run", "ptx_mma", "form_notes"])
        cycles = [check.predicted(arch, workload, BlockConfig(*c, 8)) for c in configs]
        priced = sorted(c for c in cycles if np.isfinite(c))
        assert len(priced) == 4 and len(set(priced)) == 4          # distinct, so the ranks are by hand
        for (bm, bn, bk, stages, warps), c in zip(configs, cycles):
            ms = (10 * c if c == priced[0] else c) / 1e6 if np.isfinite(c) else 1.0
            writer.writerow(["square-1024", "grid", bm, bn, bk, stages, warps, 8, c, ms, "", 1, warps, "", ""])
    [row] = replay.main([str(path), "--arch", "h200"])
    assert row["refused"] == 1 and row["configs"] == 5
    assert row["spearman"] == pytest.approx(-0.2)
    assert row["model_best_share"] == pytest.approx(priced[1] / (10 * priced[0]))


@pytest.mark.triton
@pytest.mark.slow          # ~20 s: the GPU session's script end to end in the interpreter
def test_the_gpu_session_script_runs_in_the_interpreter(tmp_path):
    """scripts/gpu_run.sh with GPU_RUN_INTERPRET=1: the microbenchmarks and the check (small shapes,
    a grid, helper compiles) write their files under $OUT, at most 8 (what a session brings back)."""
    pytest.importorskip("triton", reason="triton not installed: pip install -e '.[triton]'")
    import subprocess
    env = {**os.environ, "OUT": str(tmp_path), "GPU_RUN_INTERPRET": "1", "BUDGET": "200", "PRECOMPILE": "2"}
    done = subprocess.run(["bash", str(SCRIPT.parent / "gpu_run.sh")], env=env, capture_output=True, text=True,
                          timeout=300, cwd=SCRIPT.parents[1])
    assert done.returncode == 0, done.stderr
    assert "check: exit 0" in done.stdout
    files = sorted(p.name for p in tmp_path.iterdir())
    assert {"micro.log", "gpu_micro.csv", "check.log", "gpu_check.csv", "gpu_check_configs.csv"} <= set(files)
    assert len(files) <= 8
    with (tmp_path / "gpu_check_configs.csv").open() as f:
        assert any(row["source"] == "grid" for row in csv.DictReader(f))

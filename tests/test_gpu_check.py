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

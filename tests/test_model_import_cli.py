"""`mapper import-model` and `mapper sweep --model FILE.onnx` as a user runs them: the model file
written, read back by the sweep, the ONNX file imported on the fly with the sweep's --seq."""
from __future__ import annotations

from mapper.cli import main
from onnx_graphs import FLOAT, Graph, linear, rmsnorm


def _mlp(path) -> str:
    g = Graph({"x": (["batch", "seq", 16], FLOAT)})
    h = g.node("Relu", [linear(g, rmsnorm(g, "x", 16, "/blocks.0/norm"), 16, 32, "/blocks.0/up")], "/blocks.0/act")
    y = g.node("Add", ["x", linear(g, h, 32, 16, "/blocks.0/down")], "/blocks.0")
    return g.save(y, path)


def test_import_then_sweep_the_written_model(tmp_path, capsys):
    onnx_file, model_file, db = _mlp(tmp_path / "mlp.onnx"), tmp_path / "mlp.yaml", tmp_path / "r.sqlite"
    assert main(["import-model", onnx_file, "--seq", "8", "-o", str(model_file), "--dtype", "bf16"]) == 0
    out = capsys.readouterr().out
    assert "2 layer entries (2 layers, 2 distinct shapes), 1 chains" in out and f"written to {model_file}" in out
    status = main(["sweep", "toy", "--model", str(model_file), "--strategy", "greedy", "--time-limit", "5",
                   "--jobs", "1", "--db", str(db), "--quiet", "--fuse"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "up " in out and "down " in out and "fused chains of mlp-default-batch1-seq8" in out


def test_sweep_imports_an_onnx_file_on_the_fly(tmp_path, capsys):
    onnx_file, db = _mlp(tmp_path / "mlp.onnx"), tmp_path / "r.sqlite"
    status = main(["sweep", "toy", "--model", onnx_file, "--seq", "8,16", "--strategy", "greedy",
                   "--time-limit", "5", "--jobs", "1", "--db", str(db), "--quiet"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "mlp-default-batch1-seq8" in out and "mlp-default-batch1-seq16" in out
    status = main(["sweep", "toy", "--model", onnx_file, "--strategy", "greedy", "--db", str(db), "--quiet"])
    assert status == 2 and "give it with --seq N" in capsys.readouterr().err

"""`mapper emit ARCH CHAIN --to triton|cutlass|mlir`: each fused group of an op graph emitted
with its epilogue mapped onto the emitters' kinds; what cannot be expressed is one line, and
nothing is altered silently. MLIR is applied by `iree-opt` (the `test` extra) where installed."""
import json
import shutil
import subprocess

import pytest

from mapper.cli import main
from mapper.emit.chain import plan_group
from mapper.load import load_opgraph, opgraph_from_dict, preset_names
from mapper.units import Where
from presets_sync import H100_SYNC

IREE_OPT = shutil.which("iree-opt")
BACKENDS = ("triton", "cutlass", "mlir")


def graph(*ops, sizes=None):
    return opgraph_from_dict({"name": "g", "sizes": sizes or {"m": 8, "n": 16, "k": 4}, "dtype": "bf16",
                              "ops": list(ops)}, Where("test"))


GEMM = {"name": "mm", "einsum": "Z[m,n] += X[m,k] * W[k,n]"}


def ew(name, kind, inputs, output):
    return {"name": name, "kind": kind, "inputs": inputs, "output": output}


def test_epilogue_kinds_map_in_order():
    g = graph(GEMM, ew("b", "bias", ["Z[m,n]", "b[n]"], "Y[m,n]"), ew("g", "gelu", ["Y[m,n]"], "G[m,n]"))
    plan = plan_group(g, (0, 1, 2))
    assert (plan.anchor, plan.epilogue, plan.lines, plan.skipped) == (0, ("bias", "gelu"), (), False)


def test_a_residual_add_stops_the_epilogue_and_says_what_is_dropped():
    g = graph(GEMM, ew("b", "bias", ["Z[m,n]", "b[n]"], "Y[m,n]"), ew("res", "add", ["R[m,n]", "Y[m,n]"], "S[m,n]"),
              ew("r", "relu", ["S[m,n]"], "T[m,n]"))
    plan = plan_group(g, (0, 1, 2, 3))
    # relu(bias + residual) is not relu(bias): the relu after the add goes too
    assert plan.epilogue == ("bias",) and not plan.skipped
    assert len(plan.lines) == 1 and "dropped from res on (res, r)" in plan.lines[0] and "residual add" in plan.lines[0]


def test_a_bias_along_the_rows_is_not_the_emitters_bias():
    g = graph(GEMM, ew("b", "bias", ["Z[m,n]", "b[m]"], "Y[m,n]"))
    plan = plan_group(g, (0, 1))
    assert plan.epilogue == () and "runs along m" in plan.lines[0]
    assert plan_group(g, (0, 1), gemm_n="m").epilogue == ("bias",)


@pytest.mark.parametrize("ops, group, why", [
    ((ew("n", "layernorm", ["X[m,k]", "s[k]", "t[k]"], "Xn[m,k]", ) | {"dim": "k"},
      {"name": "mm", "einsum": "Z[m,n] += Xn[m,k] * W[k,n]"}), (0, 1), "layernorm n is a prologue"),
    ((GEMM, {"name": "mm2", "einsum": "Y[m,j] += Z[m,n] * V[n,j]"}), (0, 1), "2 einsums in one kernel"),
    ((GEMM, ew("r", "relu", ["Z[m,n]"], "R[m,n]"), ew("s", "scale", ["R[m,n]"], "S[m,n]")), (1, 2), "no einsum"),
])
def test_groups_a_gemm_template_cannot_express_are_skipped_with_one_line(ops, group, why):
    plan = plan_group(graph(*ops, sizes={"m": 8, "n": 16, "k": 4, "j": 4}), group)
    assert plan.skipped and len(plan.lines) == 1 and why in plan.lines[0]


def emit(capsys, *args):
    assert main(["emit", *args]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def apply_mlir(tmp_path, text):
    src = tmp_path / "chain.mlir"
    src.write_text(text)
    done = subprocess.run([IREE_OPT, "--split-input-file", "--transform-interpreter",
                           "--iree-transform-dialect-drop-schedule", str(src)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def check_chain(tmp_path, capsys, chain, fused_json=None, seconds="1"):
    """Emit `chain` for every backend; the number of emitted groups is the header's, every
    skipped or cut group has its stderr line; MLIR applies."""
    g = load_opgraph(chain)
    outs = {}
    for backend in BACKENDS:
        args = [H100_SYNC, chain, "--to", backend, "--time-limit", seconds] + (["--kernel"] if backend == "triton" else [])
        out, err = emit(capsys, *args, *(["--fused", str(fused_json)] if fused_json else []))
        head = out.splitlines()[0]
        emitted = int(head.split(": ")[1].split(" of ")[0])
        comment = "#" if backend == "triton" else "//"
        assert out.count(f"\n{comment} group ") == emitted
        for line in err.splitlines():
            assert line.startswith("mapper: note: group ")
        if backend == "mlir" and emitted and IREE_OPT:
            ir = apply_mlir(tmp_path, out)
            assert ir.count("linalg.generic") + ir.count("linalg.matmul") >= emitted
        outs[backend] = (out, err, len(g.ops))
    return outs


def test_gemm_bias_relu_emits_its_epilogue_for_every_backend(tmp_path, capsys):
    # the groups from a fusion study on an evaluation budget: the same whatever the load
    assert main(["fuse", "h100", "chain-gemm-bias-relu", "--json", "--max-evaluations", "300000"]) == 0
    path = tmp_path / "f.json"
    path.write_text(capsys.readouterr().out)
    outs = check_chain(tmp_path, capsys, "chain-gemm-bias-relu", path, seconds="0.5")
    triton, _, _ = outs["triton"]
    assert "1 of 1 fused group(s) emitted" in triton
    assert "acc = acc + tl.load(bias_ptr" in triton and "acc = tl.maximum(acc, 0.0)" in triton
    assert "LinearCombinationRelu" in outs["cutlass"][0]
    assert "epilogue bias, relu" in outs["mlir"][0]


def test_a_fuse_json_gives_the_groups(tmp_path, capsys):
    assert main(["fuse", "h100", "chain-layernorm-gemm-gelu", "--json", "--time-limit", "2"]) == 0
    path = tmp_path / "f.json"
    path.write_text(capsys.readouterr().out)
    groups = [g["ops"] for g in json.loads(path.read_text())["fused"]["groups"]]
    outs = check_chain(tmp_path, capsys, "chain-layernorm-gemm-gelu", path)
    gemm = next(g for g in groups if "up" in g)
    text = outs["mlir"][0]
    # only the GEMM's group can be emitted, and only without the layernorm prologue
    assert f"{0 if 'norm' in gemm else 1} of {len(groups)} fused group(s)" in text
    if gemm == ["up", "act"]:
        assert "epilogue gelu" in text


def test_bad_fused_json_is_one_line(tmp_path, capsys):
    path = tmp_path / "f.json"
    path.write_text('{"fused": {"groups": [{"ops": ["norm"]}]}}')
    assert main(["emit", "h100", "chain-layernorm-gemm-gelu", "--to", "mlir", "--fused", str(path)]) == 2
    err = capsys.readouterr().err
    assert "f.json: fused.groups: the groups do not cover the ops" in err and err.count("\n") == 1


@pytest.mark.slow
@pytest.mark.parametrize("chain", [n for n in preset_names("workloads") if n.startswith("chain-")])
def test_every_chain_preset_emits_for_every_backend(tmp_path, capsys, chain):
    """Every chain in workloads/ (a fusion study of a few seconds each, then each backend)."""
    assert len(check_chain(tmp_path, capsys, chain, seconds="3")) == 3

"""The emitted Triton kernel run by Triton's interpreter on the CPU (TRITON_INTERPRET=1) against
numpy: square, tall-skinny, GEMV-like and ragged shapes, the epilogue fused. The output is a
window of a larger NaN-filled buffer and the operands sit inside NaN guards: a lane left unwritten
stays NaN, a store out of bounds changes a guard, a load out of bounds poisons the result.

Needs the `triton` extra (`pip install -e '.[triton]'`); run with `pytest -m triton`. Skipped,
with the reason, where triton or torch is not installed."""
import importlib.util
import os
import sys

import numpy as np
import pytest

from mapper.emit.common import GELU_CUBIC, GELU_SCALE, gemm_view
from mapper.emit.common import BlockConfig
from mapper.emit.from_config import mapping_of_config
from mapper.emit.triton import kernel_text
from mapper.load import load_arch, load_constraints, load_workload, workload_from_dict
from mapper.load.mapping import load_mapping
from mapper.mapspace import Mapspace
from mapper.search import Joint, SearchContext, parse_objective
from mapper.units import Where

# before triton is imported: its own library functions (tl.sigmoid) are decorated at import time
os.environ.setdefault("TRITON_INTERPRET", "1")
pytestmark = pytest.mark.triton
torch = None        # imported by the fixture below


@pytest.fixture(scope="module", autouse=True)
def triton_and_torch():
    """Imported once a test here runs, not when the default run collects this file and leaves
    its tests out (torch alone takes seconds to import, in each worker)."""
    global torch
    pytest.importorskip("triton", reason="triton not installed: pip install -e '.[triton]' (the triton extra)")
    torch = pytest.importorskip("torch", reason="torch not installed: pip install -e '.[triton]' (the triton extra)")

GUARD = 3


def load_kernel(text: str, tmp_path, monkeypatch, name="kernel"):
    """The emitted module, its @triton.jit run by the interpreter."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference(a, b, bias, epilogue):
    x = a.astype(np.float64) @ b.astype(np.float64)
    for step in epilogue:
        if step == "bias":
            x = x + bias
        elif step == "relu":
            x = np.maximum(x, 0)
        elif step == "silu":
            x = x * 0.5 * (1 + np.tanh(x / 2))
        elif step == "gelu":
            x = x * 0.5 * (1 + np.tanh(GELU_SCALE * (x + GELU_CUBIC * x ** 3) / 2))
    return x


def guarded(array):
    """A torch view of `array` inside a NaN frame GUARD wide; (view, whole buffer)."""
    whole = torch.full((array.shape[0] + 2 * GUARD, array.shape[1] + 2 * GUARD), float("nan"))
    view = whole[GUARD:GUARD + array.shape[0], GUARD:GUARD + array.shape[1]]
    view.copy_(torch.from_numpy(array))
    return view, whole


def run_checked(module, shape, epilogue, config=None, seed=0):
    m, n, k = shape
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    bias = rng.standard_normal(n, dtype=np.float32)
    a_view, _ = guarded(a)
    b_view, _ = guarded(b)
    out_view, out_whole = guarded(np.full((m, n), np.nan, dtype=np.float32))
    module.matmul(a_view, b_view, bias=torch.from_numpy(bias), out=out_view, config=config)
    got = out_view.numpy()
    assert not np.isnan(got).any(), f"{np.isnan(got).sum()} lanes left unwritten (or poisoned by a load out of bounds)"
    frame = out_whole.numpy().copy()
    frame[GUARD:GUARD + m, GUARD:GUARD + n] = np.nan
    assert np.isnan(frame).all(), "a store out of bounds"
    np.testing.assert_allclose(got, reference(a, b, bias, epilogue), rtol=2e-4, atol=2e-4)


def kernel_for(arch_name, workload_name, config, epilogue):
    arch, wl = load_arch(arch_name), load_workload(workload_name)
    mapping, _ = mapping_of_config(arch, wl, config)
    return kernel_text([gemm_view(arch, wl, mapping)], epilogue)


@pytest.mark.parametrize("shape, config, epilogue", [
    ((128, 128, 96), BlockConfig(32, 32, 32, 2, 4, 2), ["bias", "relu"]),          # square
    ((300, 16, 64), BlockConfig(64, 16, 32, 3, 2), ["bias", "silu"]),              # tall-skinny
    ((1, 200, 150), BlockConfig(16, 64, 32, 2, 2), ["gelu"]),                      # GEMV-like (decode)
    ((100, 90, 70), BlockConfig(32, 32, 16, 2, 4, 2), ["bias", "gelu"]),           # ragged everywhere
])
def test_kernel_matches_numpy(tmp_path, monkeypatch, shape, config, epilogue):
    module = load_kernel(kernel_for("h100", "gemm-4096", config, epilogue), tmp_path, monkeypatch)
    run_checked(module, shape, epilogue)


def test_the_h100_gemm_4096_kernel_at_a_ragged_shape(tmp_path, monkeypatch):
    """The kernel emitted for the EDP mapping (128 x 128 x 64 blocks, GROUP_M 32) on a shape
    small enough for the interpreter, ragged in every dim (the full 4096: the slow test)."""
    arch, wl = load_arch("h100"), load_workload("gemm-4096")
    view = gemm_view(arch, wl, load_mapping("h100-gemm-4096-edp", arch, wl))
    module = load_kernel(kernel_text([view], ["bias", "gelu"]), tmp_path, monkeypatch)
    assert module.CONFIGS[0].kwargs == {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 32}
    run_checked(module, (300, 270, 150), ["bias", "gelu"])


def test_batched_kernel(tmp_path, monkeypatch):
    module = load_kernel(kernel_for("h100", "batched-gemm", BlockConfig(32, 32, 32, 2, 4), ["relu"]),
                         tmp_path, monkeypatch)
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((3, 40, 50), dtype=np.float32), rng.standard_normal((3, 50, 36), dtype=np.float32)
    out = torch.full((3, 40, 36), float("nan"))
    module.matmul(torch.from_numpy(a), torch.from_numpy(b), out=out)
    np.testing.assert_allclose(out.numpy(), np.maximum(a.astype(np.float64) @ b, 0), rtol=2e-4, atol=2e-4)


@pytest.mark.slow       # ~30 s in the interpreter
def test_h100_gemm_4096_first_wave_at_full_size(tmp_path, monkeypatch):
    """The kernel of the EDP mapping at the full 4096^3 size, its first 64 thread blocks
    launched (the whole grid is 1,024 blocks of 64 K steps: hours in the interpreter). With
    GROUP_M = 32 the first 64 program ids are rows 0..31 of block columns 0 and 1: exactly
    those 32 x 2 blocks of 128 x 128 are written, and right; every other lane stays NaN."""
    arch, wl = load_arch("h100"), load_workload("gemm-4096")
    view = gemm_view(arch, wl, load_mapping("h100-gemm-4096-edp", arch, wl))
    module = load_kernel(kernel_text([view], ["relu"]), tmp_path, monkeypatch)
    size, launched = 4096, 64
    rng = np.random.default_rng(11)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    out = torch.full((size, size), float("nan"))
    meta = module._meta(module.CONFIGS[0])
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    module.matmul_kernel[(launched, 1)](ta, tb, out, out, size, size, size, *module._strides(ta),
                                        *module._strides(tb), *module._strides(out), **meta,
                                        num_warps=4, num_stages=2)
    got = out.numpy()
    rows, cols = 32 * 128, 2 * 128
    assert not np.isnan(got[:rows, :cols]).any()
    assert np.isnan(got[:, cols:]).all() and np.isnan(got[rows:, :]).all()
    want = np.maximum(a[:rows].astype(np.float64) @ b[:, :cols], 0)
    np.testing.assert_allclose(got[:rows, :cols], want, rtol=1e-3, atol=1e-3)


@pytest.mark.slow
def test_searched_gelu_kernel_at_1000x3000x700(tmp_path, monkeypatch):
    """The joint search's pick for a ragged 1000 x 3000 x 700 GEMM, emitted with GELU fused."""
    from mapper.cli import main
    workload = tmp_path / "gemm-1000x3000x700.yaml"
    workload.write_text('name: gemm-1000x3000x700\neinsum: "Z[m,n] += A[m,k] * B[k,n]"\n'
                        "sizes: {m: 1000, n: 3000, k: 700}\ndtypes: {Z: fp32, A: bf16, B: bf16}\n")
    out = tmp_path / "k.py"
    assert main(["emit", "h100", str(workload), "--to", "triton", "--kernel", "--epilogue", "gelu",
                 "--time-limit", "8", "-o", str(out)]) == 0
    module = load_kernel(out.read_text(), tmp_path, monkeypatch, "searched")
    run_checked(module, (1000, 3000, 700), ["gelu"])
    sys.modules.pop("searched", None)


def test_the_guards_catch_a_load_past_k(tmp_path, monkeypatch):
    """The check itself: a kernel whose A load ignores the K tail reads past K (the NaN guard or
    the next row) and is caught."""
    text = kernel_for("h100", "gemm-4096", BlockConfig(32, 32, 16, 2, 4), ["bias"])
    broken = text.replace("(offs_k[None, :] < k_left)", "(offs_k[None, :] < BLOCK_K)")
    assert broken != text
    module = load_kernel(broken, tmp_path, monkeypatch, "broken")
    with pytest.raises(AssertionError):
        run_checked(module, (100, 90, 70), ["bias"])


def test_a_swap_ab_decode_kernel_computes_the_einsums_product(tmp_path, monkeypatch):
    """Swapped (`--mapspace swap-ab`), a decode GEMM's kernel runs the einsum's n as its M and
    m as its N (the MMA m64n8k16, m padded to 8, not 64): called with A and B as the einsum
    names them, it still writes Z = A @ B."""
    wl = workload_from_dict({"name": "decode", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                             "sizes": {"m": 1, "n": 200, "k": 150}, "dtype": "bf16", "dtypes": {"Z": "fp32"}},
                            Where("<test>"))
    space = Mapspace(load_arch("h100"), wl, load_constraints("swap-ab"))
    result = Joint().run(space, parse_objective("edp", space.arch), SearchContext(max_evaluations=200_000))
    view = gemm_view(space.arch, space.workload, result.mapping)
    assert view.swapped and view.dim_names[:2] == ("n", "m") and view.instruction == (64, 8, 16)
    module = load_kernel(kernel_text([view], []), tmp_path, monkeypatch)
    run_checked(module, (1, 200, 150), [])

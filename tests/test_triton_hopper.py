"""The Hopper form of the emitted Triton kernel (operand tiles through TMA tensor descriptors,
the mapping's cluster as num_ctas) run by Triton's interpreter on the CPU against numpy, and
scripts/gpu_check.py running it. The interpreter checks the descriptors as the hardware does
(16-byte aligned base and strides, the last dim contiguous) and pads what a tile reads past
the tensor's edge with zeros, as TMA does; it accepts num_ctas and runs each program over its
whole block (one program spans the cluster's tile, so the numbers are the same).

The operands sit inside NaN frames of 4 elements (16 bytes of fp32, so the views stay TMA-legal
when their rows are multiples of 4): a descriptor reaching past its tensor poisons the result,
a store out of bounds changes the output's frame, a lane left unwritten stays NaN.

Needs the `triton` extra; run with `pytest -m triton`."""
import os

import numpy as np
import pytest

from mapper.emit.common import BlockConfig, gemm_view
from mapper.emit.from_config import mapping_of_config
from mapper.emit.triton import kernel_text
from mapper.emit.triton_forms import tma_refusal
from mapper.load import load_arch, load_workload

from test_emit_triton import load_kernel, reference
from test_gpu_check import load_script

os.environ.setdefault("TRITON_INTERPRET", "1")      # before triton is imported
pytestmark = pytest.mark.triton
torch = None
FRAME = 4           # 16 bytes of fp32


@pytest.fixture(scope="module", autouse=True)
def triton_and_torch():
    global torch
    pytest.importorskip("triton", reason="triton not installed: pip install -e '.[triton]' (the triton extra)")
    pytest.importorskip("triton.tools.tensor_descriptor", reason="this Triton has no tensor descriptors")
    torch = pytest.importorskip("torch", reason="torch not installed: pip install -e '.[triton]' (the triton extra)")


def framed(array):
    """A torch view of `array` (2-D or 3-D) inside a NaN frame FRAME wide on its last two axes;
    (view, whole buffer)."""
    *batch, rows, cols = array.shape
    whole = torch.full((*batch, rows + 2 * FRAME, cols + 2 * FRAME), float("nan"))
    view = whole[..., FRAME:FRAME + rows, FRAME:FRAME + cols]
    view.copy_(torch.from_numpy(array))
    return view, whole


def tma_legal(x) -> bool:
    return tma_refusal(x.shape, x.stride(), x.element_size(), x.data_ptr()) is None


def no_pointer_kernel(module, monkeypatch):
    """The pointer form made to fail: a run that passes went through the TMA kernel."""
    class Refused:
        def __getitem__(self, grid):
            raise AssertionError("the pointer kernel ran")
    monkeypatch.setattr(module, "matmul_kernel", Refused())


def run_tma_checked(module, shape, epilogue, config=None, batch=(), seed=0):
    m, n, k = shape
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((*batch, m, k), dtype=np.float32)
    b = rng.standard_normal((*batch, k, n), dtype=np.float32)
    bias = rng.standard_normal(n, dtype=np.float32)
    (a_view, _), (b_view, _) = framed(a), framed(b)
    assert tma_legal(a_view) and tma_legal(b_view)
    out_view, out_whole = framed(np.full((*batch, m, n), np.nan, dtype=np.float32))
    module.matmul(a_view, b_view, bias=torch.from_numpy(bias), out=out_view, config=config, tma=True)
    got = out_view.numpy()
    assert not np.isnan(got).any(), f"{np.isnan(got).sum()} lanes unwritten or poisoned by a read past the tensor"
    frame = out_whole.numpy().copy()
    frame[..., FRAME:FRAME + m, FRAME:FRAME + n] = np.nan
    assert np.isnan(frame).all(), "a store out of bounds"
    np.testing.assert_allclose(got, reference(a, b, bias, epilogue), rtol=2e-4, atol=2e-4)


def kernel_for(config, epilogue, workload="gemm-4096"):
    arch, wl = load_arch("h100"), load_workload(workload)
    return kernel_text([gemm_view(arch, wl, mapping_of_config(arch, wl, config)[0])], epilogue)


@pytest.mark.parametrize("shape, config, epilogue", [
    ((128, 128, 96), BlockConfig(32, 32, 32, 2, 4, 2), ["bias", "relu"]),      # square, whole tiles
    ((100, 72, 96), BlockConfig(64, 32, 64, 3, 4), ["bias", "gelu"]),          # M, N and K tails
    ((1, 96, 80), BlockConfig(16, 64, 32, 2, 2), ["silu"]),                    # decode: one row
])
def test_tma_kernel_matches_numpy(tmp_path, monkeypatch, shape, config, epilogue):
    module = load_kernel(kernel_for(config, epilogue), tmp_path, monkeypatch)
    no_pointer_kernel(module, monkeypatch)
    run_tma_checked(module, shape, epilogue)


def test_batched_tma_kernel(tmp_path, monkeypatch):
    """Batched operands: three-dimensional descriptors, a tile of one batch entry each."""
    module = load_kernel(kernel_for(BlockConfig(32, 32, 32, 2, 4), ["relu"], "batched-gemm"), tmp_path, monkeypatch)
    no_pointer_kernel(module, monkeypatch)
    run_tma_checked(module, (40, 36, 48), ["relu"], batch=(3,))


def test_tma_is_chosen_only_where_it_runs(tmp_path, monkeypatch):
    """`matmul`'s own choice on the CPU is the pointer form (no sm90 device); forced, TMA on rows
    of 90 fp32 (360 bytes) is refused as the hardware would refuse it."""
    module = load_kernel(kernel_for(BlockConfig(32, 32, 32, 2, 4), []), tmp_path, monkeypatch)
    a, b = torch.randn(64, 96), torch.randn(96, 64)
    assert not module.tma_allowed(a, b)
    np.testing.assert_allclose(module.matmul(a, b).numpy(), (a @ b).numpy(), rtol=2e-4, atol=2e-4)
    with pytest.raises(AssertionError, match="16-byte"):
        module.matmul(torch.randn(64, 90), torch.randn(90, 64), tma=True)


def test_the_frames_catch_a_descriptor_past_the_tensor(tmp_path, monkeypatch):
    """The check itself: descriptors wider than their tensors (into the frames) read NaN past K,
    in the last K tile (84 = 2 x 32 + 20), and are caught."""
    text = kernel_for(BlockConfig(32, 32, 32, 2, 4), ["bias"])
    run_tma_checked(load_kernel(text, tmp_path, monkeypatch, "whole"), (100, 72, 84), ["bias"])
    broken = text.replace("list(x.shape), list(x.stride())", "[s + FRAME for s in x.shape], list(x.stride())")
    assert broken != text
    module = load_kernel(broken.replace("import triton\n", f"import triton\nFRAME = {FRAME}\n", 1), tmp_path,
                         monkeypatch, "broken")
    with pytest.raises(AssertionError):
        run_tma_checked(module, (100, 72, 84), ["bias"])


def test_gpu_check_runs_the_hopper_form_in_the_interpreter(tmp_path):
    """gpu_check for a CC 9.0 device: every kernel in the Hopper form, its form and num_ctas in
    the table's row and in the configs CSV; for 8.0 the Ampere form."""
    import csv
    module = load_script()
    out = tmp_path / "check.csv"
    common = ["--interpret", "--shapes", "small", "--only", "square-64", "--time-limit", "1", "--top", "2",
              "--csv", str(out)]
    (row,) = module.main([*common, "--capability", "9.0"])
    assert row["pick_form"].startswith("Hopper") and row["pick_form"].endswith("+TMA")
    assert row["pick_num_ctas"] == 1 and "c1" in row["forms_text"]
    with (tmp_path / "check_configs.csv").open() as f:
        configs = list(csv.DictReader(f))
    assert all(c["form"].startswith("Hopper") and c["num_ctas"] == "1" for c in configs)
    (row,) = module.main([*common, "--capability", "8.0"])
    assert (row["pick_form"], row["autotune_best_form"], row["top_best_form"]) == ("Ampere mma",) * 3


def test_a_cluster_from_the_clusters_mapspace_runs_with_tma(tmp_path, monkeypatch):
    """gpu_check's plan with `--mapspace clusters` (the joint search's pick of a 128^3 fp32 GEMM
    is a 4x4 cluster): the Hopper form with num_ctas 16, the program's block the cluster's tile;
    its kernel, launched with that num_ctas through TMA, computes the matmul at a ragged shape."""
    import triton
    module = load_script()
    args = module.parse_args(["--interpret", "--mapspace", "clusters", "--time-limit", "3", "--top", "1",
                              "--shapes", "small"])
    shape, view = module.plan_shape(load_arch("h100"), "square-128", 128, 128, 128, args)
    module.assign_forms(shape, view, 128, 128, 128, (9, 0), True, 4)
    pick = shape.best("pick")
    ctas = view.cluster[0] * view.cluster[1]
    assert ctas > 1 and pick.form.num_ctas == pick.config.num_ctas == ctas and pick.form.tma
    assert pick.config.block_m >= view.block[0] * view.cluster[0]          # the cluster's tile
    kernel = load_kernel(kernel_text([view], ["relu"]), tmp_path, monkeypatch, "cluster")
    assert kernel.CLUSTER == view.cluster and kernel.CONFIGS[0].num_ctas == ctas
    no_pointer_kernel(kernel, monkeypatch)
    c = pick.config
    config = triton.Config({"BLOCK_M": c.block_m, "BLOCK_N": c.block_n, "BLOCK_K": c.block_k},
                           num_stages=c.num_stages, num_warps=pick.form.num_warps, num_ctas=pick.form.num_ctas)
    run_tma_checked(kernel, (200, 136, 96), ["relu"], config=config)

"""Low precision as the hardware moves it: fp8/fp6/fp4 dtypes, block-scaled formats whose scales
are tensors of their own (counted by hand and by the brute-force simulator), the compute unit's
rate per dtype, and the b200 preset."""
import numpy as np
import pytest

from mapper.cost import evaluate
from mapper.errors import SpecError
from mapper.load import arch_from_dict, load_arch, mapping_from_checked_dict, workload_from_dict
from mapper.mapping import from_table
from mapper.mapspace import Mapspace, counting, sampling
from mapper.units import Where, parse_dtype

from brute_force import simulate
from test_brute_force_agreement import as_plain

W = Where("<test>")


def _gemm(m, n, k, dtype, out="bf16", **dtypes):
    return workload_from_dict({"name": "g", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                               "sizes": {"m": m, "n": n, "k": k}, "dtype": dtype,
                               "dtypes": {"Z": out, **dtypes}}, W)


def _two_level(**compute):
    """DRAM over one buffer that holds everything, over one compute unit."""
    return arch_from_dict({"name": "two", "clock": "1 GHz",
                           "levels": [{"name": "DRAM", "energy_per_byte": {"read": 1, "write": 1, "update": 1}},
                                      {"name": "Buf"}],
                           "compute": {"instances": 1, **compute}}, W)


# ----------------------------------------------------------------------------- dtypes

@pytest.mark.parametrize("name, canonical, bits", [
    ("fp8", "fp8", 8), ("e4m3", "fp8_e4m3", 8), ("FP8_E5M2", "fp8_e5m2", 8), ("e2m3", "fp6_e2m3", 6),
    ("fp6_e3m2", "fp6_e3m2", 6), ("e2m1", "fp4_e2m1", 4), ("nvfp4", "nvfp4", 4), ("mxfp6", "mxfp6", 6),
    ("mxfp8", "mxfp8", 8), (12, "", 12)])
def test_dtype_names_and_bits(name, canonical, bits):
    assert parse_dtype(name, W) == (canonical, bits)


@pytest.mark.parametrize("bad", ["fp5", "e4m4", "nvfp8", "", True, 0, "fp8 "*20])
def test_unknown_dtypes_are_refused_with_the_key(bad):
    with pytest.raises(SpecError, match=r"dtypes\.A: expected a dtype \(.*nvfp4"):
        parse_dtype(bad, Where("w.yaml", "dtypes.A"))


# ----------------------------------------------------------------------------- block-scaled rewrite

def test_nvfp4_rewrites_the_einsum_with_scale_tensors():
    wl = _gemm(32, 16, 64, "nvfp4")
    assert wl.einsum == "Z[m,n] += A[m,k_blk,k_in] * B[k_blk,k_in,n] * A_scale[m,k_blk] * B_scale[k_blk,n]"
    assert dict(zip(wl.dims, wl.sizes)) == {"m": 32, "n": 16, "k_blk": 4, "k_in": 16}
    assert wl.macs == 32 * 16 * 64
    by_name = {t.name: t for t in wl.tensors}
    assert (by_name["A"].bits, by_name["A_scale"].bits, by_name["A_scale"].dtype) == (4, 8, "fp8_e4m3")
    assert by_name["B_scale"].scales == "B" and not by_name["B"].scales
    assert [t.name for t in wl.operands] == ["A", "B"]
    assert [wl.dims[d] for d in wl.block_dims] == ["k_in"]


def test_mx_block_is_32_with_an_e8m0_scale_and_only_the_scaled_operand_gets_one():
    wl = _gemm(8, 8, 64, "bf16", A="mxfp8")
    by_name = {t.name: t for t in wl.tensors}
    assert dict(zip(wl.dims, wl.sizes))["k_in"] == 32
    assert set(by_name) == {"Z", "A", "B", "A_scale"} and by_name["A_scale"].dtype == "e8m0"


@pytest.mark.parametrize("spec, key", [
    ({"sizes": {"m": 8, "n": 8, "k": 40}}, r"sizes\.k: 40 is not a multiple of the block of 16"),
    ({"dtypes": {"Z": "bf16", "A": "nvfp4", "B": "mxfp4"}}, r"dtypes: .* one block size"),
    ({"einsum": "Z[m,n] += A[m,k,j] * B[k,j,n]", "sizes": {"m": 8, "n": 8, "k": 16, "j": 2}},
     r"dtypes\.A: .* exactly one reduction dim that every operand indexes plainly, got \['k', 'j'\]"),
    ({"einsum": "Z[m,n] += A[m,k] * A_scale[k,n]"}, r"einsum: the block-scaled rewrite needs the name 'A_scale'"),
])
def test_block_scaled_refusals_name_the_key(spec, key):
    data = {"name": "g", "einsum": "Z[m,n] += A[m,k] * B[k,n]", "sizes": {"m": 8, "n": 8, "k": 16},
            "dtype": "bf16", "dtypes": {"Z": "bf16", "A": "nvfp4"}, **spec}
    with pytest.raises(SpecError, match=key):
        workload_from_dict(data, Where("w.yaml"))


def test_nvfp4_hand_count_at_dram():
    """Nothing refetched (Buf holds every tensor whole): DRAM reads A once, M*K elements of 4
    bits, plus its scales, M*K/16 of one byte each; B likewise, K*N/2 + K*N/16 bytes."""
    M, N, K = 32, 16, 64
    wl = _gemm(M, N, K, "nvfp4")
    arch = _two_level()
    loops = [{"dim": d, "bound": s} for d, s in zip(wl.dims, wl.sizes)]
    mapping = mapping_from_checked_dict({"mapping": [{"level": "DRAM"}, {"level": "Buf", "loops": loops}]},
                                        arch, wl, W)
    dram = evaluate(arch, wl, mapping).levels[0].tensors
    a_bytes = dram["A"].reads * 4 / 8 + dram["A_scale"].reads * 1
    assert a_bytes == M * K * 4 / 8 + M * K / 16 * 1
    assert dram["B"].reads * 4 / 8 + dram["B_scale"].reads == K * N / 2 + K * N / 16
    # the scales' bytes are in the level's traffic and energy (1 pJ per byte read here)
    plain = evaluate(arch, _gemm(M, N, K, "fp4"), mapping_from_checked_dict(
        {"mapping": [{"level": "DRAM"}, {"level": "Buf", "loops": [{"dim": "m", "bound": M}, {"dim": "n", "bound": N},
                                                                    {"dim": "k", "bound": K}]}]},
        arch, _gemm(M, N, K, "fp4"), W))
    scaled = evaluate(arch, wl, mapping)
    assert scaled.levels[0].traffic_bytes - plain.levels[0].traffic_bytes == (M * K + K * N) / 16


def test_scales_agree_with_the_brute_force_and_k_in_stays_whole_innermost():
    wl = _gemm(4, 4, 32, "nvfp4")
    arch = load_arch("toy")
    space = Mapspace(arch, wl)
    table = sampling.sample(space, 40, np.random.default_rng(3))
    k_in = wl.dims.index("k_in")
    for row in range(len(table)):
        mapping = from_table(table, row)
        inner = dict(mapping.levels[-1].temporal)
        assert inner.get(k_in) == 16, "the block is consumed whole at the innermost level"
        truth = simulate(*as_plain(arch, wl, mapping))
        ev = evaluate(arch, wl, mapping)
        for level in ev.levels:
            for name, cost in level.tensors.items():
                want = truth["levels"][level.name]["tensors"][name]
                assert (cost.reads, cost.fills, cost.updates) == (want["reads"], want["fills"], want["updates"])


# ----------------------------------------------------------------------------- rate per dtype

def test_macs_per_cycle_per_dtype_sets_the_compute_time_and_a_plain_number_still_works():
    arch = _two_level(macs_per_cycle={"bf16": 2, "fp8": 4, "fp4": 8}, energy={"bf16": 1, "fp8": 0.5})
    cycles = {}
    for dtype in ("bf16", "fp8", "e5m2", "nvfp4", "fp32"):
        wl = _gemm(8, 8, 32, dtype)
        loops = [{"dim": d, "bound": s} for d, s in zip(wl.dims, wl.sizes)]
        ev = evaluate(arch, wl, mapping_from_checked_dict(
            {"mapping": [{"level": "DRAM"}, {"level": "Buf", "loops": loops}]}, arch, wl, W))
        cycles[dtype] = ev.cycles
    macs = 8 * 8 * 32
    assert cycles == {"bf16": macs / 2, "fp8": macs / 4, "e5m2": macs / 4, "nvfp4": macs / 8, "fp32": macs / 2}
    # a mixed-precision MMA runs at its wider operand's rate
    assert arch.for_workload(_gemm(8, 8, 32, "fp8", B="bf16")).compute.macs_per_cycle == 2
    assert arch.for_workload(_gemm(8, 8, 32, "fp8")).compute.energy_per_mac == 0.5
    assert _two_level(macs_per_cycle=3).for_workload(_gemm(8, 8, 32, "fp8")).compute.macs_per_cycle == 3


@pytest.mark.parametrize("compute, key", [
    ({"macs_per_cycle": {"bf17": 2}}, r"compute\.macs_per_cycle\.bf17: expected a dtype"),
    ({"macs_per_cycle": {"fp8": 2, "e4m3": 4}}, r"dtype family fp8 given twice"),
    ({"macs_per_cycle": {"bf16": 2, "fp8": 4}, "energy": {"fp8": 1, "bf16": 2}}, r"compute\.energy: list the default"),
])
def test_per_dtype_compute_refusals(compute, key):
    with pytest.raises(SpecError, match=key):
        _two_level(**compute)


def test_b200_runs_fp8_and_nvfp4_at_their_rates_where_compute_binds():
    """The same GEMM and mapping shape on b200: compute time halves from bf16 to fp8 and halves
    again to nvfp4 (the fp4 rate), the native k grows with the dtype (16, 32, 64)."""
    arch = load_arch("b200")
    shapes = {}
    for dtype, rate in (("bf16", 4096), ("fp8", 8192), ("nvfp4", 16384)):     # per SM: 4 Tensor Cores
        resolved = arch.for_workload(_gemm(256, 256, 256, dtype))
        assert resolved.compute.macs_per_cycle == rate
        shapes[dtype] = dict(resolved.compute.native_shape)["k"]
    assert shapes == {"bf16": 16, "fp8": 32, "nvfp4": 64}
    h100 = load_arch("h100")
    assert h100.for_workload(_gemm(64, 64, 64, "fp8")).peak_macs_per_cycle == 2 * h100.peak_macs_per_cycle


# ----------------------------------------------------------------------------- models in low precision

@pytest.mark.parametrize("model", ["llama-7b", "gpt2", "bert-base", "resnet50"])
def test_every_model_preset_binds_on_b200_in_bf16_fp8_and_nvfp4(model):
    """What `mapper sweep b200 --model M --dtype D` searches, at a small size: every layer's space
    binds (block dims, native k per dtype) and is not empty; in nvfp4 each layer whose reduction
    is a multiple of 16 gains scale tensors, the others are refused naming their size."""
    from mapper.sweep.models import expand, load_model, with_dtype
    arch = load_arch("b200")
    base = load_model(model)
    inputs = {k: min(v, 64) for k, v in base.inputs}
    for dtype in ("bf16", "fp8", "nvfp4"):
        chosen = with_dtype(base, dtype, W) if dtype != "bf16" else base
        for phase in base.phase_names:
            try:
                groups = expand(chosen, phase, inputs).groups
            except SpecError as exc:
                assert dtype == "nvfp4" and "is not a multiple of the block of 16" in str(exc), str(exc)
                assert model == "resnet50", "a 3-channel input convolution, the one layer refused"
                continue
            for group in groups:
                space = Mapspace(arch, group.workload)
                assert counting.size(space) > 0, (model, dtype, group.workload.name)
                if dtype == "nvfp4":
                    assert any(t.scales for t in group.workload.tensors)


def test_sweep_dtype_flag_names_the_rows_and_refuses_an_unknown_dtype(tmp_path, capsys):
    from mapper.cli import main
    db = tmp_path / "r.sqlite"
    # one block-scaled dtype, in this process (`--jobs 1`: no pool to start); fp8's rows are
    # named by the same rule (`sweep/models.py`)
    code = main(["sweep", "h100", "--model", "gpt2", "--phase", "decode", "--seq", "64", "--dtype", "nvfp4",
                 "--strategy", "greedy", "--max-evaluations", "200", "--jobs", "1", "--db", str(db)])
    assert code == 0
    assert "gpt2-nvfp4-decode" in capsys.readouterr().out
    assert main(["sweep", "h100", "--model", "gpt2", "--dtype", "fp5", "--db", str(db)]) == 2
    assert "--model gpt2: dtype: expected a dtype" in capsys.readouterr().err
    assert main(["sweep", "h100", "--gemm", "m=64 n=64 k=64", "--dtype", "fp8", "--db", str(db)]) == 2
    assert main(["sweep", "h100", "--model", "gpt2", "--dtype", "nvfp4", "--fuse", "--db", str(db)]) == 2


def test_a_compute_bound_gemm_on_b200_runs_fp8_twice_and_nvfp4_four_times_as_fast_as_bf16():
    """b200 with its memories made ideal (unlimited bandwidth, no latency: compute binds), one
    mapping priced in each dtype: the time is the tensor cores', in the ratio of their rates."""
    import dataclasses
    import math
    from mapper.api import run_search
    b200 = load_arch("b200")
    ideal = dataclasses.replace(b200, levels=tuple(dataclasses.replace(lv, bandwidth=math.inf, latency=0)
                                                   for lv in b200.levels))
    bf16 = run_search(ideal, _gemm(1024, 1024, 1024, "bf16"), max_evaluations=400).evaluation
    fp8 = run_search(ideal, _gemm(1024, 1024, 1024, "fp8"), max_evaluations=400).evaluation
    fp4 = run_search(ideal, _gemm(1024, 1024, 1024, "nvfp4"), max_evaluations=400).evaluation
    for ev in (bf16, fp8, fp4):
        assert ev.cycles == ev.compute_cycles
    assert bf16.cycles / fp8.cycles == pytest.approx(2, rel=0.02)
    assert bf16.cycles / fp4.cycles == pytest.approx(4, rel=0.02)

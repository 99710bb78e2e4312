"""The emitted MLIR checked by the real tools (iree-base-compiler / iree-base-runtime, the `test`
extra): `iree-opt --transform-interpreter` applies the script; the loop nest it leaves has the
mapping's tile sizes as steps, level by level; the epilogue runs inside the innermost tile loop;
ragged tiles clamp alike for the producer and the consumer; and the fused program, compiled for
the CPU and run, matches numpy at a ragged shape."""
import re
import shutil
import subprocess

import numpy as np
import pytest

from mapper.emit.common import GELU_CUBIC, GELU_SCALE
from mapper.emit.common import BlockConfig
from mapper.emit.from_config import mapping_of_config
from mapper.emit.mlir import executable_plan, mlir_text, payload_text, tile_plan, transform_text
from mapper.load import load_arch, load_workload
from mapper.load.mapping import load_mapping, mapping_from_dict
from mapper.units import Where
from presets_sync import H100_SYNC, H100_SYNC_EDP

IREE_OPT = shutil.which("iree-opt")
needs_iree = pytest.mark.skipif(IREE_OPT is None, reason="iree-opt not found: pip install iree-base-compiler "
                                "(in the test extra: pip install -e '.[test]')")

RAGGED_WORKLOAD = """name: gemm-100x70x90
einsum: "Z[m,n] += A[m,k] * B[k,n]"
sizes: {m: 100, n: 70, k: 90}
dtypes: {Z: fp32, A: fp32, B: fp32}
"""
# blocks of 32 x 32 x 16 (2 x 2 warps of 16 x 16), 4 x 3 blocks of the padded 128 x 96 grid
RAGGED_MAPPING = [
    {"level": "HBM", "loops": []},
    {"level": "L2", "loops": [{"dim": "k", "bound": 6}],
     "spatial": [{"dim": "m", "bound": 4, "axis": "x"}, {"dim": "n", "bound": 3, "axis": "x"}]},
    {"level": "SMEM", "spatial": [{"dim": "m", "bound": 2, "axis": "x"}, {"dim": "n", "bound": 2, "axis": "x"}],
     "stages": 2},
    {"level": "RF", "loops": [{"dim": "m", "bound": 16}, {"dim": "n", "bound": 16}, {"dim": "k", "bound": 16}]},
]


def apply(tmp_path, text: str, name: str = "k.mlir") -> str:
    src = tmp_path / name
    src.write_text(text)
    done = subprocess.run([IREE_OPT, "--transform-interpreter", "--iree-transform-dialect-drop-schedule", str(src)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def ragged(tmp_path):
    path = tmp_path / "gemm-100x70x90.yaml"
    path.write_text(RAGGED_WORKLOAD)
    arch, wl = load_arch(H100_SYNC), load_workload(str(path))
    return arch, wl, mapping_from_dict({"mapping": RAGGED_MAPPING, "padded": True}, arch, wl, Where("test"))


def _maps(ir: str) -> dict[str, int]:
    """#mapN -> its multiplier, for the `(d0) -> (d0 * S)` maps foralls index with."""
    out = {}
    for name, factor in re.findall(r"^(#map\d*) = affine_map<\(d0\) -> \(d0 \* (\d+)\)>", ir, re.M):
        out[name] = int(factor)
    return out


def loop_nest(ir: str):
    """The loops around every op, read off the printed IR: a list of (line, [(kind, steps)...])
    for each line, `kind` for/forall and `steps` the step (for) or the per-index strides (forall)."""
    maps, stack, out, constants = _maps(ir), [], [], {}
    lines = ir.splitlines()
    for i, line in enumerate(lines):
        text = line.strip()
        if m := re.match(r"(%c\w*) = arith.constant (\d+) : index", text):
            constants[m.group(1)] = int(m.group(2))
        if text.startswith("}"):
            stack.pop()
        out.append((text, [entry for entry in stack if entry[0] != "region"]))
        if text.endswith("{") and not text.startswith("}"):
            if m := re.search(r"scf\.for %\w+ = %\w+ to %\w+ step (%\w+)", text):
                stack.append(("for", (constants[m.group(1)],)))
            elif m := re.search(r"scf\.forall \(([^)]*)\) in", text):
                ivs = [v.strip() for v in m.group(1).split(",")]
                steps = []
                for iv in ivs:      # the affine.apply of each index gives its stride (none: 1)
                    stride = 1
                    for later in lines[i + 1:]:
                        if "scf.for" in later:
                            break
                        if f"({iv})" in later and "affine.apply" in later:
                            stride = maps[re.search(r"(#map\d*)\(", later).group(1)]
                            break
                    steps.append(stride)
                stack.append(("forall", tuple(steps)))
            else:
                stack.append(("region", ()))
    return out


def loops_around(ir: str, needle: str):
    found = [loops for text, loops in loop_nest(ir) if needle in text]
    assert found, f"{needle} not in the result"
    return found


@needs_iree
def test_h100_edp_steps_are_the_mapping_tiles_and_the_epilogue_is_inside(tmp_path):
    arch, wl = load_arch(H100_SYNC), load_workload("gemm-4096")
    mapping = load_mapping(H100_SYNC_EDP, arch, wl)
    text, plan = mlir_text(arch, wl, mapping, ["bias", "gelu"])
    ir = apply(tmp_path, text)
    # by hand from mappings/h100-gemm-4096-edp.yaml: HBM loops n 8 times over 4096 (n tiles of
    # 512); L2 splits 32 x 4 blocks of 128 x 128; SMEM 2 x 2 warps of 64 x 64; the K loop steps
    # by SMEM's 64; RF runs m16n8k16 fragments in its order m, n, k
    expected = [("for", (512,)), ("forall", (128, 128)), ("forall", (64, 64)), ("for", (64,)),
                ("for", (16,)), ("for", (8,)), ("for", (16,))]
    [contraction] = loops_around(ir, "mapper.contraction")
    assert contraction == expected
    [epilogue] = loops_around(ir, "mapper.epilogue")
    assert epilogue == expected[:3]          # inside the innermost tile loop over m, n; not in K's
    assert ir.count("mapper.epilogue") == 1 and ir.count("mapper.contraction") == 1   # nothing left outside
    assert not plan.changes


@needs_iree
def test_ragged_tiles_clamp_alike_for_producer_and_consumer(tmp_path):
    arch, wl, mapping = ragged(tmp_path)
    text, _ = mlir_text(arch, wl, mapping, ["bias", "relu"])
    ir = apply(tmp_path, text)
    [epilogue] = loops_around(ir, "mapper.epilogue")
    assert epilogue == [("forall", (32, 32)), ("forall", (16, 16))]
    assert "affine.min" in ir
    # inside the warp loop: the slices of the output the fill (producer's init) and the epilogue
    # write take the same sizes, and those sizes are clamped (affine.min) values
    nest = loop_nest(ir)
    inner = [text for text, loops in nest if loops == epilogue]
    mins = {m.group(1) for text in inner + [t for t, _ in nest] if (m := re.match(r"(%\w+) = affine.min", text))}
    out_slices = [re.search(r"\] \[([^\]]*)\] \[1, 1\] : tensor<\?x\?xf32> to tensor<\?x\?xf32>", text)
                  for text in inner if "tensor.extract_slice" in text]
    sizes = {m.group(1) for m in out_slices if m}
    assert len(sizes) == 1, sizes
    assert all(part.strip() in mins for part in sizes.pop().split(","))


@needs_iree
@pytest.mark.slow       # ~10 s, iree-compile's own start-up and LLVM: no smaller case exists (CI runs it)
def test_fused_program_compiles_and_matches_numpy_at_a_ragged_shape(tmp_path):
    runtime = pytest.importorskip("iree.runtime", reason="pip install iree-base-runtime (the test extra)")
    compiler = shutil.which("iree-compile")
    assert compiler, "iree-compile missing beside iree-opt"
    arch, wl, mapping = ragged(tmp_path)
    epilogue = ["bias", "gelu"]
    plan = executable_plan(tile_plan(arch, wl, mapping), wl.sizes)
    ir = apply(tmp_path, payload_text(wl, epilogue) + transform_text(wl, plan, epilogue))
    [epilogue_loops] = loops_around(ir, "mapper.epilogue")
    # the block loops (both dims clamp at 32: 100 and 70 are no multiples), sequential, epilogue fused
    assert epilogue_loops == [("for", (32,)), ("for", (32,))]
    assert loops_around(ir, "mapper.contraction") == [epilogue_loops + [("for", (16,))]]
    (tmp_path / "tiled.mlir").write_text(ir)
    done = subprocess.run([compiler, "--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
                           "--iree-llvmcpu-target-cpu=generic", str(tmp_path / "tiled.mlir"), "-o",
                           str(tmp_path / "k.vmfb")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    config = runtime.Config("local-task")
    context = runtime.SystemContext(config=config)
    context.add_vm_module(runtime.VmModule.mmap(config.vm_instance, str(tmp_path / "k.vmfb")))
    rng = np.random.default_rng(7)
    a = rng.standard_normal((100, 90), dtype=np.float32)
    b = rng.standard_normal((90, 70), dtype=np.float32)
    bias = rng.standard_normal(70, dtype=np.float32)
    got = np.asarray(context.modules.module["kernel"](a, b, bias))
    x = a.astype(np.float64) @ b + bias
    want = x * 0.5 * (1 + np.tanh(GELU_SCALE * (x + GELU_CUBIC * x ** 3) / 2))     # x * sigmoid(...)
    assert got.shape == (100, 70)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _applies(tmp_path, arch_name, workload_name, mapping, epilogue=("bias", "silu")):
    arch, wl = load_arch(arch_name), load_workload(workload_name)
    text, _ = mlir_text(arch, wl, mapping(arch, wl) if callable(mapping) else mapping, list(epilogue))
    ir = apply(tmp_path, text, f"{arch.name}-{wl.name}.mlir")      # names, not paths: inside tmp_path
    assert ir.count("mapper.epilogue") == (1 if epilogue else 0) and ir.count("mapper.contraction") == 1
    return ir


@needs_iree
@pytest.mark.parametrize("workload", ["gemm-3000x5000x1000", "gemv-4096", "batched-gemm", "attention-qk"])
def test_preset_gemms_apply(tmp_path, workload):
    """A few presets in the default run (every one: test_every_preset_applies, slow)."""
    ir = _applies(tmp_path, "h100", workload, lambda a, w: mapping_of_config(a, w, BlockConfig(64, 128, 32, 3, 4))[0])
    assert "scf.forall" in ir


@needs_iree
def test_accelerator_mapping_applies(tmp_path):
    arch, wl = load_arch("toy"), load_workload("gemm-256")
    ir = _applies(tmp_path, "toy", "gemm-256", load_mapping("toy-gemm-256-os", arch, wl), epilogue=())
    # by hand from mappings/toy-gemm-256-os.yaml: DRAM loops m, n 4 times (tiles of 64), the
    # buffer m, n 4 times (16) over a 16 x 16 PE array (1), its k 16 times (16), the registers k
    assert loops_around(ir, "mapper.contraction") == [
        [("for", (64,)), ("for", (64,)), ("for", (16,)), ("for", (16,)), ("forall", (1, 1)), ("for", (16,))]]


@needs_iree
@pytest.mark.slow
def test_every_preset_applies(tmp_path):
    """Every workload preset on h100, its mapping the joint search's best (a short search), emitted
    as MLIR and applied; the GEMMs emitted for Triton and CUTLASS too."""
    from mapper.emit.common import EmitError, gemm_view
    from mapper.emit.cutlass import cutlass_text
    from mapper.emit.triton import kernel_text
    from mapper.load import preset_names
    from mapper.load.files import spec_data
    from mapper.mapspace import Mapspace
    from mapper.search import SearchContext, make_strategy, parse_objective
    from mapper.load.constraints import load_constraints
    arch = load_arch("h100")
    gemms = 0
    for name in preset_names("workloads"):
        if "ops" in spec_data("workloads", name)[0]:
            continue                    # an op graph: its fused groups in test_emit_chain.py
        wl = load_workload(name)
        space = Mapspace(arch, wl, load_constraints("default"))
        result = make_strategy("joint", {}).run(space, parse_objective("edp", arch), SearchContext.for_command(3.0),
                                                lambda n: None)
        epilogue = () if any(t.bits < 16 for t in wl.tensors if not t.is_output) else ("bias", "relu")
        text, _ = mlir_text(arch, wl, result.mapping, list(epilogue))
        ir = apply(tmp_path, text, f"{name}.mlir")
        assert ir.count("mapper.contraction") == 1, name
        try:
            view = gemm_view(arch, wl, result.mapping)
        except EmitError:
            continue
        compile(kernel_text([view], ["bias"]), name, "exec")
        assert "--cta_m=" in cutlass_text(view)
        gemms += 1
    assert gemms >= 20

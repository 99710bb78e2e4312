"""The ports for the side-by-side with AccelForge (docs/RESULTS.md, "Beside AccelForge"):
archs/tpu-v4i.yaml, workloads/chain-gpt3-6.7b-layer.yaml and the keeps by role
(constraints/tpu-v4i-roles.yaml) that `mapper fuse --mapspace` adds to every op's space."""
from __future__ import annotations

import math

import yaml

from mapper.fusion.grouping import best_grouping, unfused
from mapper.fusion.groups import Grouper
from mapper.fusion.kernels import OpSearches
from mapper.load import load_arch, load_constraints, load_opgraph, opgraph_from_dict
from mapper.search import SearchContext
from mapper.units import Where

# the GPT-3 layer's ops at sizes a test searches in seconds (the same dims and roles)
SMALL = {"m": 16, "p": 16, "d": 16, "h": 2, "e": 4, "f": 4, "g": 16, "c": 32, "j": 16}


def test_the_tpu_v4i_port_carries_accelforges_figures_per_byte():
    """AccelForge gives J per bit; the port charges per byte (x 8), 4 x 128 x 128 MACs at 1.05 GHz."""
    arch = load_arch("tpu-v4i")
    dram, glb, local, reg = arch.levels
    assert math.isclose(dram.byte_energy_read, 7.03 * 8) and math.isclose(glb.byte_energy_write, 2.36 * 8)
    assert math.isclose(local.byte_energy_read, 0.249 * 8) and local.mesh == (4, 1)
    assert reg.capacity == 1 and reg.mesh == (512, 128) == arch.compute.mesh
    assert math.isclose(arch.compute.energy_per_mac, 0.084)
    assert math.isclose(dram.bandwidth * 1.05e9, 614e9)   # bytes per cycle at 1.05 GHz


def test_the_gpt3_layer_has_accelforges_einsums_and_macs():
    graph = load_opgraph("chain-gpt3-6.7b-layer")
    assert [op.name for op in graph.ops] == ["copy", "v", "k", "q", "qk", "softmax", "av", "z", "ffa", "ffb"]
    n, d, c = 8192, 4096, 16384
    macs = sum(op.workload.macs for op in graph.ops if op.family == "einsum")
    # V, K, Q and Z: n x d x d each; QK and AV: n x n x d; the FFN: 2 x n x d x c
    assert macs == 4 * n * d * d + 2 * n * n * d + 2 * n * d * c


def small_layer():
    with open("workloads/chain-gpt3-6.7b-layer.yaml") as f:
        data = yaml.safe_load(f)
    return opgraph_from_dict({**data, "sizes": SMALL}, Where("<test>"))


def searches(arch, graph, extra):
    context = SearchContext(time_limit=60.0, max_evaluations=300_000)
    return OpSearches(arch, graph, context, 0.5, 0.2, extra_levels=extra)


def test_keeps_by_role_reach_every_op_and_the_layer_fuses_on_tpu_v4i():
    """Without the roles, a 1-byte Register cannot hold a MAC's three words: no op maps. With
    them, each einsum's Register holds its weight only and its LocalBuffer no weight; the fused
    grouping is no worse than unfused."""
    arch, graph = load_arch("tpu-v4i"), small_layer()
    bare = searches(arch, graph, ())
    assert isinstance(bare._run(1, None), str) and "Register" in bare._run(1, None)
    extra = load_constraints("tpu-v4i-roles").levels
    roles = searches(arch, graph, extra)
    for i, op in enumerate(graph.ops):
        if op.family != "einsum":
            continue
        mapped = roles.free(i)
        names = [t.name for t in op.workload.tensors]
        weight = names[[k for k, t in enumerate(op.workload.tensors) if not t.is_output][1]]
        assert {names[t] for t in mapped.mapping.levels[3].keep} <= {weight}, op.name
        assert weight not in {names[t] for t in mapped.mapping.levels[2].keep}, op.name
    grouper = Grouper(arch, graph, roles, "energy")
    n = len(graph.ops)
    assert best_grouping(grouper, n).score <= unfused(grouper, n).score


def test_a_mapspace_naming_a_level_the_arch_lacks_is_refused_in_one_line():
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-m", "mapper", "fuse", "h100", "chain-gemm-bias-relu", "--mapspace",
                           "tpu-v4i-roles", "--time-limit", "1"], capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().endswith("constraints/tpu-v4i-roles.yaml: levels.LocalBuffer: no level "
                                        "'LocalBuffer' in arch h100 (levels: HBM, L2, SMEM, RF; or outermost, "
                                        "innermost, every)")
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("mapper: error: ")

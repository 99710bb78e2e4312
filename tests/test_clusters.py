"""Thread-block clusters (`block_clusters:` on the fanout from L2 to the SMs): a tile the CTAs of
a cluster share is read once from L2 and multicast (exact counts, by hand, in both cost paths
and the literal simulator), the cluster shapes the part can schedule, the search's bounds and
result on spaces with clusters, and the cluster in the emitted CUTLASS and Triton forms."""
import json
import math
import re
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import strategies as st

from mapper.constraints import Constraints
from mapper.cost import evaluate, evaluate_many
from mapper.emit.common import gemm_view
from mapper.emit.cutlass import cutlass_shape, cutlass_text
from mapper.emit.triton import kernel_text, triton_config
from mapper.errors import SpecError
from mapper.load import load_arch, load_workload, mapping_from_checked_dict, workload_from_dict
from mapper.load.arch import arch_from_dict
from mapper.mapping import to_table
from mapper.mapspace import Mapspace, counting, infeasible, pruning, tables
from mapper.search import Exhaustive, Joint, parse_objective
from mapper.units import Where

from brute_force import simulate
from prefixes import check_prefix_bounds
from scaled import quick_and_full
from strategies import archs, problems, workloads
from test_brute_force_agreement import as_plain
from test_cost_agreement import assert_same
from test_joint import BYPASS_EVERYWHERE
from presets_sync import H100_SYNC

H100 = load_arch(H100_SYNC)
GEMM = load_workload("gemm-4096")
CLUSTERS = Constraints(name="clusters", clusters=True)      # the opt-in mapspace (`--mapspace clusters`)
SMS_USED = 128          # the mappings below: 128 CTAs side by side


def h100_mapping(cluster: dict[str, int], m_side: int = 32, n_side: int = 4) -> dict:
    """gemm-4096's EDP mapping (mappings/h100-gemm-4096-edp.yaml: 128 x 128 x 64 blocks, 128 at
    once) with `cluster` CTAs (dim -> CTAs) of each block cluster taken out of the blocks side by
    side: m_side x n_side CTAs in all, as clusters (x) of the cluster's CTAs (y)."""
    side = {"m": m_side // cluster.get("m", 1), "n": n_side // cluster.get("n", 1)}
    spatial = [{"dim": d, "bound": b, "axis": "x"} for d, b in side.items() if b > 1]
    spatial += [{"dim": d, "bound": b, "axis": "y"} for d, b in cluster.items() if b > 1]
    return [{"level": "HBM", "loops": [{"dim": "n", "bound": 8}], "keep": ["Z", "A", "B"]},
            {"level": "L2", "loops": [{"dim": "k", "bound": 64}], "spatial": spatial, "keep": ["Z", "A", "B"]},
            {"level": "SMEM", "spatial": [{"dim": "m", "bound": 2, "axis": "x"}, {"dim": "n", "bound": 2, "axis": "x"}],
             "keep": ["Z", "A", "B"], "stages": 2},
            {"level": "RF", "loops": [{"dim": "m", "bound": 64}, {"dim": "n", "bound": 64}, {"dim": "k", "bound": 64}],
             "keep": ["Z", "A", "B"], "stages": 2}]


def priced(cluster: dict[str, int], arch=H100):
    """The scalar evaluation of `h100_mapping(cluster)`, checked against the vectorised one."""
    mapping = mapping_from_checked_dict(h100_mapping(cluster), arch, GEMM, Where("<test>"))
    costs = evaluate_many(arch, GEMM, to_table([mapping], 3, 3))
    assert_same(arch, GEMM, mapping, costs)
    return evaluate(arch, GEMM, mapping)


# By hand: each CTA holds a 64 (k) x 128 tile of A (m) and of B (n), fetched once per step of
# the loops above SMEM (n 8 at HBM, k 64 at L2): 8,192 words x 512 fetches into each SMEM.
TILE_WORDS, FETCHES = 64 * 128, 8 * 64


@pytest.mark.parametrize("ctas", [2, 4, 8])
def test_a_tile_multicast_to_a_cluster_of_c_ctas_moves_a_cth_of_its_bytes_from_l2(ctas):
    """A cluster along m: its CTAs need one B tile (B does not depend on m), read once from L2
    for all c; each CTA's A tile is its own. SMEM's fills (each CTA's copy) do not change."""
    plain, clustered = priced({}), priced({"m": ctas})
    l2, smem = 1, 2
    for ev in (plain, clustered):
        assert ev.levels[smem].tensors["B"].fills == TILE_WORDS * FETCHES
        assert ev.levels[l2].tensors["A"].reads == TILE_WORDS * FETCHES * SMS_USED
    assert plain.levels[l2].tensors["B"].reads == TILE_WORDS * FETCHES * SMS_USED
    assert clustered.levels[l2].tensors["B"].reads == TILE_WORDS * FETCHES * SMS_USED // ctas


def test_a_two_by_two_cluster_halves_both_operands_reads_from_l2():
    """2 x 2 CTAs (m x n): each A tile is shared by the 2 CTAs along n, each B tile by the 2
    along m; the output's partial sums are each CTA's own (no reduction across a cluster)."""
    plain, clustered = priced({}), priced({"m": 2, "n": 2})
    for tensor in ("A", "B"):
        assert clustered.levels[1].tensors[tensor].reads * 2 == plain.levels[1].tensors[tensor].reads
    assert clustered.levels[1].tensors["Z"].updates == plain.levels[1].tensors["Z"].updates


def test_the_cluster_moves_the_bottleneck_off_l2():
    """Why a cluster wins by the model: without one, L2 serves 128 copies of every tile and is
    the bottleneck (its bytes over 5,120 B/cycle); with a cluster of 2 along m it serves half of
    B's, and shared memory's own traffic is what limits the kernel."""
    plain, clustered = priced({}), priced({"m": 2})
    assert plain.bottleneck == "L2" and clustered.bottleneck == "SMEM"
    assert clustered.cycles < plain.cycles and clustered.energy_pj < plain.energy_pj
    saved = plain.levels[1].traffic_bytes - clustered.levels[1].traffic_bytes
    assert saved == TILE_WORDS * FETCHES * SMS_USED // 2 * 2          # half of B's reads, 2 bytes a word


def test_without_clusters_in_the_arch_the_same_split_shares_nothing():
    """The same spatial y split on an L2 without `block_clusters` is no cluster: a100's rule,
    every CTA fetching its own copy, holds wherever the preset does not declare clusters."""
    assert load_arch("a100").levels[1].clusters is None
    assert H100.levels[1].shared_axes(GEMM.tensors[2]) == (False, True)
    assert H100.levels[1].shared_axes(GEMM.tensors[0]) == (False, False)


@pytest.mark.parametrize("ctas, clusters", [(1, 132), (2, 66), (3, 42), (4, 32), (8, 16), (16, 8), (17, 0)])
def test_the_part_runs_whole_clusters_per_gpc(ctas, clusters):
    """H100's GPCs (2 of 18 SMs, 6 of 16, an estimate): a cluster stays on one GPC, so the
    clusters at once are the sum over GPCs of its SMs // c; above 16 CTAs, none."""
    gpcs = H100.levels[1].clusters.gpc_sms
    assert int(H100.levels[1].clusters.schedulable(ctas)) == clusters
    assert clusters == (sum(sms // ctas for sms in gpcs) if ctas <= 16 else 0)
    assert H100.fits_fanout(1, clusters, ctas) == (clusters > 0)
    assert not H100.fits_fanout(1, clusters + 1, ctas)


def test_the_mapspace_prunes_cluster_shapes_the_part_cannot_schedule():
    space = Mapspace(H100, GEMM, CLUSTERS)
    factors = np.ones((4, 3, 3, 3), np.int64)
    factors[1, 1, 0], factors[1, 2, 0] = [16, 17, 33], [8, 8, 4]          # 16 x 8, 17 x 8, 33 x 4
    assert pruning.fanout_mask(space, factors).tolist() == [True, False, False]


def test_a_mapping_file_with_too_many_clusters_is_refused_with_one_line():
    data = h100_mapping({"m": 8}, m_side=32, n_side=4)
    data[1]["spatial"] = [{"dim": "m", "bound": 17, "axis": "x"}, {"dim": "n", "bound": 8, "axis": "y"}]
    with pytest.raises(SpecError) as info:
        mapping_from_checked_dict(data, H100, load_workload("gemm-4096"), Where("m.yaml"))
    message = str(info.value)
    assert "m.yaml" in message and "spatial" in message and "at most 16 clusters of 8" in message
    data[1]["spatial"] = [{"dim": "n", "bound": 32, "axis": "y"}]
    with pytest.raises(SpecError, match="above the 16 CTAs in a block cluster"):
        mapping_from_checked_dict(data, H100, GEMM, Where("m.yaml"))


@pytest.mark.parametrize("clusters, fragment", [
    ({"max_ctas": 4, "gpc_sms": [2, 1]}, "levels[0].block_clusters.gpc_sms: the GPCs hold 3 SMs"),
    ({"max_ctas": 0, "gpc_sms": [4]}, "levels[0].block_clusters.max_ctas"),
    ({"max_ctas": 2, "gpc_sms": []}, "levels[0].block_clusters.gpc_sms: expected a list"),
    ({"max_ctas": 2}, "levels[0].block_clusters.gpc_sms: required key"),
    ({"max_ctas": 4, "gpc_sms": [4], "dsmem": {"bandwidth": "unlimited", "latency": 1, "energy_per_byte": 1}},
     "levels[0].block_clusters.dsmem.bandwidth: expected a finite bandwidth"),
    ({"max_ctas": 4, "gpc_sms": [4], "dsmem": {"bandwidth": "8 B/cycle", "latency": 1}},
     "levels[0].block_clusters.dsmem.energy_per_byte: required key"),
    ({"max_ctas": 4, "gpc_sms": [4], "dsmem": {"bandwidth": "8 B/cycle", "latency": 1, "energy_per_byte": "x"}},
     "levels[0].block_clusters.dsmem.energy_per_byte"),
])
def test_bad_block_clusters_name_their_key(clusters, fragment):
    data = {"name": "c", "clock": "1 GHz", "compute": {"instances": 4},
            "levels": [{"name": "L2", "block_clusters": clusters}, {"name": "SMEM", "instances": 4}]}
    with pytest.raises(SpecError, match=re.escape(fragment)):
        arch_from_dict(data, Where("a.yaml"))


def test_block_clusters_on_a_fanout_along_y_are_refused():
    data = {"name": "c", "clock": "1 GHz", "compute": {"mesh": [2, 2]},
            "levels": [{"name": "L2", "block_clusters": {"max_ctas": 2, "gpc_sms": [2]}},
                       {"name": "SMEM", "mesh": [2, 2]}]}
    with pytest.raises(SpecError, match="fanning out along mesh x only"):
        arch_from_dict(data, Where("a.yaml"))


@quick_and_full(40, 400, problems(clusters=True))
def test_both_cost_paths_and_the_simulator_agree_under_clusters(problem):
    """Random architectures some of whose fanouts carry clusters (with and without multicast
    across them), sliding windows included: the scalar and vectorised paths agree, and with
    the loop nest executed literally (`brute_force.py`: only the CTAs of a cluster share)."""
    arch, workload, mapping = problem
    costs = evaluate_many(arch, workload, to_table([mapping], len(workload.dims), len(workload.tensors)))
    assert_same(arch, workload, mapping, costs)
    truth = simulate(*as_plain(arch, workload, mapping))
    for level in evaluate(arch, workload, mapping).levels:
        for name, cost in level.tensors.items():
            want = truth["levels"][level.name]["tensors"][name]
            assert (cost.reads, cost.fills, cost.updates) == (want["reads"], want["fills"], want["updates"])


@quick_and_full(3, 30, st.data())
def test_joint_equals_exhaustive_with_clusters(data):
    """The search's bounds stay below every mapping where a fanout multicasts only within its
    clusters: the joint search proves what exhaustive search finds."""
    workload = data.draw(workloads(kinds=("gemm", "conv1d", "batched"), max_macs=32))
    arch = data.draw(archs(min_levels=3, max_levels=4, clusters=True))
    space = Mapspace(arch, workload, Constraints(levels=BYPASS_EVERYWHERE, clusters=True))
    if counting.funnel(space).after["divisibility"] > 200_000:
        return
    objective = parse_objective(data.draw(st.sampled_from(["edp", "energy", "cycles"])), arch)
    exact = Exhaustive().run(space, objective)
    result = Joint(parallel_above=0).run(space, objective)
    assert result.optimal and result.score == exact.score and result.mapping == exact.mapping


@quick_and_full(4, 30, st.data())
def test_every_node_bound_is_below_every_mapping_under_it_with_clusters(data):
    workload = data.draw(workloads(kinds=("gemm", "conv1d", "batched"), max_macs=64))
    arch = data.draw(archs(min_levels=3, max_levels=4, clusters=True, gpu=data.draw(st.booleans())))
    space = Mapspace(arch, workload, Constraints(levels=BYPASS_EVERYWHERE, clusters=True))
    objective = parse_objective(data.draw(st.sampled_from(["edp", "energy", "cycles"])), arch)
    check_prefix_bounds(space, objective, data.draw(st.integers(0, 1000)))


def test_cutlass_and_triton_carry_the_cluster():
    """The cluster shape in CUTLASS's ClusterShape and profiler flags; in Triton one program
    spans the cluster's CTAs (num_ctas), its block the cluster's tile."""
    mapping = mapping_from_checked_dict(h100_mapping({"m": 2}), H100, GEMM, Where("<test>"))
    view = gemm_view(H100, GEMM, mapping)
    assert view.cluster == (2, 1, 1)
    assert cutlass_shape(view).cluster == (2, 1, 1)
    text = cutlass_text(view)
    assert "using ClusterShape = cute::Shape<cute::_2, cute::_1, cute::_1>;" in text
    assert "--cluster_m=2" in text and "B multicast to the 2 CTAs along m" in text
    config = triton_config(view)
    assert (config.block_m, config.block_n, config.num_ctas) == (256, 128, 2)
    assert config.group_m == 16                          # 32 rows of CTAs, 16 of programs
    assert "num_ctas=2)" in config.kwargs_text()
    plain = gemm_view(H100, GEMM, mapping_from_checked_dict(h100_mapping({}), H100, GEMM, Where("<test>")))
    assert plain.cluster == (1, 1, 1)
    plain_text = kernel_text([plain])           # no num_ctas in its config; the launch passes the config's
    assert "CLUSTER = (1, 1, 1)" in plain_text and "num_ctas=" not in plain_text.split("CONFIGS = [")[1].split("]")[0]
    assert "CLUSTER = (2, 1, 1)" in kernel_text([view])
    assert "cluster 1x1x1: the mapping shares nothing" in cutlass_text(plain)


@pytest.mark.triton
def test_the_cluster_kernel_runs_in_the_triton_interpreter(tmp_path, monkeypatch):
    """The emitted kernel with num_ctas=2 computes the matmul (the interpreter runs one program
    per cluster tile; the launch takes num_ctas)."""
    from test_emit_triton import load_kernel, run_checked
    pytest.importorskip("triton")
    pytest.importorskip("torch")
    import test_emit_triton
    test_emit_triton.torch = __import__("torch")
    mapping = mapping_from_checked_dict(h100_mapping({"m": 2}), H100, GEMM, Where("<test>"))
    module = load_kernel(kernel_text([gemm_view(H100, GEMM, mapping)], ["relu"]), tmp_path, monkeypatch)
    assert module.CONFIGS[0].num_ctas == 2
    run_checked(module, (300, 140, 70), ["relu"])


def test_schedulable_counts_are_whole_clusters():
    """The count is an array rule too (the mapspace's masks): each entry as the scalar."""
    clusters = H100.levels[1].clusters
    sizes = np.arange(1, 20)
    assert clusters.schedulable(sizes).tolist() == [int(clusters.schedulable(int(c))) for c in sizes]
    assert math.prod(H100.fanout(1)) == 132 * 16 and H100.fanout_units(1) == 132


def test_a_cluster_over_a_dim_every_input_depends_on_prices_as_the_same_split_over_clusters():
    """Why the mapspace leaves a cluster split over k out: moved from the cluster (y) to the
    clusters side by side (x), the mapping prices the same to the last count."""
    def with_k(axis):
        data = h100_mapping({}, m_side=16)          # 64 CTAs, twice over for two halves of k
        data[0]["loops"].append({"dim": "m", "bound": 2})
        data[1]["loops"] = [{"dim": "k", "bound": 32}]
        data[1]["spatial"].append({"dim": "k", "bound": 2, "axis": axis})
        return mapping_from_checked_dict(data, H100, GEMM, Where("<test>"))
    in_cluster, side_by_side = evaluate(H100, GEMM, with_k("y")), evaluate(H100, GEMM, with_k("x"))
    assert in_cluster == side_by_side
    k_rows = Mapspace(H100, GEMM, CLUSTERS).dim_tables[2]
    l2_y = Mapspace(H100, GEMM, CLUSTERS).slots.index((1, 2))
    assert (k_rows[:, l2_y] == 1).all()
    assert (Mapspace(H100, GEMM, CLUSTERS).dim_tables[0][:, l2_y] > 1).any()       # m may be split over a cluster


def test_leaving_out_clusters_over_k_keeps_the_optimum(monkeypatch):
    """On a small GPU-like space, the exhaustive optimum with and without the cluster rule."""
    arch = arch_from_dict({"name": "c", "clock": "1 GHz", "compute": {"instances": 6},
                           "levels": [{"name": "L2", "multicast": False, "spatial_reduction": False,
                                       "block_clusters": {"max_ctas": 4, "gpc_sms": [4, 2]},
                                       "energy": {"read": 2.0}, "bandwidth": 4},
                                      {"name": "SMEM", "instances": 6, "capacity": "64 B", "max_stages": 2,
                                       "energy": {"read": 0.5, "write": 0.5}}]}, Where("<test>"))
    small = workload_from_dict({"name": "g", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                                "sizes": {"m": 4, "n": 6, "k": 4}, "dtype": 16}, Where("<test>"))
    objective = parse_objective("edp", arch)
    pruned_space = Mapspace(arch, small, CLUSTERS)
    pruned = Exhaustive().run(pruned_space, objective)
    monkeypatch.setattr(tables, "cluster_mask", lambda space, d, rows: np.ones(len(rows), bool))
    whole_space = Mapspace(arch, small, CLUSTERS)
    whole = Exhaustive().run(whole_space, objective)
    assert counting.funnel(pruned_space).after["capacity"] < counting.funnel(whole_space).after["capacity"]
    assert pruned.score == whole.score
    assert any(axis == 1 for _, _, axis in pruned.mapping.levels[0].spatial)      # the optimum is clustered


def test_a_cluster_splits_no_sliding_window_and_a_convolution_still_has_mappings():
    """A convolution's p, q, r, s stay off the cluster (its output channels k may take it: the
    CTAs along k share the input's tile); its space is not empty (the sampled funnel once said
    so when p and q took the cluster too)."""
    conv = load_workload("conv-resnet50-conv3")
    space = Mapspace(H100, conv, CLUSTERS)
    l2_y = space.slots.index((1, 2))
    for name in ("p", "q", "r", "s", "c"):
        assert (space.dim_tables[conv.dim_index(name)][:, l2_y] == 1).all(), name
    assert (space.dim_tables[conv.dim_index("k")][:, l2_y] > 1).any()
    assert infeasible.require_nonempty(space).after["occupancy"] > 0


def test_a_cluster_above_eight_ctas_is_said_to_be_non_portable():
    mapping = mapping_from_checked_dict(h100_mapping({"m": 4, "n": 4}), H100, GEMM, Where("<test>"))
    shape = cutlass_shape(gemm_view(H100, GEMM, mapping))
    assert shape.cluster == (4, 4, 1)
    assert any("NonPortableClusterSizeAllowed" in line for line in shape.changes)
    eight = cutlass_shape(gemm_view(H100, GEMM, mapping_from_checked_dict(h100_mapping({"m": 4, "n": 2}), H100,
                                                                          GEMM, Where("<test>"))))
    assert not any("NonPortable" in line for line in eight.changes)


def test_where_hbm_bounds_the_kernel_a_cluster_wins_nothing_measurable():
    """gemv-4096 (m = 1) is HBM-bound: a cluster of 16 CTAs along n multicasts the one row of A
    they share, which saves L2 reads of a 4,096-word vector and no cycle."""
    gemv = load_workload("gemv-4096")

    def priced_gemv(axis):
        data = [{"level": "HBM", "loops": [{"dim": "k", "bound": 2}], "keep": ["Z", "A", "B"]},
                {"level": "L2", "loops": [{"dim": "k", "bound": 8}], "keep": ["Z", "A", "B"], "stages": 2,
                 "spatial": [{"dim": "k", "bound": 2, "axis": "x"}, {"dim": "n", "bound": 16, "axis": axis}]},
                {"level": "SMEM", "loops": [{"dim": "k", "bound": 4}], "keep": ["Z", "A", "B"], "stages": 2},
                {"level": "RF", "loops": [{"dim": "n", "bound": 256}, {"dim": "k", "bound": 32}],
                 "keep": ["Z", "A", "B"], "stages": 2}]
        return evaluate(H100, gemv, mapping_from_checked_dict(data, H100, gemv, Where("<test>")))
    plain, clustered = priced_gemv("x"), priced_gemv("y")
    assert plain.bottleneck == clustered.bottleneck == "HBM" and plain.cycles == clustered.cycles
    saved = plain.levels[1].tensors["A"].reads - clustered.levels[1].tensors["A"].reads
    assert saved == plain.levels[1].tensors["A"].reads * 15 // 16
    assert 0 < plain.edp - clustered.edp < 1e-4 * plain.edp


@pytest.mark.skipif(__import__("shutil").which("iree-opt") is None, reason="iree-opt not found (the test extra)")
def test_the_cluster_mapping_tiles_the_same_in_mlir(tmp_path):
    """MLIR has no clusters: a cluster's CTAs are blocks like the others, so the emitted loop
    nest is the 1 x 1 mapping's, and iree-opt applies it."""
    from mapper.emit.mlir import mlir_text
    from test_emit_mlir import apply, loops_around
    nests = []
    for cluster in ({}, {"m": 2}):
        mapping = mapping_from_checked_dict(h100_mapping(cluster), H100, GEMM, Where("<test>"))
        text, _ = mlir_text(H100, GEMM, mapping, [])
        [contraction] = loops_around(apply(tmp_path, text), "mapper.contraction")
        nests.append(contraction)
    assert nests[0] == nests[1] and ("forall", (128, 128)) in nests[0]


# ----------------------------------------------------------------------------- opt-in

def test_clusters_are_in_a_space_only_where_its_mapspace_asks():
    """Without `clusters: true` the space's arch has no block clusters: no cluster slot, the
    fanout of the SMs alone (every default result is the arch's without clusters); the preset
    `clusters` mapspace is the default one with them."""
    from mapper.load import load_constraints
    from mapper.mapspace.common import SPATIAL_Y
    default, clustered = Mapspace(H100, GEMM), Mapspace(H100, GEMM, load_constraints("clusters"))
    assert not default.arch.has_clusters and clustered.arch.has_clusters
    assert (1, SPATIAL_Y) not in default.slots and (1, SPATIAL_Y) in clustered.slots
    assert default.arch.fanout(1) == (132, 1) and clustered.arch.fanout(1) == (132, 16)
    preset = load_constraints("clusters")
    assert preset.clusters and preset == replace(load_constraints("default"), name="clusters",
                                                 description=preset.description, clusters=True)


@pytest.mark.parametrize("value", ["yes", 1])
def test_a_clusters_key_that_is_no_boolean_names_it(value):
    from mapper.load import constraints_from_dict
    with pytest.raises(SpecError, match=re.escape("c.yaml: clusters: expected true")):
        constraints_from_dict({"name": "c", "clusters": value}, Where("c.yaml"))


def test_a_warm_start_with_a_cluster_needs_the_clusters_mapspace(tmp_path, capsys):
    """A mapping file that splits over a cluster starts no search of a space without clusters:
    one line naming the file and `--mapspace clusters`; with it, the search runs."""
    import yaml
    from mapper.cli import main
    path = tmp_path / "clustered.yaml"
    path.write_text(yaml.safe_dump({"arch": H100_SYNC, "workload": "gemm-4096", "mapping": h100_mapping({"m": 2})}))
    args = ["search", H100_SYNC, "gemm-4096", "--warm-start", str(path), "--max-evaluations", "2000", "--json"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert str(path) in err and "use --mapspace clusters" in err and len(err.splitlines()) == 1
    assert main(args + ["--mapspace", "clusters"]) == 0
    assert json.loads(capsys.readouterr().out)["kernel"]["cluster"]["m"] >= 1


def test_the_report_says_there_is_no_cluster_under_the_default_mapspace(capsys):
    from mapper.cli import main
    assert main(["search", "h100", "gemm-1024", "--max-evaluations", "2000"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("thread-block cluster"))
    assert line.startswith("thread-block cluster 1x1x1 CTAs (m x n x k): no multicast")
    # the wgmma the mapping issues: m64, k16, n its warpgroup's tile (64 here)
    assert "--mapspace clusters" in line and line.endswith("MMA shape m64n64k16")

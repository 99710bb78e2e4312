"""The bounds over the spatial splits (`bounds.split_floor`, `bounds.split_chain`): the words
every instance together must receive under a split, against a brute-force count of each
instance's region, and the time of every level at once under the splits, against the cycles
of sampled mappings; and where it binds (a 7-dim convolution on h100)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from mapper import evaluate_many, load_arch, load_workload
from mapper.load import load_constraints
from mapper.mapspace import Mapspace, pruning, sampling
from mapper.search.bounds import LinkBounds
from mapper.search.bounds.grid import LinkCost
from mapper.search.bounds.node import least_macs
from mapper.search.bounds.split_floor import split_traffic
from presets_sync import H100_SYNC

from prefixes import prefix_nodes


def _pieces(size: int, count: int) -> list[range]:
    """`size` cut into `count` consecutive non-empty pieces, as a tiled loop cuts it (the last shorter)."""
    tile = -(-size // count)
    return [range(start, min(size, start + tile)) for start in range(0, size, tile)]


@pytest.mark.parametrize("einsum, sizes", [
    ("O[k,p] += I[c,p+r] * W[k,c,r]", {"k": 4, "c": 3, "p": 7, "r": 3}),
    ("O[k,p] += I[c,2*p+r] * W[k,c,r]", {"k": 2, "c": 2, "p": 5, "r": 3}),
    ("O[k,p] += I[c,2*p] * W[k,c]", {"k": 3, "c": 2, "p": 6}),
    ("Z[m,n] += A[m,k] * B[k,n]", {"m": 6, "n": 4, "k": 5}),
])
def test_split_words_are_below_a_brute_force_count_of_every_instance(einsum, sizes):
    """Under every split, each tensor's words summed over the instances' regions (counted one
    iteration point at a time) are at least what `split_traffic` charges, and equal to it
    where the regions tile their dims and windows have unit stride (the closed form is exact)."""
    workload = load_workload({"name": "w", "einsum": einsum, "sizes": sizes, "dtype": "int8"})
    space = Mapspace(load_arch("pe-array"), workload, load_constraints("default"))
    dims = workload.dims
    for split in itertools.product(*[range(1, s + 1) for s in workload.sizes]):
        if any(len(_pieces(s, c)) != c for s, c in zip(workload.sizes, split)):
            continue            # a count no tile of the dim gives
        for t, tensor in enumerate(workload.tensors):
            counted = 0
            for region in itertools.product(*[_pieces(s, c) for s, c in zip(workload.sizes, split)]):
                words = {tuple(sum(coef * point[d] for d, coef in axis) for axis in tensor.axes)
                         for point in itertools.product(*region)}
                counted += len(words)
            charged = split_traffic(space, 1, {t: LinkCost(1.0, ())}, np.array(split)[:, None], read_backs=False)[0]
            assert charged <= counted, (dims, split, tensor.name)
            strided = any(coef > 1 for axis in tensor.axes for _, coef in axis)
            if not strided:
                assert charged == counted, (dims, split, tensor.name)


def _chain_check(arch_name, workload, draws):
    space = Mapspace(load_arch(arch_name), load_workload(workload), load_constraints("default"))
    links = LinkBounds(space)
    chain = links.chain(least_macs(space))
    assert chain is not None
    sample = sampling.sample(space, draws, np.random.default_rng(5))
    assert len(sample) > 100
    cycles = evaluate_many(space.arch, space.workload, sample).cycles
    bound = chain.of_table(space.n_levels, sample.factors)
    assert (bound <= cycles * (1 + 1e-9)).all()
    return chain, bound, cycles


@pytest.mark.parametrize("arch, workload, draws", [("h100", "conv-resnet50-conv1", 40_000), ("h100", "gemm-512", 3_000),
                                                   ("h100", "attention-qk", 20_000), ("tpu", "conv-resnet50-conv3", 40_000)])
def test_the_chain_is_below_the_cycles_of_every_sampled_mapping(arch, workload, draws):
    """Every mapping's cycles are at least the chain's bound under its own splits (h100's two
    fanouts on a strided 7-dim convolution with a fused role, attention's batch dim, a GEMM;
    a systolic array)."""
    _chain_check(arch, workload, draws)


def test_the_chain_lifts_a_convolution_above_its_memory_floor():
    """ResNet-50 conv3 on h100: alone, HBM's compulsory bytes and latency bound its cycles at
    about 1,238; the splits that keep the SMs busy load L2 with every SM's copy and those that
    spare L2 load each SM's shared memory, so no split does better than about 1,370."""
    space = Mapspace(load_arch(H100_SYNC), load_workload("conv-resnet50-conv3"), load_constraints("default"))
    assert LinkBounds(space).chain(least_macs(space)).cycles.min() >= 1_350


# ResNet-50's res4a-reduce: a strided 1x1 convolution whose nodes often leave their innermost
# tile less of the fused M role (n.p.q) than one fragment (`least_macs` per node)
STRIDED_1X1 = {"name": "res4a-reduce", "einsum": "O[n,k,p,q] += I[n,c,2*p,2*q] * W[k,c]",
               "sizes": {"n": 1, "k": 256, "c": 512, "p": 14, "q": 14}, "dtype": "bf16", "dtypes": {"O": "fp32"}}


@pytest.mark.parametrize("arch, workload, draws", [("h100", "conv-resnet50-conv1", 40_000), ("h100", "gemm-512", 3_000),
                                                   ("h100", STRIDED_1X1, 20_000), ("pe-array", "gemm-256", 3_000)])
def test_node_bounds_stay_below_every_mapping_under_them(arch, workload, draws):
    """At every depth, a node's bounds (energy, and cycles with the split chain under the
    splits the node has decided, the fetch requests and fragments it has fixed) stay at or
    below each mapping under it."""
    from mapper.search.bounds import lower_bounds
    from mapper.search.objective import parse_objective
    space = Mapspace(load_arch(arch), load_workload(workload), load_constraints("default"))
    links = LinkBounds(space)
    sample = sampling.sample(space, draws, np.random.default_rng(11))
    assert len(sample) > 20
    costs = evaluate_many(space.arch, space.workload, sample)
    objective = parse_objective("edp", space.arch)
    for depth, node, node_costs in prefix_nodes(space, sample):     # levels above as chosen, the rest at `depth`
        bounds = lower_bounds(space, objective, depth, node, node_costs, links)
        assert (bounds.energy <= costs.energy_pj * (1 + 1e-9)).all(), depth
        assert (bounds.cycles <= costs.cycles * (1 + 1e-9)).all(), depth


def test_the_chain_keeps_the_splits_of_the_innermost_level_among_its_units():
    """The fragments of a fused role are met by the innermost level's tile, its own split
    among the compute units included (`pruning.fragment_mask`): a conv1d's k = c.r of 2,
    with r split 2 ways from the innermost level to the units, is a valid mapping whose units
    each hold half a fragment. The chain once kept only the splits leaving the units a whole
    fragment, bounded that mapping's cycles infinite (found by the node-bound property test)."""
    from mapper.load import arch_from_dict, workload_from_dict
    from mapper.mapping import LevelMapping, Mapping, to_table
    from mapper.search.bounds.node import lower_bounds
    from mapper.search.objective import parse_objective
    from mapper.units import Where
    level = {"bandwidth": "unlimited", "energy": {"read": 1, "write": 1, "update": 1}}
    arch = arch_from_dict({"name": "a", "clock": "1 GHz", "levels": [
        {"name": "L0", "mesh": [1, 1], "instances": 1, **level},
        {"name": "L1", "mesh": [1, 1], "instances": 1, **level},
        {"name": "L2", "mesh": [1, 1], "instances": 1, **level}],
        "compute": {"mesh": [1, 2], "instances": 2, "energy": 1.0,
                    "native_shape": {"m": 2, "n": 1, "k": 2}}}, Where("<test>"))
    workload = workload_from_dict({"name": "c", "einsum": "O[k,p] += I[c,p+r] * W[k,c,r]",
                                   "sizes": {"k": 1, "c": 1, "p": 1, "r": 2}, "dtype": 8}, Where("<test>"))
    space = Mapspace(arch, workload)
    everything = frozenset(range(3))
    mapping = Mapping((LevelMapping(keep=everything), LevelMapping(keep=everything),
                       LevelMapping(spatial=((3, 2, 1),), keep=everything)))
    table = to_table([mapping], 4, 3)
    assert pruning.valid_mask(space, table).all()
    links = LinkBounds(space)
    costs = evaluate_many(arch, workload, table)
    bound = lower_bounds(space, parse_objective("cycles", arch), 3, table, costs, links)
    assert bound.cycles[0] <= costs.cycles[0]

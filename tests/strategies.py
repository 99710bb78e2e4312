"""Hypothesis strategies: small random workloads, architectures and mappings.

Sizes are tiny so that the brute-force simulator can execute every nest literally; the
shapes still cover what the cost model must get right: reuse, sliding windows (p+r, 2*p+r),
spatial multicast and reduction over both mesh axes, bypass, stages and finite bandwidths
(shared, read, write) under both cycle rules.
"""
from __future__ import annotations

import math

from hypothesis import strategies as st

from mapper.load import arch_from_dict, workload_from_dict
from mapper.mapping import LevelMapping, Mapping
from mapper.units import Where

SMALL_SIZES = st.sampled_from([1, 2, 3, 4, 6])

EINSUMS = {
    "gemm": ("Z[m,n] += A[m,k] * B[k,n]", "mnk"),
    "batched": ("Z[b,m,n] += A[b,m,k] * B[b,k,n]", "bmnk"),
    "conv1d": ("O[k,p] += I[c,p+r] * W[k,c,r]", "kcpr"),
    "conv1d-strided": ("O[k,p] += I[c,2*p+r] * W[k,c,r]", "kcpr"),
    "conv2d": ("O[k,p,q] += I[c,p+r,q+s] * W[k,c,r,s]", "kcpqrs"),
}


def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


@st.composite
def workloads(draw, kinds=tuple(EINSUMS), max_macs: int = 600, sizes=SMALL_SIZES):
    kind = draw(st.sampled_from(kinds))
    einsum, dims = EINSUMS[kind]
    sizes = {d: draw(sizes) for d in dims}
    while math.prod(sizes.values()) > max_macs:        # keep the brute force fast
        biggest = max(sizes, key=sizes.get)
        sizes[biggest] = max(1, sizes[biggest] // 2)
    bits = draw(st.sampled_from([8, 16]))
    return workload_from_dict({"name": kind, "einsum": einsum, "sizes": sizes, "dtype": bits,
                               "dtypes": {einsum[0]: 32}}, Where("<hypothesis>"))


@st.composite
def archs(draw, min_levels: int = 2, max_levels: int = 3, latency: bool = False, capacity: bool = False,
          native: bool = False, gpu: bool = False, clusters: bool = False):
    """Random architectures; with `latency`, levels may declare an access latency and a
    three-level one may be a GPU (its middle level per SM) with tight occupancy limits; with
    `capacity`, the levels below the first may hold only a few words (small enough that tiles
    and keep sets compete for them, on the small workloads the tests draw); with `native`, the
    compute units may have a native operation shape m x n x k of sizes 1 or 2, whose roles the
    workloads' dims play by name (GEMMs) or by their einsum's structure (convolutions: k = c.r,
    a role two dims share); with `gpu`, a GPU of three or more levels (the second per SM), whose
    ragged tails are masked (`tails.py`); with `clusters`, a level fanning out along x alone
    may carry block clusters (its children in GPCs of 1 to 4, clusters of up to 2 or 4)."""
    n_levels = draw(st.integers(min_levels, max_levels))
    mesh = [1, 1]
    levels = []
    energy = st.sampled_from([0.0, 0.5, 1.0, 4.0, 30.0])
    for i in range(n_levels):
        if i > 0:
            grow = [2, 4] if gpu and i == 1 else [1, 2, 4]      # a GPU's SMs: more than one
            mesh = [mesh[0] * draw(st.sampled_from(grow)), mesh[1] * draw(st.sampled_from([1, 2]))]
        levels.append({
            "name": f"L{i}", "mesh": list(mesh), "instances": mesh[0] * mesh[1],
            "block_size": draw(st.sampled_from([1, 2, 4])),
            "bandwidth": draw(st.sampled_from(["unlimited", 1, 4, 16])),
            "read_bandwidth": draw(st.sampled_from(["unlimited", "unlimited", 2, 8])),
            "write_bandwidth": draw(st.sampled_from(["unlimited", "unlimited", 1, 8])),
            "max_stages": draw(st.sampled_from([1, 2])),
            "energy": {"read": draw(energy), "write": draw(energy), "update": draw(energy)},
            "energy_per_byte": {"read": draw(energy)},
            "leak": draw(st.sampled_from([0.0, 0.01])),
            "multicast": draw(st.sampled_from([True, True, False])),
            "spatial_reduction": draw(st.sampled_from([True, True, False])),
            "cluster_size": draw(st.sampled_from([1, 1, 2, 4])),
        })
        word_bits = draw(st.sampled_from([None, None, 8, 32]))     # None: each tensor's own
        if word_bits is not None:
            levels[-1]["word_bits"] = word_bits
        if latency:
            levels[-1]["latency"] = draw(st.sampled_from([0, 3, 40, "25 ns"]))
        if capacity and i > 0:
            levels[-1]["capacity"] = draw(st.sampled_from(["unlimited", "8 B", "16 B", "32 B", "128 B"]))
    compute_mesh = [mesh[0] * draw(st.sampled_from([1, 2])), mesh[1] * draw(st.sampled_from([1, 2]))]
    for above, below in zip(levels, levels[1:]):
        children = below["mesh"][0] // above["mesh"][0]
        if clusters and children > 1 and below["mesh"][1] == above["mesh"][1] and draw(st.booleans()):
            gpcs = [min(4, children - 4 * g) for g in range(-(-children // 4))]
            above["block_clusters"] = {"max_ctas": draw(st.sampled_from([2, 4])), "gpc_sms": gpcs}
    data = {"name": "random", "clock": "1 GHz", "levels": levels,
            "compute": {"mesh": compute_mesh, "instances": compute_mesh[0] * compute_mesh[1],
                        "macs_per_cycle": draw(st.sampled_from([1, 2])), "energy": 1.0,
                        **({"native_shape": {r: draw(st.sampled_from([1, 2])) for r in "mnk"}}
                           if native and (gpu or draw(st.booleans())) else {})},
            "model": {"cycles": draw(st.sampled_from(["stage_aware", "timeloop"]))}}
    sms = levels[1]["instances"] if n_levels == 3 or gpu else 0
    if sms and sms != levels[0]["instances"] and (gpu or latency and draw(st.booleans())):
        data["gpu"] = {"sms": sms, "smem_per_sm": draw(st.sampled_from([64, 256, 4096])),
                       "registers_per_sm": draw(st.sampled_from([16, 64, 1024])),
                       "max_blocks_per_sm": draw(st.sampled_from([1, 2, 8]))}
    return arch_from_dict(data, Where("<hypothesis>"))


@st.composite
def mappings(draw, arch, workload, allow_bypass: bool = True):
    """A random valid mapping (capacity aside): prime factors of every dim scattered over
    (level, temporal / spatial x / spatial y) slots within each level's fanout."""
    n_levels, n_dims = len(arch.levels), len(workload.dims)
    factors = [[[1] * n_dims for _ in range(3)] for _ in range(n_levels)]
    room = [[arch.fanout(lv)[0], arch.fanout(lv)[1]] for lv in range(n_levels)]
    for d, size in enumerate(workload.sizes):
        for p in _prime_factors(size):
            slots = [(lv, 0) for lv in range(n_levels)]
            slots += [(lv, 1 + a) for lv in range(n_levels) for a in (0, 1) if room[lv][a] % p == 0]
            lv, s = draw(st.sampled_from(slots))
            factors[lv][s][d] *= p
            if s:
                room[lv][s - 1] //= p
    levels = []
    for lv in range(n_levels):
        order = draw(st.permutations(range(n_dims)))
        temporal = tuple((d, factors[lv][0][d]) for d in order if factors[lv][0][d] > 1)
        spatial = tuple((d, factors[lv][1 + a][d], a) for a in (0, 1) for d in range(n_dims)
                        if factors[lv][1 + a][d] > 1)
        all_tensors = frozenset(range(len(workload.tensors)))
        keep = all_tensors if lv == 0 or not allow_bypass else frozenset(
            t for t in all_tensors if draw(st.booleans()))
        stages = draw(st.integers(1, arch.levels[lv].max_stages))
        levels.append(LevelMapping(temporal, spatial, keep, stages))
    return Mapping(tuple(levels))


@st.composite
def problems(draw, kinds=tuple(EINSUMS), allow_bypass: bool = True, latency: bool = False,
             clusters: bool = False):
    workload = draw(workloads(kinds))
    arch = draw(archs(latency=latency, clusters=clusters))
    return arch, workload, draw(mappings(arch, workload, allow_bypass))


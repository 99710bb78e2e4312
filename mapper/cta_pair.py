"""Blackwell's CTA pair (tcgen05.mma `cta_group::2`) priced as one unit of two SMs.

One tcgen05.mma with `cta_group::2` runs on the Tensor Cores of the two SMs of a TPC, for M = 128
or 256 rows (PTX ISA, tcgen05 "CTA pair"): each CTA holds half of the A tile's rows and half of
the B tile's columns in its shared memory and its half of the accumulator (M/2 rows by N) in its
tensor memory; the pair loads each operand tile from L2 once, and each SM's Tensor Cores read the
other's half of B. So what one SM of the pair holds is exactly half of the pair's tiles, and what
the pair moves from L2 is what one unit with the pair's tile moves.

That is how it is priced: the architecture `paired` returns has every per-SM level (shared memory
and tensor memory) with twice the capacity, bandwidth, leakage and area and half the instances;
the compute unit with twice the MACs per cycle and an instruction twice as tall along m (native
m 128, at most 256); the GPU's facts per pair (its SMs halved, shared memory and tensor-memory
registers per "SM" doubled); and block clusters counted in pairs (a cluster of c pairs is 2c CTAs,
a GPC holds its TPCs' pairs). The one cost model then prices every mapping of it unchanged, and
a mapping's unit tile is the pair's (256 x N for the m256 instruction). A mapspace asks for it
with `cta_pairs: true` (`--mapspace cta-pairs`); an architecture allows it with `compute.cta_pair`.

Approximate: the pair's shared-memory reads are taken as evenly split between its two SMs (each
serves its halves of A and B), and its resident blocks are counted per pair (a pair's two CTAs
are always co-resident).
"""
from __future__ import annotations

import dataclasses

from .spec import Arch, Compute, Level

PAIR = 2        # SMs, and CTAs, per pair


def paired(arch: Arch) -> Arch:
    """`arch` with its units as CTA pairs (module docstring); itself when it is paired already.
    Raises ValueError where it cannot pair them (`unpairable` says why)."""
    if arch.paired:
        return arch
    problem = unpairable(arch)
    if problem is not None:
        raise ValueError(problem)
    smem = arch.per_sm_levels()[0]
    levels = tuple(_cluster_pairs(level) if lv < smem else _level_pair(level) for lv, level in enumerate(arch.levels))
    gpu = arch.gpu          # per pair; a pair-block takes one CTA slot on each SM
    gpu = dataclasses.replace(gpu, sms=gpu.sms // PAIR, smem_per_sm=gpu.smem_per_sm * PAIR,
                              registers_per_sm=gpu.registers_per_sm * PAIR,
                              max_threads_per_sm=gpu.max_threads_per_sm * PAIR)
    return dataclasses.replace(arch, levels=levels, compute=_compute_pair(arch.compute), gpu=gpu, paired=True)


def unpairable(arch: Arch) -> str | None:
    """Why `arch`'s units cannot run as CTA pairs (None where they can): the arch allows no pairs
    (`compute.cta_pair`), or its shape does not (`pair_problem`: an architecture `--vary` may
    change it after the loader checked it)."""
    if not arch.compute.cta_pair:
        return (f"architecture {arch.name} has no CTA pairs (Blackwell's tcgen05 cta_group::2, "
                "`compute: cta_pair: true`, as b200)")
    return pair_problem(arch)


def pair_problem(arch: Arch) -> str | None:
    """Why `arch` cannot pair its units (None where it can): a shared-memory level, everything
    below it and the compute unit one instance per SM along mesh x, an even number of SMs, and
    a native shape with an m (the pair doubles it)."""
    found = arch.per_sm_levels()
    if found is None:
        return "CTA pairs need a GPU: a `gpu:` section and a level with one instance per SM"
    meshes = [level.mesh for level in arch.levels[found[0]:]] + [arch.compute.mesh]
    if any(mesh != (arch.gpu.sms, 1) for mesh in meshes):
        return (f"CTA pairs merge two SMs: shared memory, every level below it and the compute unit must each "
                f"have mesh [{arch.gpu.sms}, 1] (one instance per SM)")
    if arch.gpu.sms % PAIR:
        return f"CTA pairs need an even number of SMs, not {arch.gpu.sms}"
    if "m" not in dict(arch.compute.native_shape):
        return "CTA pairs double the instruction's m: `native_shape` must give one"
    return None


def _halved_mesh(mesh: tuple[int, int]) -> tuple[int, int]:
    return mesh[0] // PAIR, mesh[1]


def _level_pair(level: Level) -> Level:
    """One per-SM level of the pair: both SMs' instances as one."""
    doubled = {name: getattr(level, name) * PAIR
               for name in ("capacity", "bandwidth", "read_bandwidth", "write_bandwidth", "leak")}
    return dataclasses.replace(level, **doubled, mesh=_halved_mesh(level.mesh), **_pair_area(level))


def _cluster_pairs(level: Level) -> Level:
    """A level above the SMs: its block clusters counted in pairs (a GPC's SMs pair by TPC), the
    distributed shared memory's bandwidth per pair."""
    if level.clusters is None:
        return level
    dsmem = level.clusters.dsmem
    clusters = dataclasses.replace(level.clusters, max_ctas=level.clusters.max_ctas // PAIR,
                                   gpc_sms=tuple(sms // PAIR for sms in level.clusters.gpc_sms),
                                   dsmem=dsmem and dataclasses.replace(dsmem, bandwidth=dsmem.bandwidth * PAIR))
    return dataclasses.replace(level, clusters=clusters)


def _taller(shape: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    """An instruction shape with twice the m."""
    return tuple((role, size * PAIR if role == "m" else size) for role, size in shape)


def _compute_pair(compute: Compute) -> Compute:
    most = dict(compute.max_shape)
    most["m"] = most.get("m", dict(compute.native_shape)["m"])
    per_dtype = tuple(dataclasses.replace(
        rate, macs_per_cycle=None if rate.macs_per_cycle is None else rate.macs_per_cycle * PAIR,
        native_shape=None if rate.native_shape is None else _taller(rate.native_shape)) for rate in compute.per_dtype)
    return dataclasses.replace(compute, mesh=_halved_mesh(compute.mesh), macs_per_cycle=compute.macs_per_cycle * PAIR,
                               native_shape=_taller(compute.native_shape), max_shape=_taller(tuple(most.items())),
                               per_dtype=per_dtype, warps=compute.warps * PAIR, **_pair_area(compute))


def _pair_area(part) -> dict:
    """A level's or unit's area fields for two SMs' worth."""
    if part.area is None:
        return {}
    return dict(area=part.area * PAIR, area_source=f"{part.area_source} x {PAIR} (a CTA pair's two SMs)")

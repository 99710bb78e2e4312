"""A kernel config read back into a mapping: Triton's five numbers (BLOCK_M/N/K, num_stages,
num_warps, and GROUP_M) as the GEMM mapping they run, so the model can price the config an
autotuner picked (`mapper evaluate ARCH WORKLOAD --from-triton CONFIG`).

The mapping of a config on a GPU preset (levels outermost first, the per-SM one SMEM), as the
launch runs it (checked against 1,712 timed configs on an H200, docs/gpu/h200-2026-12-04):
- the outermost level loops over the batch dims, then the waves' m and n loops (m outside:
  the grouped launch order walks n inside m), then the K loop: a wave's blocks run their K
  loops side by side, so the caches between hold one k step of the wave's operand tiles and
  stream the next (two stages), not the wave's whole K;
- the level above SMEM splits a wave's blocks over the SMs: GROUP_M rows of blocks by as many
  columns as the SMs take; without GROUP_M, row-major: whole rows of blocks while they fit,
  else a part of one row. The grid is padded to whole waves (the last wave's idle SMs priced
  as busy);
- SMEM holds the operands' block tiles with num_stages stages (the accumulator lives in
  registers) and splits it over the warps (warps_m x warps_n, as square a warp tile as the
  block allows unless the config says warps_m); on a warpgroup MMA (wgmma) the warpgroups of a
  block share the SM's tensor cores and hold its accumulator together: one unit with the
  whole tile;
- the register level holds a warp's tile: BLOCK_M / warps_m x BLOCK_N / warps_n x BLOCK_K (on
  wgmma the accumulator alone, one copy: Triton reads both operands from shared memory).
Extents are padded to whole blocks (masked tails). A config whose fp32 accumulator takes more
than ACCUMULATOR_REGISTERS registers a thread is refused: Triton spills it, which the model
cannot price.
Invariant: `emit` of the result gives the config back (tests/test_emit_roundtrip.py), the warps on
a warpgroup MMA as the fewest whole warpgroups that hold the accumulator.
"""
from __future__ import annotations

import math
from dataclasses import replace

from types import MappingProxyType

from ..bind import check_fits
from ..errors import SpecError
from ..limits import MAX_INT, MAX_STAGES, MAX_WARPS
from ..mapping import LevelMapping, Mapping
from ..spec import Arch, Workload
from ..units import Where
from ..validate import fields, integer
from .common import BlockConfig, EmitError, gemm_dims, source
from .triton import ACCUMULATOR_REGISTERS, accumulator_registers, accumulator_warps

KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps")
OPTIONAL = ("GROUP_M", "warps_m", "num_ctas")
# A thread block holds at most 1,024 threads (CUDA's limit): MAX_WARPS warps of 32; more stages
# than a level takes are priced with its most (`mapping_of_config`): the loader's stage limit;
# a cluster at most MAX_WARPS CTAs (the arch's `max_ctas` decides, `mapping_of_config`)
LIMITS = MappingProxyType({"num_warps": MAX_WARPS, "warps_m": MAX_WARPS, "num_stages": MAX_STAGES,
                           "num_ctas": MAX_WARPS})


def config_from_dict(data, where: Where) -> BlockConfig:
    """A config from its YAML/JSON form: the keys of `triton.Config` (BLOCK_M, BLOCK_N,
    BLOCK_K, num_stages, num_warps; GROUP_M, warps_m and num_ctas optional), positive integers."""
    if isinstance(data, dict) and "kwargs" in data and isinstance(data["kwargs"], dict):
        data = {**data["kwargs"], **{k: v for k, v in data.items() if k != "kwargs"}}
    fields(data, where, KEYS, OPTIONAL)
    values = {}
    for key in KEYS + OPTIONAL:
        if key not in data or (key in OPTIONAL and data[key] is None):
            continue
        values[key] = integer(data[key], where / key, "a positive integer", high=LIMITS.get(key, MAX_INT))
    return BlockConfig(values["BLOCK_M"], values["BLOCK_N"], values["BLOCK_K"], values["num_stages"],
                       values["num_warps"], values.get("GROUP_M"), values.get("warps_m"), values.get("num_ctas", 1))


def warp_split(config: BlockConfig) -> tuple[int, int]:
    """(warps along m, along n): the config's warps_m, else the split giving the squarest warp
    tile that divides the block (ties: more warps along m)."""
    warps = config.num_warps
    if config.warps_m:
        if warps % config.warps_m:
            raise EmitError(f"warps_m {config.warps_m} does not divide num_warps {warps}")
        return config.warps_m, warps // config.warps_m
    split = squarest_split(config.block_m, config.block_n, warps)
    if split is None:
        raise EmitError(f"num_warps {warps} does not split the block {config.block_m}x{config.block_n}")
    return split


def squarest_split(block_m: int, block_n: int, count: int) -> tuple[int, int] | None:
    """(along m, along n) of `count` parts (warps, a cluster's CTAs) over a block_m x block_n
    block: the split dividing it into the squarest tiles (ties: more along m); None where none
    divides it."""
    splits = [(a, count // a) for a in range(1, count + 1) if count % a == 0
              and block_m % a == 0 and block_n % (count // a) == 0]
    return min(splits, key=lambda s: (abs(math.log(block_m / s[0]) - math.log(block_n / s[1])), -s[0]), default=None)


def _on_cores(wm: int, wn: int, cores: int) -> tuple[int, int]:
    """(warps along m, along n) side by side on the `cores` tensor cores of an SM: the most
    that divide the warp split."""
    return max(((a, b) for a in range(1, wm + 1) if wm % a == 0 for b in range(1, wn + 1)
                if wn % b == 0 and a * b <= cores), key=lambda s: (s[0] * s[1], s[0]))


def mapping_of_config(arch: Arch, workload: Workload, config: BlockConfig,
                      where: Where = Where("triton config")) -> tuple[Mapping, tuple[str, ...]]:
    """(the mapping `config` runs on `arch`, lines on what was adjusted to fit the arch); a
    config whose blocks fit in no way is refused at `where` (the config's file)."""
    arch = arch.for_workload(workload)          # the levels' role keeps, for this workload's tensors
    levels = arch.per_sm_levels()
    if levels is None:
        raise EmitError(f"{source(arch)}: architecture {arch.name} is no GPU: a Triton config needs thread blocks")
    smem, rf = levels
    (m, n, k), batch = gemm_dims(arch, workload)
    changes = []
    config, cluster, fanout = _cluster_of(arch, config, smem, where, changes)
    # a block longer than its dim is masked down to the dim: its tile is the dim (no padding)
    clamped = {f: min(getattr(config, f), workload.sizes[d]) for f, d in (("block_m", m), ("block_n", n), ("block_k", k))}
    for f, d in (("block_m", m), ("block_n", n), ("block_k", k)):
        if clamped[f] != getattr(config, f):
            changes.append(f"{f.upper()} {getattr(config, f)} covers all of {workload.dims[d]} = {workload.sizes[d]}: "
                           f"the mapping's tile is {clamped[f]} (the kernel masks the rest)")
    config = replace(config, **clamped)
    # a program's block: its CTA's times the cluster's CTAs along m and n
    block = {m: config.block_m * cluster[0], n: config.block_n * cluster[1], k: config.block_k}
    blocks = {d: -(-workload.sizes[d] // block[d]) for d in (m, n, k)}
    # a wave: the blocks the SMs run at once, GROUP_M rows of them (the grouped launch order) by
    # as many columns as the SMs take; without GROUP_M, row-major: whole rows of blocks while
    # they fit, else a part of one row. The grid is padded to whole waves: the last, partial
    # wave of the launch takes as long as a whole one
    if config.group_m:
        rows = min(config.group_m, blocks[m], fanout)
        cols = min(blocks[n], fanout // rows)
    else:
        cols = min(blocks[n], fanout)
        rows = min(blocks[m], fanout // cols) if cols == blocks[n] else 1
    padded = {m: -(-blocks[m] // rows) * rows, n: -(-blocks[n] // cols) * cols}
    if padded[m] != blocks[m] or padded[n] != blocks[n]:
        changes.append(f"waves of {rows}x{cols} blocks: the grid's {blocks[m]}x{blocks[n]} blocks priced as "
                       f"{padded[m]}x{padded[n]} (the last wave's idle SMs as busy)")
    blocks = {**blocks, **padded}
    # the block's compute units: its warps, or on a unit issued by several (a wgmma warpgroup
    # of 4) its groups of them
    units = config.num_warps // arch.compute.warps
    if units < 1 or config.num_warps % arch.compute.warps:
        units = max(1, units)
        changes.append(f"num_warps {config.num_warps}: {arch.compute.name} is issued by {arch.compute.warps} warps: "
                       f"priced as {units} of them")
    if arch.compute.warps > 1 and units > 1:
        # the warpgroups of one block share the SM's tensor cores and hold the block's
        # accumulator together (CUTLASS's cooperative kernels): one unit with the whole tile,
        # not units taking turns on halves of it
        changes.append(f"num_warps {config.num_warps}: its {units} groups of {arch.compute.warps} warps "
                       f"({arch.compute.name}) hold the block's accumulator together on the SM's tensor cores: "
                       "priced as one with the whole tile")
        units = 1
    wm, wn = warp_split(replace(config, num_warps=units, warps_m=config.warps_m if arch.compute.warps == 1 else None))
    stages = min(config.num_stages, arch.levels[smem].max_stages)
    if stages != config.num_stages:
        changes.append(f"num_stages {config.num_stages}: {arch.levels[smem].name} takes at most "
                       f"{arch.levels[smem].max_stages} stages in this model: priced with {stages}")
    # the first that fits: registers double-buffered, then not (a warpgroup MMA's registers hold
    # the accumulator alone, one copy); the caches between the outermost level and SMEM holding
    # every tensor, then the operands only, then nothing (streaming)
    deepest = 1 if arch.compute.warps > 1 else min(2, arch.levels[rf].max_stages)
    tries = [(rf_stages, cached) for cached in ("all", "inputs", "none") for rf_stages in range(deepest, 0, -1)]
    for i, (rf_stages, cached) in enumerate(tries):
        mapping = _mapping(arch, workload, config, (m, n, k, batch), (rows, cols, wm, wn, stages, rf_stages), blocks,
                           cached, cluster)
        try:
            check_fits(mapping, arch, workload, where)
            break
        except SpecError as exc:
            if i == len(tries) - 1:
                raise (where / "BLOCK_M, BLOCK_N, BLOCK_K, num_stages").error(
                    f"the blocks do not fit at {exc.path}: {exc.expected}") from None
    registers = accumulator_registers(config.block_m, config.block_n, config.num_warps)
    if registers > ACCUMULATOR_REGISTERS:
        raise (where / "num_warps").error(
            f"a {config.block_m}x{config.block_n} fp32 accumulator over {config.num_warps} warps is {registers} "
            f"registers a thread, over the {ACCUMULATOR_REGISTERS} a kernel holds without spilling: the model "
            f"cannot price the spills (at least {accumulator_warps(config.block_m, config.block_n)} warps)")
    return mapping, tuple(changes)


def _cluster_of(arch: Arch, config: BlockConfig, smem: int, where: Where, changes: list):
    """(the config of one CTA, the cluster's CTAs along (m, n), the programs the SMs run at once)
    of a config whose programs span num_ctas CTAs (a thread-block cluster: the level above SMEM's
    `block_clusters`). Triton splits a program's block over its CTAs itself: read back as the
    split giving the squarest CTA tile (ties: more CTAs along m), a line says so."""
    if config.num_ctas == 1:
        return config, (1, 1), arch.fanout(smem - 1)[0]
    clusters = arch.levels[smem - 1].clusters
    if clusters is None:
        raise (where / "num_ctas").error(f"{config.num_ctas} CTAs a program: {arch.name}'s {arch.levels[smem - 1].name} "
                                         "has no thread-block clusters (`block_clusters`)")
    fit = int(clusters.schedulable(config.num_ctas))
    if fit == 0:
        raise (where / "num_ctas").error(f"a cluster of {config.num_ctas} CTAs: {arch.name} runs at most "
                                         f"{clusters.max_ctas}")
    split = squarest_split(config.block_m, config.block_n, config.num_ctas)
    if split is None:
        raise (where / "num_ctas").error(f"{config.num_ctas} CTAs do not split the block "
                                         f"{config.block_m}x{config.block_n}")
    cm, cn = split
    changes.append(f"num_ctas {config.num_ctas}: the program's block over a {cm}x{cn} cluster of CTAs (m x n; Triton "
                   f"splits it itself: read back as the squarest CTA tile), {fit} clusters at once")
    cta = replace(config, block_m=config.block_m // cm, block_n=config.block_n // cn, num_ctas=1)
    return cta, (cm, cn), fit


def _mapping(arch: Arch, workload: Workload, config: BlockConfig, dims, split, blocks, cached: str,
             cluster: tuple[int, int] = (1, 1)) -> Mapping:
    m, n, k, batch = dims
    rows, cols, wm, wn, stages, rf_stages = split
    smem, rf = arch.per_sm_levels()
    everything = frozenset(range(len(workload.tensors)))
    out = []
    for lv, level in enumerate(arch.levels):
        keep = frozenset(t for t in everything if level.may_keep(workload.tensors[t].name)) if lv else everything
        if lv == smem:          # the accumulator lives in registers; the stages buffer the operands
            keep = frozenset(t for t in keep if not workload.tensors[t].is_output)
        if lv == rf and arch.compute.warps > 1:
            # Triton issues a warpgroup MMA (wgmma) on loaded tiles with both operands in shared
            # memory: its registers hold the accumulator only
            keep = frozenset(t for t in keep if workload.tensors[t].is_output)
        if 0 < lv < smem and cached != "all":
            keep = frozenset(t for t in keep if cached == "inputs" and not workload.tensors[t].is_output)
        temporal, spatial, depth = [], [], 1
        if lv == 0:
            # the K loop inside the waves: the caches above SMEM hold one k step of a wave's
            # operand tiles (its blocks run their K loops side by side), not the wave's whole K
            temporal = ([(d, workload.sizes[d]) for d in batch] + [(m, blocks[m] // rows), (n, blocks[n] // cols)]
                        + [(k, blocks[k])])
        if 0 < lv < smem:       # a cache streams the next k step while the SMs compute this one
            depth = min(2, level.max_stages)
        if lv == smem - 1:      # the clusters side by side on mesh x, a cluster's CTAs on y
            spatial = [(m, rows, 0), (n, cols, 0), (m, cluster[0], 1), (n, cluster[1], 1)]
        if lv == smem:          # warps beyond the tensor cores take turns on them (temporal)
            sm, sn = _on_cores(wm, wn, arch.fanout(smem)[0])
            temporal = [(m, wm // sm), (n, wn // sn)]
            spatial, depth = [(m, sm, 0), (n, sn, 0)], stages
        if lv == rf:
            temporal = [(m, config.block_m // wm), (n, config.block_n // wn), (k, config.block_k)]
            depth = rf_stages
        out.append(LevelMapping(tuple((d, b) for d, b in temporal if b > 1),
                                tuple((d, b, a) for d, b, a in spatial if b > 1), keep, depth))
    return Mapping(tuple(out))

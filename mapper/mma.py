"""What a compute unit's own instruction takes of each tensor: the words the units draw from the
innermost level that keeps it (an input's reads there, the output's updates).

Timeloop's rule, and the default (`operand_reads: per_mac`): one word of every tensor per MAC.
A tensor-core instruction reads whole fragments instead (`operand_reads: per_instruction`):
`wgmma.m64nNk16` takes a 64 x 16 fragment of A and a 16 x N one of B once, for 64·N·16 MACs, and
updates a 64 x N accumulator once. So of each tensor the units take the MACs they execute
divided by the instruction's size along every role that does not index it: B, indexed by k and
n, is read once per 64 MACs (m's 64), A once per N, the accumulator once per 16 (k's).

The instruction's size along a role is the largest multiple of the native size (the grain,
`native_shape`) that divides the unit's tile along that role (the innermost level's loops,
padded to whole fragments as `tails.fragment_macs` pads them) and is at most `max_shape`
(wgmma's n: a multiple of 8 up to 256). Where the units read from registers this only moves
energy; where they read shared memory (wgmma's B, tcgen05's A and B) it is the bandwidth the
kernel needs there, which a per-MAC count would overstate 64-fold.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from . import tails, tiles
from .roles import RolesError, arch_roles
from .spec import Arch, Workload


def _instruction_roles(arch: Arch, workload: Workload):
    """((name, dims, grain, most), ...) of the roles some dim plays, or None where the unit
    reads per MAC (the default, no native shape, or no role fits the einsum)."""
    if arch.compute.operand_reads != "per_instruction":
        return None
    try:
        roles = arch_roles(arch, workload)
    except RolesError:
        return None
    if roles is None:
        return None
    most = dict(arch.compute.max_shape)
    return tuple((name, dims, size, max(size, most.get(name, size)))
                 for name, dims, size in zip(roles.names, roles.dims, roles.sizes) if dims)


def _largest_divisor(q, at_most: int):
    """The largest divisor of q (an int, or an int array) that is at most `at_most`; for an
    array, looked up in a table of every value up to its largest (few, where the table's rows
    are many)."""
    if isinstance(q, np.ndarray):
        table = np.ones(int(q.max(initial=0)) + 1, q.dtype)
        for c in range(2, at_most + 1):     # ascending: the last divisor written is the largest
            table[::c] = c
        return table[q]
    return next(c for c in range(min(at_most, q), 0, -1) if q % c == 0)


def instruction_shape(arch: Arch, workload: Workload, innermost) -> dict[str, object]:
    """Per role name, the instruction's size the units run (ints, or (N,) arrays when
    `innermost`, per dim the innermost level's loop bounds, holds arrays); {} where the unit
    reads per MAC."""
    return _shape(_instruction_roles(arch, workload), innermost)


def _shape(roles, innermost) -> dict[str, object]:
    shape = {}
    for name, dims, grain, most in roles or ():
        tile = math.prod(innermost[d] for d in dims)
        shape[name] = grain * _largest_divisor(-(-tile // grain), most // grain)
    return shape


def unit_words(arch: Arch, workload: Workload, innermost, macs_per_unit, executed) -> list:
    """Per tensor, the words one compute unit takes from the tensor's innermost keeper over the
    run: `macs_per_unit` each per MAC (Timeloop's count), or per instruction (module docstring)
    the `executed` MACs over the instruction's size along the roles not indexing the tensor."""
    roles = _instruction_roles(arch, workload)
    if roles is None:
        return [macs_per_unit] * len(workload.tensors)
    shape = _shape(roles, innermost)
    return [executed // math.prod(shape[name] for name, dims, *_ in roles if not tensor.dims & set(dims))
            for tensor in workload.tensors]


def least_words_per_mac(arch: Arch, workload: Workload, t: int) -> float:
    """The fewest words of tensor t the units take per MAC of the workload in any mapping: 1
    per MAC, or per instruction 1 / the largest instruction along the roles not indexing it
    (what the search's bounds may assume). A role whose dims together are smaller than its
    grain (a decode GEMM's m of 1 under wgmma's m64) is padded to the grain in every mapping:
    at least grain/extent MACs run per MAC of the workload along it, so a tensor it indexes
    is drawn that much more often, and one it does not, at least once per extent (the
    instruction there is as large as what it runs, padding included)."""
    roles = _instruction_roles(arch, workload)
    if roles is None:
        return 1.0
    dims = workload.tensors[t].dims
    least = 1.0
    for _, role_dims, grain, most in roles:
        extent = math.prod(workload.sizes[d] for d in role_dims)
        indexed = bool(dims & set(role_dims))
        if extent < grain:
            least *= grain / extent if indexed else 1.0 / extent
        elif not indexed:
            least /= most
    return least


def mapping_instruction(arch: Arch, workload: Workload, mapping) -> dict[str, int]:
    """`instruction_shape` of one mapping (its unit's tile): what a report and a kernel name as
    the MMA it issues; {} where the unit reads per MAC."""
    innermost = tiles.unit_tile(mapping, len(workload.dims))
    return {name: int(size) for name, size in instruction_shape(arch, workload, innermost).items()}


def with_operands_for(arch: Arch, workload: Workload, swap: str = "auto") -> Workload:
    """`workload` with its operands in the order the compute unit is to take them: swapped
    (swap-AB, `Workload.operands_swapped`) where `swap` is "always", or "auto" where the unit
    reads per instruction and the instruction's grains pad the workload to fewer MACs swapped
    (`tails.fragment_macs` over its whole sizes): a decode GEMM's m of 1 pads to wgmma's m of
    64 as written, to its n grain of 8 swapped. As written otherwise ("never"; "auto" on a
    unit that reads per MAC, such as Ampere's mma.sync, or where no dims play m and n)."""
    if swap == "never" or workload.operands_swapped:
        return workload
    swapped = dataclasses.replace(workload, operands_swapped=True)
    if swap == "always":
        return swapped
    if arch.compute.operand_reads != "per_instruction":
        return workload

    def padded(w: Workload) -> int:
        return tails.fragment_macs(arch, w, w.sizes, w.macs)
    return swapped if padded(swapped) < padded(workload) else workload

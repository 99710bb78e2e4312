"""Block-scaled operands (MXFP8/6/4, NVFP4) as einsums whose scales are tensors of their own.

A workload that says `dtypes: {A: nvfp4}` for `Z[m,n] += A[m,k] * B[k,n]` is rewritten, before
anything else reads it, into

    Z[m,n] += A[m,k_blk,k_in] * B[k_blk,k_in,n] * A_scale[m,k_blk]

k split into k_blk blocks of k_in = the format's block (16 for NVFP4, 32 for the MX formats),
and one scale per block of A along k, of the format's scale dtype (FP8 E4M3 for NVFP4, E8M0 for
MX). Then the scale is a tensor like any other: the mapspace tiles it beside A, every level
that keeps it holds and moves its bytes, and the one cost model, the bounds and the search
price it with no rule of its own. The MACs are unchanged (k_blk x k_in = k); the mapspace keeps
k_in whole at the innermost level (`Workload.block_dims`: the MMA consumes whole blocks).

The blocks run along the one reduction dim every operand indexes plainly (a GEMM's k, a
convolution's input channels c). Refused, naming the key: an operand without exactly one such dim, two scaled operands with different blocks or dims, a reduction size that is
not a multiple of the block (padding it would change the workload: pad it in the file), a name
the rewrite needs that the einsum already uses.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..dtypes import BLOCK_FORMATS
from ..errors import shown
from ..units import Where

Parsed = list[tuple[str, list[dict[str, int]], bool]]      # `einsum.parse_einsum`'s form


@dataclass(frozen=True)
class Rewritten:
    parsed: Parsed
    sizes: dict[str, int]
    dtypes: dict[str, str]              # tensor -> dtype name (the scales' included)
    scales: dict[str, str]              # scale tensor -> the tensor it scales
    block_dims: tuple[str, ...]         # the block dims kept whole innermost
    einsum: str


def _reduction_dim(name: str, axes: list[dict[str, int]], operands: list, out_dims: set[str], where: Where) -> str:
    """The dim the blocks of `name` run along: the one reduction dim (no output index) that every
    operand indexes plainly (a GEMM's k; a convolution's channels c, not its window dims r, s)."""
    plain = [next(iter(axis)) for axis in axes if len(axis) == 1 and next(iter(axis.values())) == 1]
    found = [d for d in plain if d not in out_dims
             and all({d: 1} in other_axes for _, other_axes in operands)]
    if len(found) != 1:
        raise where.error(f"a block-scaled format puts one scale per block along the reduction dim: {name} "
                          f"[{', '.join(axis_text(a) for a in axes)}] needs exactly one reduction dim that "
                          f"every operand indexes plainly, got {found or 'none'}")
    return found[0]


def block_scale(parsed: Parsed, sizes: dict[str, int], dtypes: dict[str, str], where: Where) -> Rewritten | None:
    """The rewritten einsum, or None when no operand is block-scaled. `dtypes`: tensor ->
    canonical dtype name; `where`: the workload file (keys `dtypes.T`, `sizes.k`)."""
    scaled = [(name, axes) for name, axes, is_out in parsed if not is_out and dtypes.get(name) in BLOCK_FORMATS]
    if not scaled:
        return None
    out_dims = {d for name, axes, is_out in parsed if is_out for axis in axes for d in axis}
    operands = [(name, axes) for name, axes, is_out in parsed if not is_out]
    found = {name: _reduction_dim(name, axes, operands, out_dims, where / "dtypes" / name) for name, axes in scaled}
    dims = set(found.values())
    blocks = {BLOCK_FORMATS[dtypes[name]].block for name in found}
    if len(dims) > 1 or len(blocks) > 1:
        raise (where / "dtypes").error(f"block-scaled operands {', '.join(found)} must share one reduction "
                                       f"dim and one block size, got dims {sorted(dims)} and blocks {sorted(blocks)}")
    k, block = dims.pop(), blocks.pop()
    if sizes[k] % block:
        fmt = ", ".join(f"dtypes.{name}: {dtypes[name]}" for name in found)
        raise (where / "sizes" / k).error(f"{sizes[k]:,} is not a multiple of the block of {block} that "
                                          f"{fmt} scales (pad {k} to {-(-sizes[k] // block) * block} in the file)")
    k_blk, k_in = f"{k}_blk", f"{k}_in"
    used = {d for _, axes, _ in parsed for axis in axes for d in axis} | {n for n, _, _ in parsed}
    for name in (k_blk, k_in, *(f"{t}_scale" for t in found)):
        if name in used:
            raise (where / "einsum").error(f"the block-scaled rewrite needs the name {shown(name)}, which the "
                                           "einsum already uses: rename it")
    split = []
    for name, axes, is_out in parsed:
        new_axes = []
        for axis in axes:
            if k not in axis:
                new_axes.append(axis)
            elif axis == {k: 1}:
                new_axes += [{k_blk: 1}, {k_in: 1}]
            else:
                raise (where / "einsum").error(f"{name} indexes {k} in {shown(axis_text(axis))}: a block-scaled "
                                               f"dim must be a plain index of every tensor")
        split.append((name, new_axes, is_out))
    scales = {f"{name}_scale": name for name in found}
    for name, axes in scaled:
        split.append((f"{name}_scale", [{k_blk: 1} if axis == {k: 1} else axis for axis in axes], False))
    new_sizes = {}
    for d, size in sizes.items():
        new_sizes.update({k_blk: size // block, k_in: block} if d == k else {d: size})
    new_dtypes = {**dtypes, **{s: BLOCK_FORMATS[dtypes[t]].scale for s, t in scales.items()}}
    return Rewritten(split, new_sizes, new_dtypes, scales, (k_in,), einsum_text(split))


def axis_text(axis: dict[str, int]) -> str:
    return "+".join(d if c == 1 else f"{c}*{d}" for d, c in axis.items())


def einsum_text(parsed: Parsed) -> str:
    """`Z[m,n] += A[m,k] * B[k,n]` from the parsed form (the output first)."""
    terms = [f"{name}[{','.join(axis_text(a) for a in axes)}]" for name, axes, _ in parsed]
    return f"{terms[0]} += {' * '.join(terms[1:])}"

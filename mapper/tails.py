"""Ragged shapes: a tile that does not divide its dim leaves a partial last tile.

A mapping's loop bounds multiply to a dim's *extent* P, at least its size S; the P - S
positions past the end are the tail's padding. Two ways to run it (an architecture's
`model.tails`, docs/COST_MODEL.md "Ragged shapes"):
- `padded` (Timeloop's imperfect factors): the padding is real data; every MAC and every
  word of it is charged.
- `masked` (how GPU kernels run, the default where an architecture has `gpu:`): every tile of
  the padded grid runs and computes whole tensor-core fragments, but loads from and stores to
  global memory (the levels above the per-SM one) are masked: they move only the elements that
  exist. Summed over the grid, the valid elements of a tensor's tiles are its padded count
  times prod over its dims of S/P (the tiles of each dim partition [0, P), and [0, S) of it is
  valid), so the clamp is one ratio per tensor (`clamp_ratios`). Per-instance counts, the time
  they take and the footprints stay those of whole tiles: the busiest instance runs whole ones.
The grid is the real one: a block-level tile shorter than the padding would leave a block with
no valid element, which no kernel launches (`tables.tail_mask`).

Compute on a tensor-core unit runs whole fragments: an innermost tile whose role product is
not a multiple of the native size (a convolution's k = c.r.s = 147, decode's m = 1) executes
`fragment_macs` of them, padding included, on every architecture with a native shape.
"""
from __future__ import annotations

import math

from .factors import padded_extents
from .roles import Roles, RolesError, arch_roles
from .spec import Arch, Workload


def tail_extents(size: int, grain: int, max_padding: float) -> tuple[int, ...]:
    """Extents a masked dim may take: the size when `grain` divides it, and every
    ceil(size / T) x T for tiles T = grain x 2^a up to size x (1 + max_padding) (the smallest,
    ceil(size / grain) x grain, always), ascending. Power-of-two multiples of the fragment are
    the tiles kernels use (Triton's blocks must be powers of two)."""
    first = -(-size // grain) * grain
    top = max(first, int(size * (1 + max_padding)))
    out = {size} if size % grain == 0 else set()
    tile = grain
    while tile <= top:
        extent = -(-size // tile) * tile
        if extent <= top:
            out.add(extent)
        tile *= 2
    return tuple(sorted(out))


def dim_extents(arch: Arch, workload: Workload, factors: str, max_padding: float,
                roles: Roles | None) -> list[tuple[int, ...]]:
    """Per dim, the extents a mapspace lets it take. `factors` is the mapspace's choice:
    `perfect` (its size), `imperfect` (padded: the smoothest extents within max_padding;
    masked: a tail for every dim) or `auto` (masked: a tail where a dim alone in a role is
    not a multiple of its native size and larger than it; padded: perfect). A dim of a
    sliding window (a convolution's p, r) keeps its size: its halo is not a box to clamp."""
    sizes = workload.sizes
    if factors == "perfect" or (factors == "auto" and arch.tails == "padded"):
        return [(s,) for s in sizes]
    if arch.tails == "padded":
        return [padded_extents(s, max_padding) for s in sizes]
    sliding = {d for t in workload.tensors for axis in t.axes if len(axis) > 1 for d, _ in axis}
    out = []
    for d, size in enumerate(sizes):
        grain = 1 if roles is None else roles.grain(d)
        ragged = size % grain != 0 and size > grain
        if d in sliding or not (factors == "imperfect" or ragged):
            out.append((size,))
        else:
            out.append(tail_extents(size, grain, max_padding))
    return out


def masked_levels(arch: Arch) -> int:
    """How many levels, outermost first, load and store masked (the levels above the per-SM
    one: global memory); 0 when the architecture pads its tails."""
    levels = arch.per_sm_levels()
    return levels[0] if arch.tails == "masked" and levels is not None else 0


def clamp_ratios(workload: Workload, extents) -> list:
    """Per tensor, the share of its padded elements that exist: prod over its dims of size /
    extent. `extents`: per dim an (N,) int array, or an int."""
    return [math.prod(workload.sizes[d] / extents[d] for d in sorted(tensor.dims)) for tensor in workload.tensors]


def fragment_roles(arch: Arch, workload: Workload) -> tuple[tuple[tuple[int, ...], int], ...]:
    """(dims, native size) of every role of the compute unit's native shape, or () when it has
    none or no role fits the einsum (an elementwise op: nothing to pad)."""
    try:
        roles = arch_roles(arch, workload)
    except RolesError:
        return ()
    return () if roles is None else roles.fragments()


def fragment_macs(arch: Arch, workload: Workload, innermost, macs_per_unit):
    """MACs one compute unit executes: its `macs_per_unit` with each role's innermost tile
    (`innermost[d]`, the spans of the last level's loops) rounded up to whole fragments.
    Integers or (N,) int arrays alike."""
    executed = macs_per_unit
    for dims, size in fragment_roles(arch, workload):
        tile = math.prod(innermost[d] for d in dims)
        executed = executed // tile * (-(-tile // size) * size)
    return executed


def tile_counts(sizes, extents, tile) -> tuple[int, int, int]:
    """(tiles, partial, empty) of one level's tile (per dim, `tile`) over the padded grid
    (`extents`) of dims of `sizes`: every tile, those with some padding, those with nothing
    but padding (inside a partial block: masked warps, wasted work)."""
    total = math.prod(e // t for e, t in zip(extents, tile))
    full = math.prod(s // t for s, t in zip(sizes, tile))
    some = math.prod(-(-s // t) for s, t in zip(sizes, tile))
    return total, total - full, total - some

"""Slices that ride along with a tensor's tiles: a fused prologue's other operands (a norm's
gamma) and a streamed norm's stats, loaded with every tile of the anchor's input A; an
epilogue's operands (a bias slice, a residual tile), loaded with every tile of the anchor's
output it completes.

Wherever the anchor's mapping moves a tile of that tensor (the *carrier*) between two levels
at and above the fusion level, the operand's slice over that tile moves with it, so the
operand is re-read from a level exactly as often as the carrier's tiles move there (a cache
level holding the carrier's tile holds its slice too):
- fills into level l: the carrier's tiles moved there (an input's fills over its tile there;
  an output's tiles completed there, its words written up over its tile) times the slice of
  one such tile;
- reads at level l: the slices filled into the next level holding the carrier (an input's:
  its reads there over that level's tile, multicast included, times the slice of one).
A slice of one tile is its mean valid extent along each of its dims (a ragged dim of S words in
tiles of T: S / ceil(S / T) per tile, as every tile of a loop nest is moved equally often), its
words each `per_point` words of `word_bytes` bytes.
"""
from __future__ import annotations

import math

from ..mapping import level_tiles
from ..spec import Arch, Workload
from .kernels import Mapped
from .price import Traffic, access_energy


def riding(arch: Arch, wl: Workload, mapped: Mapped, carrier: str, carrier_dims, name: str, dims,
           per_point: float, word_bytes: float, down_to: int, output: bool = False) -> list[Traffic]:
    """Entries of slice `name` over the anchor's `dims` (a subset of `carrier_dims`, the
    anchor's dims of tensor `carrier`, its input or, `output`, its output; `wl` the anchor's
    workload) moving with the carrier's tiles at levels 0..`down_to`."""
    ev = mapped.evaluation
    size = {d: wl.sizes[wl.dim_index(d)] for d in carrier_dims}
    tiles = level_tiles(mapped.mapping, len(wl.dims))
    holding = [lv for lv in range(down_to + 1) if carrier in ev.levels[lv].tensors]

    def words(lv: int, tiles_moved: float) -> float:
        """The slice's words moved with `tiles_moved` of the carrier's tiles at level lv: a
        whole number of passes over the slice's tiles (each tile moved equally often) times
        the slice's words, so no rounding noise reaches the rule's rounding to vectors."""
        count = math.prod(-(-size[d] // min(tiles[lv][wl.dim_index(d)], size[d])) for d in dims)
        passes = tiles_moved / count
        if abs(passes - round(passes)) <= 1e-9 * max(passes, 1.0):
            passes = round(passes)
        return passes * per_point * math.prod(size[d] for d in dims)

    fills = {}                 # per holding level below the outermost: the slice's words filled in
    for k, lv in enumerate(holding[1:], 1):
        tc = ev.levels[lv].tensors[carrier]
        if output:             # a tile completed there: written up to the level above, once
            above = ev.levels[holding[k - 1]]
            tiles_moved = above.tensors[carrier].updates * above.instances / tc.tile_words
        else:
            tiles_moved = tc.fills * ev.levels[lv].instances / tc.tile_words
        fills[lv] = words(lv, tiles_moved)
    out = []
    for k, lv in enumerate(holding):
        moves = [("write", fills[lv])] if lv in fills else []
        if k + 1 < len(holding):
            child = holding[k + 1]
            if output:
                moves.append(("read", fills[child]))
            else:              # A's tiles read there (multicast: one read for several children)
                tc = ev.levels[lv].tensors[carrier]
                child_tile = ev.levels[child].tensors[carrier].tile_words
                moves.append(("read", words(child, tc.reads * ev.levels[lv].instances / child_tile)))
        level = arch.levels[lv]
        for kind, moved in moves:
            b = moved * word_bytes
            out.append(Traffic(lv, name, b, access_energy(arch, lv, moved, word_bytes, kind),
                               b / (level.bandwidth * level.instances), fill=kind == "write"))
    return out

"""Slices that ride along with a tensor's tiles: a fused prologue's other operands (a norm's
gamma) and a streamed norm's stats, loaded with every tile of the anchor's input A.

Wherever the anchor's mapping moves a tile of A between two levels at and above the fusion
level, the slice of the operand over that tile moves with it, so the operand is re-read from
a level exactly as often as A's tiles are (a cache level holding A's tile holds its slice too):
- fills into level l: the tiles of A filled there (A's fills over its tile there) times the
  slice of one such tile;
- reads at level l: the tiles of A read there by the next level holding A (A's reads over that
  level's tile, multicast included) times the slice of one of those tiles.
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
           per_point: float, word_bytes: float, down_to: int) -> list[Traffic]:
    """Entries of slice `name` over the anchor's `dims` (a subset of `carrier_dims`, the
    anchor's dims of tensor `carrier`; `wl` the anchor's workload) moving with the carrier's
    tiles at levels 0..`down_to`."""
    ev = mapped.evaluation
    size = {d: wl.sizes[wl.dim_index(d)] for d in carrier_dims}
    tiles = level_tiles(mapped.mapping, len(wl.dims))
    holding = [lv for lv in range(down_to + 1) if carrier in ev.levels[lv].tensors]

    def per_tile(lv: int) -> float:
        extent = {d: min(tiles[lv][wl.dim_index(d)], size[d]) for d in dims}
        return per_point * math.prod(size[d] / -(-size[d] // extent[d]) for d in dims)

    out = []
    for k, lv in enumerate(holding):
        tc, level = ev.levels[lv].tensors[carrier], arch.levels[lv]
        moves = []
        if lv > 0:
            moves.append(("write", tc.fills * ev.levels[lv].instances / tc.tile_words * per_tile(lv)))
        if k + 1 < len(holding):
            child = ev.levels[holding[k + 1]].tensors[carrier]
            moves.append(("read", tc.reads * ev.levels[lv].instances / child.tile_words * per_tile(holding[k + 1])))
        for kind, words in moves:
            b = words * word_bytes
            out.append(Traffic(lv, name, b, access_energy(arch, lv, words, word_bytes, kind),
                               b / (level.bandwidth * level.instances), fill=kind == "write"))
    return out

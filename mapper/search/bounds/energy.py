"""What one word costs to move: the per-word energies and the sharing of a transfer that
every bound below is built from (block rounding relaxed, so that each stays a lower bound)."""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from ... import mma, tails
from ...cost.energy import per_word

def read_back_energy(updates, first, words, most_copies, read_keeper: float, read_parent: float):
    """The least energy an output's read-modify-write costs at its keeper c and above: c
    receives `updates` partial sums, each word of each of its copies read back for every
    update but the first (`first`: words times the copies a split over networks that add
    partial sums may make). Up to `most_copies` x more copies may come from fanouts whose
    networks add nothing (a split-K over SMs): each takes updates off c's read-backs, but its
    partial sums meet those of the other copies apart, at a level above that may keep the
    output, whose read-backs then cost `read_parent` per word: at least one per word of the
    output (`words`) per extra copy, as copies made higher up may have been added on the way.
    Linear between the ends: the least of 1 copy and as many as the updates allow, within
    `most_copies`."""
    at_one = read_keeper * np.maximum(0.0, updates - first)
    if np.isinf(read_parent):          # no level above may keep it: no copy can be added up there
        return at_one
    copies = np.clip(updates / np.maximum(first, 1e-300), 1.0, most_copies)
    return np.minimum(at_one, read_keeper * np.maximum(0.0, updates - first * copies)
                      + read_parent * words * (copies - 1))

def drawn(arch, workload, t: int):
    """The fewest words of tensor t the compute units take from its innermost keeper in any
    mapping of the space: the MACs, or where the unit reads whole fragments the MACs over the
    largest instruction's reuse (`mma.least_words_per_mac`; the MACs run are never fewer)."""
    return workload.macs * mma.least_words_per_mac(arch, workload, t)

def cheapest_read_above(arch, tensor, level: int) -> float:
    """The least energy per word read back from any level above `level` that may keep `tensor`."""
    return min((read_energy(arch.levels[p], tensor) for p in range(level) if arch.levels[p].may_keep(tensor.name)),
               default=np.inf)

def sharing_fanout(arch, tensor, first: int, stop: int) -> int:
    """The most children one transfer of `tensor` can serve across the fanouts of levels
    first..stop-1 (only the networks that multicast, or reduce, share)."""
    return math.prod(arch.sharing_units(x, tensor) for x in range(first, stop))

def serve_energy(level, tensor) -> float:
    """Energy per word a level sends down (an input's read) or takes back (an output's update),
    block rounding relaxed."""
    return per_word(level, level.word_bytes(tensor), "update" if tensor.is_output else "read")

def read_energy(level, tensor) -> float:
    """Energy per word read from a level (an output's partial sum read back too), block
    rounding relaxed."""
    return per_word(level, level.word_bytes(tensor), "read")

def fill_energy(level, tensor) -> float:
    """Energy per word written into a level, block rounding relaxed."""
    return per_word(level, level.word_bytes(tensor), "write")


class ValidShares(NamedTuple):
    """Under masked tails (`tails.py`), the share of each tensor's padded words that exist,
    per node, and the least of them: what a bound on a masked level's energy is scaled by."""
    tensor: list                # per tensor, (N,)
    least: np.ndarray           # (N,)
    masked: int                 # the levels above this one load and store masked


def valid_shares(space, table) -> ValidShares | None:
    """The nodes' valid shares, or None where no level is masked or no node is padded."""
    masked = tails.masked_levels(space.arch)
    if not masked:
        return None
    extents = table.factors.prod(axis=(0, 1))
    if (extents == np.array(space.workload.sizes)[:, None]).all():
        return None
    shares = tails.clamp_ratios(space.workload, extents)
    return ValidShares(shares, functools.reduce(np.minimum, shares), masked)


def may_draw_masked(space, shares: ValidShares | None, level: int) -> bool:
    """Whether traffic into `level` (or, at n_levels, into the compute units) may come from a
    masked level: it is one, or its parent is, or a level between may pass a tensor through."""
    if shares is None:
        return False
    if level <= shares.masked:
        return True
    return any(len(keep) < len(space.workload.tensors)
               for choice in space.choices[shares.masked:level] for keep in choice.keeps)

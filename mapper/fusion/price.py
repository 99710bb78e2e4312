"""The one place that accounts for fusion: kernels as the cost model priced them, then what
fusing removes and adds, tensor by tensor and level by level.

A `KernelPrice` is a list of `Traffic` entries (one tensor at one level of one kernel: its bytes,
its energy and the cycles they take) plus its compute (MACs and elementwise FLOPs: energy and
cycles). Its energy is the sum; its cycles are the cost model's rule, the slowest of the compute
and every level (a level's time is the sum of its entries' cycles).

Invariants:
- `from_evaluation` reproduces the cost model exactly: its energy is `Evaluation.energy_pj`
  plus the op's FLOPs at the compute's energy per MAC, its per-level bytes are the
  evaluation's `traffic_bytes`, its cycles are `Evaluation.cycles` (when the op adds no FLOPs).
  An entry's cycles are its share of its level's time (bytes over the level's bytes), so
  removing traffic removes its time in proportion (the cost model's latency terms included).
- Fusing an intermediate at fusion level `f` removes exactly: the producer's entries of that
  tensor at levels above `f` (its write out to the outermost level, and every level it passed
  on the way) and each in-group consumer's entries above `f` plus its fills at `f` (the read
  back). Nothing else changes, so an elementwise intermediate of N elements of s bytes, written
  and read once at the outermost level, saves exactly 2*N*s bytes there.
- Added traffic (a fused epilogue's bias slices, a prologue's operands re-read with every tile
  of its consumer: `slices.py`) is priced with the cost model's access-energy rule and the
  level's bandwidth.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..cost import Evaluation, access_energy as cost_access_energy
from ..cost.occupancy import blocks_per_sm
from ..spec import Arch
from ..tiles import fits


@dataclass(frozen=True)
class Traffic:
    level: int
    tensor: str
    bytes: float
    energy_pj: float
    cycles: float
    fill: bool = False           # the words filled in from the parent (the rest: reads, updates)
    owner: int = -1              # the op whose kernel moved it (-1: added by the fusion accounting)


@dataclass(frozen=True)
class KernelPrice:
    traffic: tuple[Traffic, ...]
    compute_energy_pj: float     # MACs, FLOPs and leakage
    compute_cycles: float
    n_levels: int

    @property
    def energy_pj(self) -> float:
        return self.compute_energy_pj + sum(t.energy_pj for t in self.traffic)

    def level_bytes(self, level: int) -> float:
        return sum(t.bytes for t in self.traffic if t.level == level)

    def level_cycles(self, level: int) -> float:
        return sum(t.cycles for t in self.traffic if t.level == level)

    @property
    def cycles(self) -> float:
        return max([self.compute_cycles] + [self.level_cycles(lv) for lv in range(self.n_levels)])

    def tensor_bytes(self, tensor: str, level: int) -> float:
        return sum(t.bytes for t in self.traffic if t.tensor == tensor and t.level == level)


def access_energy(arch: Arch, level: int, words: float, word_bytes: float, kind: str) -> float:
    """Energy of `words` words moved at a level by one kind of access (read, write, update),
    by the cost model's own rule (`cost.access_energy`: vectors of block_size words, rounded
    up, plus per-byte energy), the words taken as one instance's."""
    return cost_access_energy(arch.levels[level], words, word_bytes, kind)


def flop_cycles(arch: Arch, flops: float) -> float:
    """Cycles of elementwise FLOPs at the compute's peak rate, one FLOP per MAC slot (optimistic
    on a GPU, whose elementwise math runs outside the tensor cores: docs/COST_MODEL.md)."""
    return flops / arch.peak_macs_per_cycle


def from_evaluation(arch: Arch, ev: Evaluation, word_bytes: dict[str, float], flops: float = 0.0,
                    owner: int = -1) -> KernelPrice:
    """A kernel priced by the cost model (`ev`), with `flops` elementwise FLOPs on top.
    `word_bytes`: bytes per word of each tensor (the workload's)."""
    entries = []
    for lv, lc in enumerate(ev.levels):
        rate = lc.cycles / lc.traffic_bytes if lc.traffic_bytes else 0.0
        for name, tc in lc.tensors.items():
            bits = arch.levels[lv].word_bits
            wb = word_bytes[name] if bits is None else bits / 8
            fill_bytes = min(tc.bytes_moved, tc.fills * lc.instances * wb)
            fill_energy = min(tc.energy_pj, access_energy(arch, lv, tc.fills, wb, "write")
                              * arch.levels[lv].charged_instances(lc.instances))
            if fill_bytes > 0:
                entries.append(Traffic(lv, name, fill_bytes, fill_energy, fill_bytes * rate, True, owner))
            entries.append(Traffic(lv, name, tc.bytes_moved - fill_bytes, tc.energy_pj - fill_energy,
                                   (tc.bytes_moved - fill_bytes) * rate, False, owner))
    tensor_energy = sum(tc.energy_pj for lc in ev.levels for tc in lc.tensors.values())
    compute_energy = ev.energy_pj - tensor_energy + flops * arch.compute.energy_per_mac
    compute_cycles = max(ev.compute_cycles + flop_cycles(arch, flops), 0.0)
    return KernelPrice(tuple(entries), compute_energy, compute_cycles, len(ev.levels))


def owned(kernel: KernelPrice, owner: int) -> KernelPrice:
    """The same kernel, its entries marked as op `owner`'s."""
    return replace(kernel, traffic=tuple(replace(t, owner=owner) for t in kernel.traffic))


def times(kernel: KernelPrice, n: int) -> KernelPrice:
    """`kernel` run `n` times (a slice of a fused group, once per iteration of its fused loops)."""
    return replace(kernel, traffic=tuple(replace(t, bytes=t.bytes * n, energy_pj=t.energy_pj * n, cycles=t.cycles * n)
                                         for t in kernel.traffic),
                   compute_energy_pj=kernel.compute_energy_pj * n, compute_cycles=kernel.compute_cycles * n)


def merged(kernels: list[KernelPrice]) -> KernelPrice:
    """Several kernels run as one: their traffic and compute together (the fusion accounting
    then removes what no longer moves)."""
    return KernelPrice(tuple(t for k in kernels for t in k.traffic),
                       sum(k.compute_energy_pj for k in kernels), sum(k.compute_cycles for k in kernels),
                       kernels[0].n_levels)


def without(kernel: KernelPrice, tensor: str, owner: int, above: int, fills_at: int | None = None) -> KernelPrice:
    """`kernel` without the entries op `owner`'s kernel moved of `tensor` at levels above `above`
    (index < above), nor its fills at level `fills_at` (the read back of an intermediate now
    produced there)."""
    keep = tuple(t for t in kernel.traffic if not (t.tensor == tensor and t.owner == owner and (
        t.level < above or (fills_at is not None and t.level == fills_at and t.fill))))
    return replace(kernel, traffic=keep)


def scaled(kernel: KernelPrice, tensor: str, owner: int, factor: float, above: int,
           rename: str | None = None) -> KernelPrice:
    """Op `owner`'s entries of `tensor` above level `above` times `factor` (and renamed: a
    prologue's input read where its output was)."""
    out = []
    for t in kernel.traffic:
        if t.tensor == tensor and t.owner == owner and t.level < above:
            t = replace(t, bytes=t.bytes * factor, energy_pj=t.energy_pj * factor, cycles=t.cycles * factor,
                        tensor=rename or t.tensor)
        out.append(t)
    return replace(kernel, traffic=tuple(out))


def with_traffic(kernel: KernelPrice, entries: list[Traffic]) -> KernelPrice:
    return replace(kernel, traffic=kernel.traffic + tuple(entries))


def with_flops(arch: Arch, kernel: KernelPrice, flops: float) -> KernelPrice:
    """`flops` more elementwise FLOPs (a prologue recomputed with every tile it is loaded in)."""
    return replace(kernel, compute_energy_pj=kernel.compute_energy_pj + flops * arch.compute.energy_per_mac,
                   compute_cycles=kernel.compute_cycles + flop_cycles(arch, flops))


def streamed_energy(arch: Arch, level: int, reads, writes, macs, flops):
    """Energy of a kernel modelled by its words (numpy arrays or floats): each input's words
    (`reads`: [(words, bytes per word)]) read at every level down to `level` and filled into each
    level below the outermost on the way; each output's (`writes`) updated at every level above
    `level`; MACs and FLOPs at the compute's energy per MAC."""
    energy = (macs + flops) * arch.compute.energy_per_mac
    for words, word_bytes in reads:
        for lv in range(level + 1):
            energy = energy + access_energy(arch, lv, words, word_bytes, "read")
            if lv > 0:
                energy = energy + access_energy(arch, lv, words, word_bytes, "write")
    for words, word_bytes in writes:
        for lv in range(level):
            energy = energy + access_energy(arch, lv, words, word_bytes, "update")
    return energy


def streamed_bandwidth(arch: Arch, lv: int, level: int, busy: float | None = None) -> float:
    """Bytes per cycle a streamed kernel moves at level lv: its bandwidth times its instances, or
    at the kernel's own `level` times the `busy` instances (None: all) that run its blocks."""
    return arch.levels[lv].bandwidth * (arch.levels[lv].instances if busy is None or lv != level else busy)


def streamed_level_cycles(arch: Arch, level: int, read_bytes, write_bytes, busy=None) -> list:
    """Per level 0..`level`, the cycles a streamed kernel's bytes take there, as `streamed_kernel`
    prices them (numpy arrays over a grid of tilings alike): the inputs' `read_bytes` read at
    every level and filled into each below the outermost, the outputs' `write_bytes` written at
    each level above `level`, at `streamed_bandwidth` (`busy` instances at `level`). What a
    kernel model ranks its grid by, so that its pick is priced as it is reported."""
    return [(read_bytes * (2 if lv > 0 else 1) + (write_bytes if lv < level else 0))
            / streamed_bandwidth(arch, lv, level, busy) for lv in range(level + 1)]


def streamed_kernel(arch: Arch, level: int, reads, writes, macs: float, flops: float,
                    compute_cycles: float, busy: float | None = None) -> KernelPrice:
    """The same kernel as entries (`reads`/`writes`: [(tensor, words, bytes per word)]), each
    level's time its bytes over its bandwidth (`streamed_bandwidth`: at `level` only the `busy`
    instances', where fewer blocks run than it has)."""
    entries = []
    for name, words, word_bytes in reads:
        for lv in range(level + 1):
            bandwidth = streamed_bandwidth(arch, lv, level, busy)
            b = words * word_bytes
            entries.append(Traffic(lv, name, b, access_energy(arch, lv, words, word_bytes, "read"), b / bandwidth))
            if lv > 0:
                entries.append(Traffic(lv, name, b, access_energy(arch, lv, words, word_bytes, "write"),
                                       b / bandwidth, True))
    for name, words, word_bytes in writes:
        for lv in range(level):
            bandwidth = streamed_bandwidth(arch, lv, level, busy)
            b = words * word_bytes
            entries.append(Traffic(lv, name, b, access_energy(arch, lv, words, word_bytes, "update"), b / bandwidth))
    energy = (macs + flops) * arch.compute.energy_per_mac
    return KernelPrice(tuple(entries), float(energy), float(compute_cycles), len(arch.levels))


def fits_at(arch: Arch, level: int, used):
    """Whether `used` bytes (a number or numpy array, per instance) held at `level` fit it: the
    one capacity rule (`tiles.fits`), with nothing held elsewhere."""
    used = np.asarray(used, dtype=float)
    per_level = np.zeros((len(arch.levels),) + used.shape)
    per_level[level] = used
    return fits(arch, per_level.reshape(len(arch.levels), -1)).reshape(used.shape)


def block_slots(arch: Arch, level: int, smem, regs):
    """For streamed kernels' tilings (numpy arrays of their shared-memory and register bytes
    per block): whether a block fits an SM at all, the blocks resident per SM and the blocks
    run at once (on a GPU, SMs x resident blocks; elsewhere the level's instances)."""
    if arch.gpu is not None and arch.per_sm_levels() is not None:
        rf_per_sm = arch.levels[arch.per_sm_levels()[1]].instances // arch.gpu.sms
        per_sm = blocks_per_sm(arch, smem, regs / rf_per_sm)
        return per_sm >= 1, per_sm, arch.gpu.sms * np.maximum(per_sm, 1)
    ones = np.ones(np.shape(smem))
    return ones > 0, ones, ones * float(arch.levels[level].instances)

"""The joint search on several cores: what forked workers share as they walk (`Claims`,
`SharedKey`), and whether to fork at all; `workers.py` runs them.

Why: the walk prices children in numpy slices of a few thousand rows, where one core does all
the work (numpy does not spread such arrays over threads), so a second process walking beside
the first nearly halves the walk that proves the optimum (docs/RESULTS.md).

What each does (`strategy.Joint._find_and_walk`): worker 0 has CP-SAT solve in a thread, polishes what
its dives find and runs the local search; the others dive quickly (each with its own seed, or
into its own keep parts) and start the walk at once. Every worker expands the nodes above
depth 2 (few); the children of each depth-1 node are handed out in units (the parent and the
children's first dim), each to the first worker that reaches it (`Claims`), decided before
their other dims are crossed in. Across keep parts the units are one level up, the parts'
roots and their children's first dim (bounding the parts' depth-1 nodes is most of such a
walk), each done once the depth-1 nodes it became are walked (`across.AcrossParts`). So the walk is theirs while worker 0 searches for better
incumbents, none waits on a share fixed in advance that turned out larger than another's, and
worker 0 stops searching for incumbents once another's walk has reached its end. On a work
clock (every command's search) it goes otherwise: worker 0 dives, walks and searches for
incumbents as on one core, and the others start only once it has walked alone for a counted
while (`synced.SyncedKey.start`); the owners are fixed (`Claims(fixed=...)`, `_fixed_owner`):
worker 0's what it reached alone, the rest by hash.

What they share: the best ranking key any of them has found (`SharedKey`; a key holds the whole
mapping, `objective.table_of_key`), which every worker prunes against (`Incumbent.bar`); a
subtree is dropped only when its bound is beaten by a mapping one of them holds, so the best
of the workers' mappings, ranked as exhaustive search ranks, is still the optimum when every
unit claimed was walked to its end. The parent is worker 0; each child sends back its best
mapping, what it priced, the bounds it left open and its notes, and the parent ends holding
the best key of all.
"""
from __future__ import annotations

import copy
import multiprocessing
import os
import threading

import numpy as np


MAX_WORKERS = 4         # each holds its own slices (hundreds of MB on large cases; docs/RESULTS.md)
_MIX = np.uint64(0xFF51AFD7ED558CCD)     # a 64-bit odd multiplier (MurmurHash3's finaliser)


# on a search's work clock, the workers whatever the machine's cores (the reference machine's
# two), so that what they do, and the JSON, is the same on one core or many
COUNTED_WORKERS = 2


def default_workers(context=None) -> int:
    """COUNTED_WORKERS on a search's work clock (`context.on_search_clock`), else the cores this
    process may run on, up to MAX_WORKERS."""
    if context is not None and context.on_search_clock:
        return COUNTED_WORKERS
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(MAX_WORKERS, cores))


def can_fork(context) -> bool:
    """Forked workers are wanted and allowed: on the wall clock, or on a search's work clock
    (`SearchContext.for_search`: their units fixed, their keys exchanged at counted points, so
    what they return does not depend on which runs ahead); not under an evaluation budget or
    fusion's work clock (they run in order, on one core); not inside a daemonic
    process (a pool's worker), which may not have children, and from the main thread (signals,
    by which a stop reaches the workers, are set there only)."""
    return ((context.per_evaluation is None or context.walk_first) and not multiprocessing.current_process().daemon
            and threading.current_thread() is threading.main_thread())


def content_hashes(columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two independent 64-bit hashes of each column of `columns` (K, N) integers: together an
    identity for the tree node whose contents they are (a collision of both is below 1e-20
    for a million nodes)."""
    columns = columns.astype(np.uint64)
    hashes = []
    for seed in (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F):
        h = np.full(columns.shape[1], np.uint64(seed))
        for row in columns:
            h = (h ^ row) * _MIX
            h ^= h >> np.uint64(29)
        hashes.append(h.view(np.int64) | 1)         # never (0, 0): an empty slot
    return hashes[0], hashes[1]


class Claims:
    """Which worker walks each unit of the tree (a node at the split depth's parent and its
    children's first dim, `walk.Walk._share`), handed out as the workers reach them: the
    first to reach a unit walks it, the others skip it. A worker busy elsewhere (worker 0's
    local search) leaves the walk to the others, and none waits on a share fixed in advance
    that turned out larger than another's. Kept in shared memory, an open-addressing table
    of the units' content hashes (`content_hashes`), their state and owner, under one lock.
    A unit claimed but never marked done (its worker stopped or failed) leaves the walk
    incomplete (`pending`); a failed worker's units are handed out again (`release`). Where
    the table is full a unit is walked by every worker that reaches it: wasted work, never a
    unit missed."""

    EMPTY, CLAIMED, DONE, SEEN = 0, 1, 2, 3     # SEEN: reached by a worker that does not own it
    PROBES = 32             # slots looked at per unit before the table counts as full

    def __init__(self, slots: int = 1 << 20, fixed: int = 0, started=None):
        """`fixed` (on a work clock, the number of workers): each unit is walked by the worker
        its hash names, whoever reaches it first, so that who walks what never depends on
        which worker runs ahead (`synced.py` makes what they prune against independent of it
        too); else by the first to reach it. `started` (fixed: `synced.SyncedKey.started`):
        whether the others walk yet; until they do, every unit worker 0 reaches is its own."""
        self.fixed, self.started = fixed, started
        context = multiprocessing.get_context("fork")
        self.lock = context.Lock()
        self.keys = np.frombuffer(context.RawArray("q", 2 * slots), np.int64).reshape(slots, 2)
        self.state = np.frombuffer(context.RawArray("b", slots), np.int8)
        self.owner = np.frombuffer(context.RawArray("b", slots), np.int8)
        self.reached_end = np.frombuffer(context.RawArray("b", 1), np.int8)   # some walk ended
        self.worker = 0
        self.known: dict[tuple[int, int], int] = {}     # this process's answers: unit -> slot (-1: mine, unrecorded)

    def for_worker(self, worker: int) -> "Claims":
        """The same table, claiming as `worker` (with answers of its own)."""
        claims = copy.copy(self)
        claims.worker, claims.known = worker, {}
        return claims

    def take(self, first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(mine, slot) per unit (hash pair): whether this worker walks it (claiming it when no
        one has), and the slot that records it (-1: not recorded, table full)."""
        mine, slots = np.zeros(len(first), bool), np.full(len(first), -1, np.int64)
        with self.lock:
            for i, unit in enumerate(zip(first.tolist(), second.tolist())):
                slot = self.known.get(unit)
                if slot is None:
                    slot = self._claim(*unit)
                    self.known[unit] = slot
                slots[i] = slot
                mine[i] = slot < 0 or (int(self.owner[slot]) == self.worker and self.state[slot] == self.CLAIMED)
        return mine, slots

    def _claim(self, first: int, second: int) -> int:
        size = len(self.state)
        for probe in range(self.PROBES):
            slot = (first + probe) % size
            if self.state[slot] == self.EMPTY and not self.keys[slot].any():     # never used
                self.keys[slot] = (first, second)
                owner = self._fixed_owner(first)
                self.owner[slot], self.state[slot] = owner, self.CLAIMED if owner == self.worker else self.SEEN
                return slot
            if self.keys[slot, 0] == first and self.keys[slot, 1] == second:
                if self.state[slot] == self.EMPTY:          # released by a failed worker
                    self.owner[slot], self.state[slot] = self.worker, self.CLAIMED
                elif self.state[slot] == self.SEEN and self.owner[slot] == self.worker:    # its owner's turn
                    self.state[slot] = self.CLAIMED
                return slot
        return -1

    def _fixed_owner(self, first: int) -> int:
        """The worker that walks the unit whose first hash is `first` (this one, first come,
        unless the owners are fixed). Fixed: worker 0 until the others start walking (it walks
        alone first, `synced.SyncedKey.start`), then by hash among all, an equal share each of
        the units no one reached before. The hashes are odd (`content_hashes`): bit 0 is
        skipped. Only worker 0 sets `started`, at a counted point: what it claims before is
        the same on every run, and the others reach nothing before it."""
        if not self.fixed:
            return self.worker
        if self.started is not None and not self.started[0]:
            return 0
        draw = int(np.int64(first).view(np.uint64) >> np.uint64(1))
        return draw % self.fixed

    def done(self, slots: np.ndarray) -> None:
        """The units at `slots` (this worker's) are walked to the end, or pruned."""
        slots = slots[slots >= 0]
        if len(slots):
            with self.lock:
                self.state[slots] = self.DONE

    def pending(self) -> bool:
        """Whether some unit was claimed and never finished."""
        return bool((self.state == self.CLAIMED).any())

    def release(self, worker: int) -> None:
        """Hand out again the units `worker` claimed and did not finish (or, owners fixed,
        never reached), first come from now on."""
        with self.lock:
            self.state[(self.owner == worker) & ((self.state == self.CLAIMED) | (self.state == self.SEEN))] = self.EMPTY
        self.fixed = 0
        self.known.clear()

    def end_reached(self) -> None:
        self.reached_end[0] = 1

    def some_walk_ended(self) -> bool:
        """Whether a worker's walk has reached its end (every unit then is claimed); never
        with owners fixed (when one ended is timing, and each walks what its hash names)."""
        return not self.fixed and bool(self.reached_end[0])


class SharedKey:
    """The best ranking key among the workers, in shared memory (the keys of one space all
    have the same length: costs, then the mapping's contents)."""

    def __init__(self, key: tuple):
        self.values = multiprocessing.get_context("fork").Array("d", len(key) + 1)  # [0]: set or not
        self.lower_to(key)

    def peek(self) -> tuple | None:
        return self.read()

    def read(self) -> tuple | None:
        with self.values.get_lock():
            values = self.values[:]
        return tuple(values[1:]) if values[0] else None

    def lower_to(self, key: tuple) -> None:
        with self.values.get_lock():
            if not self.values[0] or key < tuple(self.values[1:]):
                self.values[1:] = list(key)
                self.values[0] = 1.0

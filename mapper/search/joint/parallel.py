"""The joint search on several cores: forked workers, sharing the walk as they go.

Why: the walk prices children in numpy slices of a few thousand rows, where one core does all
the work (numpy does not spread such arrays over threads). On the bench's 2-core machine a
second process nearly halves the walk that proves the optimum (h100 GEMM 4096^3, optimum
given: 16.2 s on one core, 9.1 s on two).

What each does (`strategy.Joint._find_and_walk`): worker 0 has CP-SAT solve in a thread, polishes what
its dives find and runs the local search; the others dive quickly (each with its own seed, or
into its own keep parts) and start the walk at once. Every worker expands the nodes above
depth 2 (few); the children of each depth-1 node are handed out in units (the parent and the
children's first dim), each to the first worker that reaches it (`Claims`), decided before
their other dims are crossed in. So the walk is theirs while worker 0 searches for better
incumbents, none waits on a share fixed in advance that turned out larger than another's, and
worker 0 stops searching for incumbents once another's walk has reached its end.

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
from dataclasses import replace
import signal
import threading

import numpy as np

from ..events import Event, FromWorker, InParallel, WorkerFailed

MAX_WORKERS = 4         # each holds its own slices (~300 MB on the bench's largest cases)
_MIX = np.uint64(0xFF51AFD7ED558CCD)     # a 64-bit odd multiplier (MurmurHash3's finaliser)


def default_workers() -> int:
    """The cores this process may run on, up to MAX_WORKERS."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(MAX_WORKERS, cores))


def can_fork(context) -> bool:
    """Forked workers are wanted and allowed: not under an evaluation budget (the walk's order,
    and so what it prices, must not depend on which worker runs ahead), not inside a daemonic
    process (a pool's worker), which may not have children, and from the main thread (signals,
    by which a stop reaches the workers, are set there only)."""
    return (context.per_evaluation is None and not multiprocessing.current_process().daemon
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

    EMPTY, CLAIMED, DONE = 0, 1, 2
    PROBES = 32             # slots looked at per unit before the table counts as full

    def __init__(self, slots: int = 1 << 20):
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
                self.owner[slot], self.state[slot] = self.worker, self.CLAIMED
                return slot
            if self.keys[slot, 0] == first and self.keys[slot, 1] == second:
                if self.state[slot] == self.EMPTY:          # released by a failed worker
                    self.owner[slot], self.state[slot] = self.worker, self.CLAIMED
                return slot
        return -1

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
        """Hand out again the units `worker` claimed and did not finish."""
        with self.lock:
            self.state[(self.owner == worker) & (self.state == self.CLAIMED)] = self.EMPTY
        self.known.clear()

    def end_reached(self) -> None:
        self.reached_end[0] = 1

    def some_walk_ended(self) -> bool:
        """Whether a worker's walk has reached its end (every unit then is claimed)."""
        return bool(self.reached_end[0])


class SharedKey:
    """The best ranking key among the workers, in shared memory (the keys of one space all
    have the same length: costs, then the mapping's contents)."""

    def __init__(self, key: tuple):
        self.values = multiprocessing.get_context("fork").Array("d", len(key) + 1)  # [0]: set or not
        self.lower_to(key)

    def read(self) -> tuple | None:
        with self.values.get_lock():
            values = self.values[:]
        return tuple(values[1:]) if values[0] else None

    def lower_to(self, key: tuple) -> None:
        with self.values.get_lock():
            if not self.values[0] or key < tuple(self.values[1:]):
                self.values[1:] = list(key)
                self.values[0] = 1.0


def walk_in_parallel(setup, incumbent, workers: int, job, parts, events: list[Event]) -> tuple[bool, list[float]]:
    """Run `job(walk)` (the incumbents' search and the walk, `strategy.Joint._find_and_walk`;
    True when its walk finished) in `workers` processes, each on a walk of its own (`Walk`,
    with `setup`'s worker number and the shared `Claims` handing out the walk's units), the
    parent being worker 0. Returns whether every worker's walk ended and every unit claimed
    was walked to its end, and the bounds they left open. A worker that fails has its
    unfinished units walked by the parent (the walk of `parts` again, skipping what is done).
    `incumbent` ends as the best of all of theirs, and `events` gets the children's events."""
    from .walk import Walk
    claims, shared = Claims(), SharedKey(incumbent.key)
    context = multiprocessing.get_context("fork")
    children = []

    def setup_of(worker: int):      # the parent (worker 0) claims with `claims` itself
        return replace(setup, worker=worker, workers=workers, claims=claims.for_worker(worker) if worker else claims,
                       progress=setup.progress if worker == 0 else None)
    # set before the fork, so that a worker never meets the signal with its default action (exit)
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: setup.context.interrupt())
    for worker in range(1, workers):
        receive, send = context.Pipe(duplex=False)
        child = context.Process(target=_child, args=(setup_of(worker), incumbent, job, shared, events, send),
                                daemon=True)
        child.start()
        send.close()
        children.append((worker, child, receive))
    incumbent.share(shared)
    walk = Walk(setup_of(0), incumbent)
    try:
        complete = job(walk)
        if setup.context.interrupted:   # Ctrl-C may have reached this process alone (a kill of
            for _, child, _ in children:    # its pid, not of the group): the workers wind down too
                os.kill(child.pid, signal.SIGUSR1)
        for worker, child, receive in children:
            try:
                report = receive.recv()
            except EOFError:
                report = {"error": f"its process ended with status {child.exitcode}"}
            child.join()
            if "error" in report:       # its units are walked here, so that the result stays sound
                events.append(WorkerFailed(worker, report["error"]))
                claims.release(worker)
                complete = walk.search_parts(parts) and complete
                continue
            incumbent.merge(report["table"], report["found_at"], report["evaluated"])
            walk.open_bounds.extend(report["open_bounds"])
            events.extend(FromWorker(worker, event) for event in report["events"])
            complete = complete and report["complete"]
        # a unit claimed and not finished: its worker stopped early (its bounds are open)
        complete = complete and not claims.pending()
        incumbent.adopt()           # the best of all (from one that failed, say), as the walks pruned
    finally:
        incumbent.share(None)
        signal.signal(signal.SIGUSR1, previous)
        for _, child, _ in children:
            if child.is_alive():
                child.terminate()
    events.append(InParallel(workers))
    return complete, walk.open_bounds


def _child(setup, incumbent, job, shared, events, send) -> None:
    """A worker: its own walk of the shared tree, its best mapping and what it priced sent back."""
    from .walk import Walk
    context = setup.context
    # a first Ctrl-C (sent to the whole process group) winds this worker down as it does the
    # parent; the second aborts, as the parent does; the parent alone says so
    signal.signal(signal.SIGINT, lambda signum, frame: os._exit(130) if context.interrupted else context.interrupt())
    incumbent.share(shared)
    incumbent.restart_count()       # what this child adds, sent back
    known = len(events)
    try:
        walk = Walk(setup, incumbent)
        complete = job(walk)
        send.send({"table": incumbent.table, "found_at": incumbent.found_at, "evaluated": incumbent.evaluated,
                   "open_bounds": walk.open_bounds, "complete": complete, "events": events[known:]})
    except Exception as exc:        # reported to the parent, which walks its units itself
        send.send({"error": f"{type(exc).__name__}: {exc}"})
    finally:
        send.close()

"""The joint search on several cores: forked workers, each with its own share of the work.

Why: the walk prices children in numpy slices of a few thousand rows, where one core does all
the work (numpy does not spread such arrays over threads). On the bench's 2-core machine a
second process nearly halves the walk that proves the optimum (h100 GEMM 4096^3, optimum
given: 16.2 s on one core, 9.1 s on two).

What each does (`Joint._find_and_walk`): worker 0 has CP-SAT solve in a thread and runs the
local search, the others dive at once; each dives with its own seed (or into its own keep
parts); then each walks its own share of the tree. Every worker expands the nodes above depth
2 (few), and of the children of each depth-1 node keeps those whose parent's factor groups
and own first dim's group hash to its number (`mine`), decided before their other dims are
crossed in. The hash is of contents, not of places in a slice, so the shares cover the tree
exactly however each worker's slices are cut (by its own clock).

What they share: the best ranking key any of them has found (`SharedKey`; a key holds the whole
mapping, `objective.table_of_key`), which every worker prunes against (`Incumbent.bar`); a
subtree is dropped only when its bound is beaten by a mapping one of them holds, so the best
of the workers' mappings, ranked as exhaustive search ranks, is still the optimum when they
all finish. The parent is worker 0; each child sends back its best mapping, what it priced,
the bounds it left open and its notes, and the parent ends holding the best key of all.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import threading

import numpy as np

from .result import stops

MAX_WORKERS = 4         # each holds its own slices (~300 MB on the bench's largest cases)
_MIX = np.uint64(0xFF51AFD7ED558CCD)     # a 64-bit odd multiplier (MurmurHash3's finaliser)


def default_workers() -> int:
    """The cores this process may run on, up to MAX_WORKERS."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(MAX_WORKERS, cores))


def can_fork() -> bool:
    """Forked workers are wanted and allowed: not under an evaluation budget (the walk's order,
    and so what it prices, must not depend on which worker runs ahead), not inside a daemonic
    process (a pool's worker), which may not have children, and from the main thread (signals,
    by which a stop reaches the workers, are set there only)."""
    return (stops.per_evaluation is None and not multiprocessing.current_process().daemon
            and threading.current_thread() is threading.main_thread())


def mine(prefix: np.ndarray, worker: int, workers: int) -> np.ndarray:
    """Which of the nodes whose decided factors are the columns of `prefix` (P, N) belong to
    `worker` of `workers`: a hash of the whole column, mixed so that factors that are all
    powers of two still spread evenly."""
    weights = (np.arange(1, prefix.shape[0] + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    h = (prefix.astype(np.uint64) * weights[:, None]).sum(axis=0, dtype=np.uint64)
    h ^= h >> np.uint64(33)
    h *= _MIX
    h ^= h >> np.uint64(33)
    return (h % np.uint64(workers)).astype(np.int64) == worker


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


def walk_in_parallel(walk, workers: int, job, notes: list[str]) -> bool:
    """Run `job` (the incumbents' search and the walk, `Joint._find_and_walk`; True when its
    walk finished) in `workers` processes, the parent being worker 0, with `walk.split` telling
    each its share; True when every share was walked to the end. The parent's incumbent ends as
    the best of all of theirs, and `notes` gets the children's notes."""
    incumbent = walk.incumbent
    shared = SharedKey(incumbent.key)
    context = multiprocessing.get_context("fork")
    children = []
    # set before the fork, so that a worker never meets the signal with its default action (exit)
    previous = signal.signal(signal.SIGUSR1, _on_parent_stopped)
    for worker in range(1, workers):
        receive, send = context.Pipe(duplex=False)
        child = context.Process(target=_child, args=(walk, job, worker, workers, shared, notes, send), daemon=True)
        child.start()
        send.close()
        children.append((worker, child, receive))
    incumbent.shared, walk.split = shared, (0, workers)
    try:
        complete = job()
        if stops.interrupted:       # Ctrl-C may have reached this process alone (a kill of its
            for _, child, _ in children:    # pid, not of the group): the workers wind down too
                os.kill(child.pid, signal.SIGUSR1)
        for worker, child, receive in children:
            try:
                report = receive.recv()
            except EOFError:
                report = {"error": f"its process ended with status {child.exitcode}"}
            child.join()
            if "error" in report:       # its share is walked here, so that the result stays sound
                notes.append(f"worker {worker} failed ({report['error']}); its share was walked here")
                walk.split = (worker, workers)
                complete = job() and complete
                continue
            incumbent.merge(report["table"], report["found_at"], report["evaluated"])
            walk.open_bounds.extend(report["open_bounds"])
            notes.extend(f"worker {worker}: {note}" for note in report["notes"])
            complete = complete and report["complete"]
        incumbent.adopt()           # the best of all (from one that failed, say), as the walks pruned
    finally:
        incumbent.shared, walk.split = None, None
        signal.signal(signal.SIGUSR1, previous)
        for _, child, _ in children:
            if child.is_alive():
                child.terminate()
    notes.append(f"searched on {workers} cores, each walking its share of the tree (`parallel.py`)")
    return complete


def _child(walk, job, worker, workers, shared, notes, send) -> None:
    # a first Ctrl-C (sent to the whole process group) winds this worker down as it does the
    # parent; the parent alone says so
    signal.signal(signal.SIGINT, _on_ctrl_c)
    incumbent = walk.incumbent
    incumbent.shared, walk.split, walk.progress = shared, (worker, workers), None
    incumbent.evaluated, walk.open_bounds = 0, []      # what this child adds, sent back
    known = len(notes)
    try:
        complete = job()
        send.send({"table": incumbent.table, "found_at": incumbent.found_at, "evaluated": incumbent.evaluated,
                   "open_bounds": walk.open_bounds, "complete": complete, "notes": notes[known:]})
    except Exception as exc:        # reported to the parent, which walks the share itself
        send.send({"error": f"{type(exc).__name__}: {exc}"})
    finally:
        send.close()


def _on_parent_stopped(signum, frame) -> None:
    stops.interrupted = True


def _on_ctrl_c(signum, frame) -> None:
    if stops.interrupted:           # the second: abort, as the parent does
        os._exit(130)
    stops.interrupted = True

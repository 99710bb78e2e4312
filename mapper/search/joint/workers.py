"""The joint search's walk run by forked workers at once (`walk_in_parallel`): each walks the
units of the tree it claims first (`parallel.Claims`), all pruning against the best key any of
them holds (`parallel.SharedKey`); the parent is worker 0 and ends holding the best of all."""
from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from dataclasses import replace

from ...lifetime import die_with_parent
from ..events import Event, FromWorker, InParallel, WorkerFailed
from .parallel import Claims, SharedKey
from .synced import SyncedKey
from .walk import Walk


def walk_in_parallel(setup, incumbent, workers: int, job, parts, events: list[Event]) -> tuple[bool, list[float]]:
    """Run `job(walk)` (the incumbents' search and the walk, `strategy.Joint._find_and_walk`;
    True when its walk finished) in `workers` processes, each on a walk of its own (`Walk`,
    with `setup`'s worker number and the shared `Claims` handing out the walk's units), the
    parent being worker 0. Returns whether every worker's walk ended and every unit claimed
    was walked to its end, and the bounds they left open. A worker that fails has its
    unfinished units walked by the parent (the walk of `parts` again, skipping what is done).
    `incumbent` ends as the best of all of theirs, and `events` gets the children's events."""
    counted = setup.context.per_evaluation is not None     # a work clock: nothing may depend on timing
    shared = SyncedKey(incumbent.key, workers) if counted else SharedKey(incumbent.key)
    # on a work clock the others start late (`SyncedKey.start`), owning nothing worker 0 reached alone
    claims = Claims(fixed=workers, started=shared.started) if counted else Claims()
    view = (lambda worker, context: shared.for_worker(worker, context)) if counted else (lambda *_: shared)
    context = multiprocessing.get_context("fork")
    children = []
    ticker = _ProgressTicker(setup.progress, incumbent, workers)

    def setup_of(worker: int):      # the parent (worker 0) claims with `claims` itself; its ticker reports
        return replace(setup, worker=worker, workers=workers, claims=claims.for_worker(worker) if worker else claims,
                       progress=ticker.writer(worker))
    # set before the fork, so that a worker never meets the signal with its default action (exit)
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: setup.context.interrupt())
    for worker in range(1, workers):
        receive, send = context.Pipe(duplex=False)
        child = context.Process(target=_child, args=(setup_of(worker), incumbent, job, view, counted, events,
                                                     send, os.getpid()), daemon=True)
        child.start()
        send.close()
        children.append((worker, child, receive))
    mine = view(0, setup.context)
    incumbent.share(mine)
    walk = Walk(setup_of(0), incumbent)
    ticker.start()
    try:
        try:
            complete = job(walk)
        finally:
            _finish(mine)
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
                ticker.counts[worker] = 0       # what it priced is lost with it, as in the result
                claims.release(worker)
                complete = walk.search_parts(parts) and complete
                continue
            with ticker.lock:           # its count moves from the shared slot into the incumbent's
                incumbent.merge(report["table"], report["found_at"], report["evaluated"])
                ticker.counts[worker] = 0
            walk.add_open_bounds(report["open_bounds"])
            if report["cut"]:           # the deadline stopped it there: recorded here too
                setup.context.record_clock_stop()
            events.extend(FromWorker(worker, event) for event in report["events"])
            complete = complete and report["complete"]
        # a unit claimed and not finished: its worker stopped early (its bounds are open)
        complete = complete and not claims.pending()
        incumbent.adopt()           # the best of all (from one that failed, say), as the walks pruned
    finally:
        ticker.stop()
        incumbent.share(None)
        signal.signal(signal.SIGUSR1, previous)
        for _, child, _ in children:
            if child.is_alive():
                child.terminate()
    events.append(InParallel(workers, counted, started=not counted or bool(shared.started[0]),
                             alone=shared.join_epochs * shared.rows if counted else 0))
    return complete, walk.open_bounds


def _finish(shared) -> None:
    """This worker's walk has ended (`SyncedKey.finish`: the others no longer wait for it)."""
    if hasattr(shared, "finish"):
        shared.finish()


def _child(setup, incumbent, job, view, late: bool, events, send, parent_pid: int) -> None:
    """A worker: its own walk of the shared tree, its best mapping and what it priced sent back.
    `late` (a work clock): it waits to start until worker 0 has walked alone for a while, and
    does not walk at all where worker 0's walk ends first. It dies with the parent (a SIGKILL
    of the parent leaves no worker behind)."""
    die_with_parent(parent_pid)
    context = setup.context
    # a first Ctrl-C (sent to the whole process group) winds this worker down as it does the
    # parent; the second aborts, as the parent does; the parent alone says so
    signal.signal(signal.SIGINT, lambda signum, frame: os._exit(130) if context.interrupted else context.interrupt())
    shared = view(setup.worker, context)
    incumbent.share(shared)
    incumbent.restart_count()       # what this child adds, sent back
    known = len(events)
    try:
        walk = Walk(setup, incumbent) if not late or shared.start() else None
        complete = True if walk is None else job(walk)     # not started: worker 0 walked every unit
        _finish(shared)
        send.send({"table": incumbent.table, "found_at": incumbent.found_at, "evaluated": incumbent.evaluated,
                   "open_bounds": [] if walk is None else walk.open_bounds, "complete": complete,
                   "events": events[known:], "cut": context.stopped_by_clock})
    except Exception as exc:        # reported to the parent, which walks its units itself
        _finish(shared)
        send.send({"error": f"{type(exc).__name__}: {exc}"})
    finally:
        send.close()


class _ProgressTicker:
    """The search's progress on several cores, reported by the parent: every worker's count of
    mappings priced, through shared memory (`counts`, one slot each, written by the workers'
    walks), summed with the parent's own a few times a second, from a thread, so that the bar
    moves while the parent searches for incumbents and while it waits for the workers."""

    PERIOD = 0.25       # seconds between reports

    def __init__(self, progress, incumbent, workers: int):
        self.progress, self.incumbent = progress, incumbent
        self.counts = multiprocessing.get_context("fork").RawArray("d", workers)
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = None

    def writer(self, worker: int):
        """A worker's walk's progress callback: its count into its slot (the parent's: none, its
        own count is the incumbent's, read by the ticker)."""
        if self.progress is None or worker == 0:
            return None

        def write(evaluated: int) -> None:
            self.counts[worker] = evaluated
        return write

    def total(self) -> int:
        """Mappings priced by all the workers so far (the children's not yet merged included)."""
        with self.lock:
            return self.incumbent.evaluated + int(sum(self.counts[1:]))

    def start(self) -> None:
        if self.progress is None:
            return
        self.thread = threading.Thread(target=self._run, name="progress", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopped.wait(self.PERIOD):
            self.progress(self.total())

    def stop(self) -> None:
        """No more reports from the thread; a last one of the total (the workers' counts merged)."""
        if self.thread is None:
            return
        self.stopped.set()
        self.thread.join()
        self.progress(self.total())

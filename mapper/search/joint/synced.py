"""The best key of the other workers of a walk on several cores, exchanged at counted points
(`SyncedKey`), so that a search on a work clock returns the same on one core or several,
loaded or quiet.

Why: the workers prune against the best mapping any of them holds. Read whenever a worker
looks (`parallel.SharedKey`), what a worker sees depends on how far the others have got by
then, so what it prunes, prices and finds (and the count, the events, an unproven result)
depends on the machine's load. Here every worker publishes its best key the moment its own
count of mappings priced passes each multiple of `rows` (an epoch; `SearchContext.watch_count`
calls it as each pricing is counted), and takes the others' keys of that same epoch, waiting
for them if they are behind; a worker that has ended counts with its final key for every later
epoch. Each worker's count, and so every key it publishes, depends only on
the keys it took before: by induction on the epochs, every worker sees the same keys on every
run. The cost is the waiting: a worker ahead by an epoch waits for the others (a step that
prices nothing for long, such as CP-SAT's solve, holds them up to its end).

The others start late (`start`): worker 0 walks alone for its first `JOIN_EPOCHS` epochs after
the fork, and only then do they walk beside it, from its key of that epoch. Why: most proofs
end sooner (pe-array's GEMMs in 5k to 110k mappings, one core), and a second walk started at
once cost 20-40% more CPU for the same seconds (docs/RESULTS.md); a long walk still gets both
cores. Which epoch they start at is a count, so what they prune is still the same on every run;
where worker 0's walk ends first, they never walk.

The wall-clock deadline still stops: a worker waiting past it stops waiting, and the search
records that the clock cut it short (`SearchContext.stopped_by_clock`).
"""
from __future__ import annotations

import copy
import multiprocessing
import time

import numpy as np

SYNC_ROWS = 50_000      # mappings priced by a worker between two exchanges of the best keys
JOIN_EPOCHS = 4         # epochs worker 0 walks alone before the others start (200k mappings)
WAIT_S = 0.0005         # wall seconds between two looks at the others while waiting
START_WAIT_S = 0.005    # the same for a worker waiting to start (most never do)


class SyncedKey:
    """The `SharedKey` interface (`read`, `lower_to`) with the others' keys taken at counted
    epochs; `for_worker` gives each worker its view, `start` holds another worker back until
    worker 0 has walked alone long enough, `finish` says a walk has ended."""

    def __init__(self, key: tuple, workers: int, rows: int | None = None, join_epochs: int | None = None):
        context = multiprocessing.get_context("fork")
        self.workers, self.rows, self.width = workers, rows or SYNC_ROWS, len(key)
        # at least one: worker 0 marks the start at an exchange of its own, the first at epoch 1
        self.join_epochs = max(1, JOIN_EPOCHS if join_epochs is None else join_epochs)
        self.lock = context.Lock()
        # per worker: the key published for the last two epochs (by epoch's parity), the last
        # epoch published, whether it ended and its final key
        self.published = np.frombuffer(context.RawArray("d", workers * 2 * len(key)), np.float64).reshape(
            workers, 2, len(key))
        self.epoch_of = np.frombuffer(context.RawArray("q", workers), np.int64)
        self.ended = np.frombuffer(context.RawArray("b", workers), np.int8)
        self.final = np.frombuffer(context.RawArray("d", workers * len(key)), np.float64).reshape(workers, len(key))
        # the epoch at which the others started (0: not yet), written by worker 0 alone
        self.started = np.frombuffer(context.RawArray("q", 1), np.int64)
        self.worker, self.context, self.epoch = 0, None, 0
        self.base = 0                       # this worker's count at its epoch 0
        self.own: tuple = tuple(key)       # this worker's best key
        self.seen: tuple | None = None     # the others' best, as of the last epoch taken

    def for_worker(self, worker: int, context) -> "SyncedKey":
        """Worker `worker`'s view, counting on `context`'s tally (its own process's), which
        calls it to exchange as soon as a count passes an epoch's mark (until `finish`). Its
        epochs count from now (the fork: every worker's count is the same here)."""
        view = copy.copy(self)
        view.worker, view.context, view.base = worker, context, context.priced
        context.watch_count(view.read)
        return view

    def lower_to(self, key: tuple) -> None:
        if key < self.own:
            self.own = key

    def read(self) -> tuple | None:
        """The others' best key as of the last epoch this worker's count has passed."""
        context = self.context
        while (context is not None and not self.ended[self.worker]
               and context.priced - self.base >= (self.epoch + 1) * self.rows):
            self.epoch += 1
            self._exchange()
        return self.seen

    def peek(self) -> tuple | None:
        """The others' best as of the last exchange, taking part in none (a report's look)."""
        return self.seen

    def start(self) -> bool:
        """Another worker: wait until worker 0 has walked alone for `join_epochs` epochs, then
        walk from its key of that epoch, this worker's epochs following on from it (True); or,
        where worker 0 ended first, never walk (False: it walked every unit itself)."""
        while not self.started[0]:
            if self.ended[0]:
                return False
            time.sleep(START_WAIT_S)
        epoch = int(self.started[0])
        self.epoch, self.base = epoch, self.context.priced - epoch * self.rows
        self.seen = tuple(self.published[0, epoch % 2].tolist())
        return True

    def finish(self) -> None:
        """This worker's walk has ended: its final key stands for every later epoch."""
        if self.context is not None:
            self.context.watch_count(None)
        with self.lock:
            self.final[self.worker] = self.own
            self.ended[self.worker] = 1

    def _exchange(self) -> None:
        epoch, me = self.epoch, self.worker
        if me == 0 and epoch <= self.join_epochs:       # walking alone
            if epoch == self.join_epochs:   # the others start from this epoch's key
                with self.lock:
                    self.published[me, epoch % 2] = self.own
                    self.epoch_of[me] = epoch
                    self.started[0] = epoch
            return
        with self.lock:
            self.published[me, epoch % 2] = self.own
            self.epoch_of[me] = epoch
        waiting = [w for w in range(self.workers) if w != me]
        keys = []
        while waiting:
            with self.lock:
                for w in list(waiting):
                    if self.epoch_of[w] >= epoch:       # at most one ahead: its slot is still this epoch's
                        keys.append(tuple(self.published[w, epoch % 2].tolist()))
                    elif self.ended[w]:     # it ended before its count reached this epoch's
                        keys.append(tuple(self.final[w].tolist()))
                    else:
                        continue
                    waiting.remove(w)
            if waiting:
                if self.context.interrupted or self.context.past_deadline():
                    return          # stopped: the keys are no longer exchanged (recorded)
                time.sleep(WAIT_S)
        best = min(keys) if keys else None
        if best is not None and (self.seen is None or best < self.seen):
            self.seen = best

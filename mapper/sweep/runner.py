"""Running a sweep's points: in this process, on local processes, or on a Dask cluster.

Whichever way, the parent keeps at most as many points in flight as there are workers, hands
each joint point the best finished mapping of its own shape (greedy's, say) and of the nearest
finished neighbouring shapes (rescaled to its shape), and
writes each finished point to the store itself, one transaction per point. Finished points
(same input hash) are skipped, so a killed sweep resumes where it stopped.
"""
from __future__ import annotations

import math
import os
import sys
import time
from collections import defaultdict
from concurrent.futures import FIRST_COMPLETED, Future
from dataclasses import dataclass, field, replace

from ..load import mapping_from_dict
from ..mapping import Mapping
from ..rescale import rescale
from ..units import Where
from .execute import Task, run_task
from .points import Point
from .store import Store

CONNECT_SECONDS = 10      # a Dask scheduler that has not answered by then is unreachable
NEIGHBOURS = 3            # mappings handed to a joint point besides the nearest one (other shapes, other archs)
REDO = ("failed", "timeout")      # statuses `retry_failed` searches again


@dataclass
class SweepRun:
    points: list[Point]                      # every point of the sweep (shared keys included)
    computed: list[dict] = field(default_factory=list)   # rows searched by this run
    skipped: int = 0                         # unique points already in the store
    seconds: float = 0.0
    workers: int = 1
    where: str = "this process"

    @property
    def failures(self) -> int:
        return sum(row["status"] != "ok" for row in self.computed)


class _Inline:
    """jobs = 1: each point runs here, when it is submitted."""
    slots = 1
    where = "this process"

    def submit(self, fn, task):
        future = Future()
        try:
            future.set_result(fn(task))
        except BaseException as exc:        # run_task records errors itself; this is a last resort
            future.set_exception(exc)
        return future

    def wait(self, pending):
        return set(pending), set()

    def close(self):
        pass


class _Processes:
    def __init__(self, jobs: int):
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        from ..lifetime import die_with_parent
        # spawn: no forking of a parent that holds threads (tqdm) and an open SQLite handle;
        # each worker dies with this process, even when it is killed with SIGKILL
        self.pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=die_with_parent, initargs=(os.getpid(),))
        self.slots = jobs
        self.where = f"{jobs} local processes"

    def submit(self, fn, task):
        return self.pool.submit(fn, task)

    def wait(self, pending):
        from concurrent.futures import wait
        done, rest = wait(pending, return_when=FIRST_COMPLETED)
        return set(done), set(rest)

    def close(self):
        self.pool.shutdown(cancel_futures=True)


class _Dask:
    def __init__(self, scheduler):
        try:
            from distributed import Client
        except ImportError:
            from ..errors import MapperError
            raise MapperError("--scheduler needs dask.distributed: pip install 'mapper[dist]'") from None
        try:
            self.client = Client(scheduler, timeout=f"{CONNECT_SECONDS}s")
        except (OSError, ValueError, TypeError) as exc:     # unreachable (a timeout is an OSError), or no address
            from ..errors import MapperError
            raise MapperError(f"--scheduler {scheduler}: cannot reach the Dask scheduler within "
                              f"{CONNECT_SECONDS} s ({type(exc).__name__}: {exc})") from None
        threads = sum(self.client.nthreads().values())
        self.slots = max(1, threads)
        self.where = f"Dask cluster {self.client.scheduler.address} ({threads} worker threads)"

    def submit(self, fn, task):
        return self.client.submit(fn, task, pure=False)

    def wait(self, pending):
        from distributed import wait
        done, rest = wait(list(pending), return_when="FIRST_COMPLETED")
        return set(done), set(rest)

    def close(self):
        self.client.close()


def _is_terminal(stream) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def default_jobs() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def make_executor(jobs: int | None, scheduler, tasks: int):
    """Where `tasks` tasks run: a Dask cluster, `jobs` local processes (default: the cores; no
    more than there are tasks, so that none idles) or, for one, this process. Each has
    `submit(fn, task)`, `wait(pending)` and `close()`."""
    if scheduler is not None:
        return _Dask(scheduler)
    jobs = min(jobs or default_jobs(), tasks)
    return _Processes(jobs) if jobs > 1 else _Inline()


def run_points(points: list[Point], store: Store, jobs: int | None = None, scheduler=None,
               warm_start: bool = True, progress: bool = True, retry_failed: bool = False) -> SweepRun:
    """Search every point whose key is not in the store yet; returns what was done."""
    started = time.perf_counter()
    unique = list({p.key: p for p in reversed(points)}.values())[::-1]    # first occurrence wins
    done_keys = {key for key, status in store.statuses().items() if not (retry_failed and status in REDO)}
    todo = [p for p in unique if p.key not in done_keys]
    # joint points last and small shapes first, so more of them find finished neighbours
    todo.sort(key=lambda p: (p.strategy == "joint", p.family if p.strategy == "joint" else "", p.workload.macs))
    run = SweepRun(points=points, skipped=len(unique) - len(todo))
    if not todo:
        run.seconds = time.perf_counter() - started
        return run
    executor = make_executor(jobs, scheduler, len(todo))
    run.workers, run.where = executor.slots, executor.where
    neighbours = _Neighbours(store) if warm_start else None
    from tqdm import tqdm
    # on a terminal only: a log or a pipe that captures stderr would keep every redraw
    bar = tqdm(total=len(todo), desc="sweep", unit=" points", file=sys.stderr, dynamic_ncols=True,
               disable=not progress or not _is_terminal(sys.stderr))
    pending: set = set()
    queue = list(todo)
    # a joint point waits (while other work is ready) for the other strategies' points of its
    # shape, so that it starts from their mappings and never ends worse than they did
    unfinished = {p.key for p in todo}
    others = defaultdict(set)
    for p in todo:
        if p.strategy != "joint":
            others[(p.family, p.arch.name, p.workload.sizes)].add(p.key)

    def ready(p: Point) -> bool:
        return p.strategy != "joint" or not (others[(p.family, p.arch.name, p.workload.sizes)] & unfinished)

    try:
        while queue or pending:
            while queue and len(pending) < executor.slots:
                index = next((i for i, p in enumerate(queue) if ready(p)), None)
                if index is None and pending:
                    break
                point = queue.pop(index or 0)
                incumbents = neighbours.for_point(point) if neighbours and point.strategy == "joint" else ()
                # several points at once already fill the cores: each search then takes one
                pending.add(executor.submit(run_task, Task(point, incumbents, cores=1 if executor.slots > 1 else None)))
            done, pending = executor.wait(pending)
            for future in done:
                row = future.result()
                unfinished.discard(row["key"])
                store.write(row)
                run.computed.append(row)
                if neighbours:
                    neighbours.add(row)
                bar.update(1)
                bar.set_postfix(failed=run.failures, refresh=False)
    finally:
        bar.close()
        executor.close()
    run.seconds = time.perf_counter() - started
    return run


class _Neighbours:
    """Finished points by warm-start family, read from the store once per family."""

    def __init__(self, store: Store):
        self.store = store
        self.by_family: dict[str, list[dict]] = {}

    def _rows(self, family: str) -> list[dict]:
        if family not in self.by_family:
            self.by_family[family] = self.store.family_rows(family)
        return self.by_family[family]

    def add(self, row: dict) -> None:
        if row["status"] == "ok" and row["family"] in self.by_family:
            self.by_family[row["family"]].append(row)

    def for_point(self, point: Point) -> tuple[Mapping, ...]:
        """The best finished mapping of each nearest (shape, architecture) of the point's
        family, rescaled to the point's shape: the nearest shapes first (log distance over the
        sizes), the point's own architecture before the others of its grid, and among those the
        latest finished first (a grid runs in its order, so the latest is the nearest value);
        those that do not carry over are left out."""
        best: dict[tuple, dict] = {}
        for row in self._rows(point.family):
            place = (tuple(row["sizes"][d] for d in point.workload.dims), row["arch"])
            if row["key"] != point.key and (place not in best or row["score"] < best[place]["score"]):
                best.pop(place, None)           # re-inserted: the dict's order is the order of finishing
                best[place] = row
        latest = {place: i for i, place in enumerate(best)}

        def nearness(place):
            sizes, arch = place
            return (sum(abs(math.log(a / b)) for a, b in zip(sizes, point.workload.sizes)),
                    arch != point.arch.name, -latest[place])

        out = []
        for sizes, arch in sorted(best, key=nearness):
            source = replace(point.workload, sizes=sizes)
            try:
                mapping = mapping_from_dict(best[sizes, arch]["mapping"], point.arch, source, Where("store"))
            except Exception:        # a row from an older layout: not worth failing the point for
                continue
            carried = rescale(mapping, source, point.workload)
            if carried is not None:
                out.append(carried)
            if len(out) == NEIGHBOURS + 1:
                break
        return tuple(out)

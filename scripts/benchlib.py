"""What the benchmark scripts share: one strategy run, timed, its peak memory traced."""
from __future__ import annotations

import time
import tracemalloc


def run_measured(strategy, space, objective):
    """(result, error text, seconds, peak MiB); an exception becomes the error text, so that a
    table goes on past a case that fails."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        result, error = strategy.run(space, objective), None
    except Exception as exc:
        result, error = None, f"{type(exc).__name__}: {str(exc)[:90]}"
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return result, error, seconds, peak


def joint_variants(time_limit: float, ablation: bool) -> list:
    """(name, strategy): the joint search, and with `ablation` the same without CP-SAT
    proposals, without the local search (and its polish of new incumbents), and without both."""
    from mapper.search import Joint
    out = [("joint", Joint(time_limit=time_limit))]
    if ablation:
        out += [("no-cpsat", Joint(time_limit=time_limit, cpsat_seconds=0)),
                ("no-local", Joint(time_limit=time_limit, local_search=False)),
                ("neither", Joint(time_limit=time_limit, cpsat_seconds=0, local_search=False))]
    return out

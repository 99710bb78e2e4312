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

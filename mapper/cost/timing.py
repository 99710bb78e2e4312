"""How long one instance of a level needs, from the bytes it reads and writes.

A level has up to three bandwidth limits (bytes per cycle per instance): `bandwidth`, shared
by reads and writes (fills and updates), and `read_bandwidth` / `write_bandwidth` for each
direction alone; an unlimited one costs nothing. Two rules (arch `model: {cycles: ...}`):

- `stage_aware` (this project's default): under each limit, traffic a buffered stage hides
  overlaps compute, the rest (`exposed`: a level without a second stage waits for its fills,
  a child without one waits for what it draws) adds to it: max(compute, hidden / bw) +
  exposed / bw. The level needs the longest of its limits.
- `timeloop` (Timeloop's rule): all traffic overlaps compute, whatever the buffering: the
  level needs max(compute, ceil(traffic / bw)) over its limits.

Written once with numpy operations so that the scalar path (floats) and the vectorised path
(arrays over mappings) and the search's lower bounds compute the same formula.
"""
from __future__ import annotations

import math

import numpy as np

RULES = ("stage_aware", "timeloop")


def level_time(level, rule: str, compute, read, write, read_exposed, write_exposed,
               latency_hidden=0.0, latency_exposed=0.0):
    """Cycles one instance of `level` needs: `compute` cycles of MACs, `read` / `write` bytes
    moved per instance, of which `read_exposed` / `write_exposed` are not hidden by buffering;
    with a declared latency (docs/COST_MODEL.md), `latency_hidden` is the Little's-law floor
    on its overlapped time and `latency_exposed` the waits nothing hides (both 0 without)."""
    limits = ((read + write, read_exposed + write_exposed, level.bandwidth),
              (read, read_exposed, level.read_bandwidth),
              (write, write_exposed, level.write_bandwidth))
    time = np.maximum(compute, latency_hidden)
    for moved, exposed, bandwidth in limits:
        if math.isinf(bandwidth):
            continue
        if rule == "timeloop":
            time = np.maximum(time, np.ceil(moved / bandwidth))
        else:
            overlapped = np.maximum(np.maximum(compute, (moved - exposed) / bandwidth), latency_hidden)
            time = np.maximum(time, overlapped + exposed / bandwidth)
    return time + latency_exposed


def total_rate(level) -> float:
    """The most bytes per cycle one instance can move in all (reads and writes together):
    traffic split R + W takes at least max(R / read, W / write) >= (R + W) / (read + write)."""
    return min(level.bandwidth, level.read_bandwidth + level.write_bandwidth)

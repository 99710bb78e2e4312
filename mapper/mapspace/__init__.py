"""The mapspace: every legal mapping of a workload onto an architecture, as numpy tables.

A mapping is a choice, per dim, of an ordered factorisation of its extent over the *slots*
(level, temporal / spatial x / spatial y), plus per level a loop order, a keep set and a
buffering depth. The space is the product of these choices; it is never listed as objects:
- per-dim factorisation tables are small (thousands of rows) and filtered by the preset's
  bounds and by divisibility down to the native operation shape;
- loop orders are the classes of `orders.order_classes` for the level's non-unit dims;
- sizes come in closed form from per-dim counts grouped by which levels have non-unit loops
  (the only thing the number of loop orders depends on), never by listing the cross product;
  the sum over those groups is a dynamic programme whose state keeps per level only what the
  level's number of orders depends on, with a cap on its work: past the cap (deep hierarchies
  of many-dim workloads with order constraints) the size is an unbiased sampled estimate;
- what couples dims (spatial fanout, capacity, GPU occupancy) is checked on batches of the
  cross product, vectorised; `funnel()` counts exactly when the cross product is small enough
  and estimates by uniform sampling otherwise; it names every count it estimated, and its work
  is bounded whatever the space (docs/RESULTS.md).

`Mapspace` is a frozen value, checked once when made; what is done with it is free functions
taking it, one module per job:
- `space`: the value itself, the slots, padded extents (`factors.padded_extents`), keep/stage
  choices per level, the per-dim tables, and its parts (`Mapspace.part`: one keep vector);
- `tables`: per-dim factorisation tables, pruned by the preset's bounds and divisibility;
- `order_tables`: loop-order classes per level and their counts;
- `pruning`: the coupled checks (fanout, capacity, occupancy);
- `sampling`: batches of the cross product, full enumeration and uniform sampling;
- `counting`: closed-form sizes and the funnel (`Funnel`);
- `infeasible`: why nothing fits (`require_nonempty`).
"""
from ..factors import padded_extents      # where bind finds it too (no bind -> mapspace -> bind circle)
from . import counting, infeasible, order_tables, pruning, sampling, tables
from .common import SPATIAL_X, SPATIAL_Y, STEPS, TEMPORAL, LevelChoices
from .counting import MAX_EXACT_TERMS, PATTERN_SAMPLES, Funnel
from .space import Mapspace

__all__ = ["Mapspace", "Funnel", "LevelChoices", "TEMPORAL", "SPATIAL_X", "SPATIAL_Y", "STEPS",
           "MAX_EXACT_TERMS", "PATTERN_SAMPLES", "padded_extents",
           "counting", "infeasible", "order_tables", "pruning", "sampling", "tables"]

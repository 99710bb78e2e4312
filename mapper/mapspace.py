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
  is bounded whatever the space (well under a second on a 6-level, 7-dim convolution).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .constraints import ROLES, Constraints
from .errors import InfeasibleError, SpecError
from .bind import check_together
from .factors import enumerate_factorizations, smooth_numbers
from .mapping import MappingTable
from .cost.occupancy import blocks_per_sm, gpu_levels
from .orders import is_stationary, order_classes, signature
from .spec import Arch, Workload

TEMPORAL, SPATIAL_X, SPATIAL_Y = 0, 1, 2
STEPS = ("constraints", "divisibility", "fanout", "capacity", "occupancy")


MAX_EXACT_TERMS = 1_000_000     # most terms one dim may combine when a size is summed exactly
PATTERN_SAMPLES = 100_000       # loop-pattern draws per estimated size


@dataclass
class Funnel:
    """Mapspace size before and after each pruning step. `estimated` names the counts that are
    estimates ("raw" for `size`, else step names); `samples` is the number of uniform draws the
    coupled steps (fanout, capacity, occupancy) were estimated from, when they were."""

    size: int
    after: dict[str, float] = field(default_factory=dict)
    estimated: tuple[str, ...] = ()
    samples: int = 0

    @property
    def exact(self) -> bool:
        return not self.estimated

    def to_json(self) -> dict:
        return {"size": self.size, "after": dict(self.after), "exact": self.exact,
                **({"estimated": list(self.estimated), "samples": self.samples} if not self.exact else {})}


@dataclass(frozen=True)
class LevelChoices:
    """What may vary at one level besides factors: keep sets (tensor index tuples) and stages."""

    keeps: tuple[tuple[int, ...], ...]
    stages: tuple[int, ...]


# what `Mapspace.with_keeps` shares between a space and its parts: nothing here depends on keeps
_KEEP_FREE = ("arch", "workload", "constraints", "n_levels", "n_dims", "level_constraints", "slots",
              "extents", "_tables", "gpu_levels", "_order_counts_constrained", "_order_array_cache")


class Mapspace:
    """All legal mappings of `workload` on `arch` under `constraints`.

    Invariant: every table row it yields passes `cost.evaluate_many(...).valid` and its
    constraints; every valid mapping satisfying the constraints is yielded (tests check both
    on small cases by brute force)."""

    stop = None     # optional callable: once it returns True, counts fall back to estimates

    def __init__(self, arch: Arch, workload: Workload, constraints: Constraints | None = None):
        self.arch, self.workload = arch, workload
        self.constraints = constraints or Constraints()
        self.n_levels, self.n_dims = len(arch.levels), len(workload.dims)
        check_together(arch, workload, self.constraints)     # names across the files, sizes
        self.level_constraints = [self.constraints.for_level(arch.level_names, lv)
                                  for lv in range(self.n_levels)]

    # ------------------------------------------------------------------ structure

    @cached_property
    def slots(self) -> list[tuple[int, int]]:
        """(level, kind) slots a dim's factors may go to; spatial only where there is fanout."""
        out = [(lv, TEMPORAL) for lv in range(self.n_levels)]
        for lv in range(self.n_levels):
            fx, fy = self.arch.fanout(lv)
            if fx > 1:
                out.append((lv, SPATIAL_X))
            if fy > 1:
                out.append((lv, SPATIAL_Y))
        return out

    @cached_property
    def extents(self) -> list[tuple[int, ...]]:
        """Per dim, the extents it may be padded to (just its size with perfect factors)."""
        return [padded_extents(size, self.constraints.max_padding) if self.constraints.imperfect
                else (size,) for size in self.workload.sizes]

    @cached_property
    def choices(self) -> list[LevelChoices]:
        """Keep sets and stages each level may take under the constraints."""
        tensors = self.workload.tensors
        out = []
        for lv, (level, lc) in enumerate(zip(self.arch.levels, self.level_constraints)):
            allowed = tuple(t for t, tensor in enumerate(tensors) if level.may_keep(tensor.name))
            if lv == 0:
                keeps = (tuple(range(len(tensors))),)
            elif lc.keep is not None:
                keeps = (tuple(self._tensor_index(name, lv, "keep") for name in lc.keep),)
            elif lc.bypass:
                keeps = tuple(c for r in range(len(allowed) + 1) for c in itertools.combinations(allowed, r))
            else:
                keeps = (allowed,)
            stages = tuple(s for s in (lc.stages or range(1, level.max_stages + 1)) if s <= level.max_stages)
            if lv == 0:     # the outermost level is never filled: buffering it changes nothing
                stages = (1,)
            if not stages:
                raise InfeasibleError(f"level {level.name}: no allowed stage count within max_stages "
                                      f"{level.max_stages} (constraints allow {lc.stages})")
            out.append(LevelChoices(keeps, stages))
        return out

    def with_keeps(self, picks: tuple[int, ...]) -> "Mapspace":
        """The part of this space where level lv keeps its option `picks[lv]`: the parts over
        every pick vector cover the space exactly, one keep vector per mapping. What does not
        depend on keeps (factor tables, order classes) is shared, not rebuilt."""
        self.dim_tables                                     # build the shared tables once
        self.__dict__.setdefault("_order_array_cache", {})
        part = Mapspace.__new__(Mapspace)
        part.__dict__.update({k: v for k, v in self.__dict__.items() if k in _KEEP_FREE})
        part.__dict__["choices"] = [LevelChoices((c.keeps[i],), c.stages) for c, i in zip(self.choices, picks)]
        return part

    def _tensor_index(self, name: str, lv: int, key: str) -> int:
        names = [t.name for t in self.workload.tensors]
        if name in ROLES:
            inputs = [i for i, t in enumerate(self.workload.tensors) if not t.is_output]
            return {"output": self.workload.output, "input": inputs[0],
                    "weight": inputs[min(1, len(inputs) - 1)]}[name]
        if name not in names:
            raise SpecError(f"mapspace {self.constraints.name}", f"levels.{self.arch.levels[lv].name}.{key}",
                            f"no tensor {name!r} (tensors: {', '.join(names)}; roles: {', '.join(ROLES)})")
        return names.index(name)

    def _dim_index(self, name: str, lv: int, key: str) -> int:
        if name not in self.workload.dims:
            raise SpecError(f"mapspace {self.constraints.name}", f"levels.{self.arch.levels[lv].name}.{key}",
                            f"no dim {name!r} (dims: {', '.join(self.workload.dims)})")
        return self.workload.dims.index(name)

    # ------------------------------------------------------------------ per-dim tables

    def _dim_rows(self, d: int) -> np.ndarray:
        """Every ordered factorisation of dim d's allowed extents over the slots, (M, K)."""
        return np.concatenate([enumerate_factorizations(e, len(self.slots)) for e in self.extents[d]])

    def level_view(self, rows: np.ndarray):
        """Temporal factor, spatial factor and tile per level for per-dim rows: three (M, L)."""
        m = rows.shape[0]
        temporal = np.ones((m, self.n_levels), np.int64)
        spatial = np.ones((m, self.n_levels), np.int64)
        for k, (lv, kind) in enumerate(self.slots):
            (temporal if kind == TEMPORAL else spatial)[:, lv] *= rows[:, k]
        full = temporal * spatial
        tile = np.cumprod(full[:, ::-1], axis=1)[:, ::-1]
        return temporal, spatial, tile

    def constraint_mask(self, d: int, rows: np.ndarray) -> np.ndarray:
        temporal, spatial, tile = self.level_view(rows)
        name = self.workload.dims[d]
        ok = np.ones(rows.shape[0], bool)
        for lv, lc in enumerate(self.level_constraints):
            for key, values, ranges in (("temporal", temporal, lc.temporal), ("spatial", spatial, lc.spatial),
                                        ("tile", tile, lc.tile)):
                for dim_name, rng in ranges:
                    self._dim_index(dim_name, lv, key)
                    if dim_name == name:
                        ok &= rng.admits(values[:, lv])
            for key, kind, ranges in (("spatial_x", SPATIAL_X, lc.spatial_x), ("spatial_y", SPATIAL_Y, lc.spatial_y)):
                for dim_name, rng in ranges:
                    self._dim_index(dim_name, lv, key)
                    if dim_name == name:
                        # the factor on this one axis (1 where the level does not fan out along it)
                        along = np.ones(rows.shape[0], np.int64)
                        for k, slot in enumerate(self.slots):
                            if slot == (lv, kind):
                                along = rows[:, k]
                        ok &= rng.admits(along)
        return ok

    def divisibility_mask(self, d: int, rows: np.ndarray) -> np.ndarray:
        """The innermost tile is a multiple of the native op shape along d; a dim smaller than
        the native size (decode's m = 1) is taken whole, the unit padding it internally."""
        native = dict(self.arch.compute.native_shape)
        name = self.workload.dims[d]
        if not self.constraints.align_to_native or native.get(name, 1) == 1:
            return np.ones(rows.shape[0], bool)
        tile = self.level_view(rows)[2][:, -1]
        extent = rows.prod(axis=1)
        return (tile % native[name] == 0) | ((tile == extent) & (extent < native[name]))

    @cached_property
    def _tables(self) -> dict[str, list[np.ndarray]]:
        raw = [self._dim_rows(d) for d in range(self.n_dims)]
        constrained = [r[self.constraint_mask(d, r)] for d, r in enumerate(raw)]
        divisible = [r[self.divisibility_mask(d, r)] for d, r in enumerate(constrained)]
        return {"raw": raw, "constraints": constrained, "divisibility": divisible}

    @property
    def dim_tables(self) -> list[np.ndarray]:
        """Per dim, the factorisation rows that survive the per-dim pruning, (M_d, K)."""
        return self._tables["divisibility"]

    # ------------------------------------------------------------------ orders

    def orders_for(self, lv: int, dims: frozenset[int], constrained: bool = True) -> tuple[tuple[int, ...], ...]:
        """Order classes at level lv for its non-unit dims, filtered by the level's constraints."""
        classes = order_classes(self.workload, dims)
        lc = self.level_constraints[lv]
        if not constrained:
            return classes
        if lc.order is not None:
            fixed = tuple(self._dim_index(n, lv, "order") for n in lc.order)
            if sorted(fixed) != list(range(self.n_dims)):
                raise SpecError(f"mapspace {self.constraints.name}", f"levels.{self.arch.levels[lv].name}.order",
                                f"expected every dim once ({', '.join(self.workload.dims)})")
            return (tuple(d for d in fixed if d in dims),)
        if lc.innermost_order is not None:
            classes = self._with_innermost(lv, dims, lc.innermost_order)
        if lc.stationary is not None:
            t = self._tensor_index(lc.stationary, lv, "stationary")
            classes = tuple(o for o in classes if is_stationary(self.workload, o, t))
        if lc.forbid:
            # an order is forbidden when it behaves like a listed one on these non-unit dims
            banned = {signature(self.workload, tuple(d for d in (self._dim_index(n, lv, "forbid") for n in order)
                                                     if d in dims)) for order in lc.forbid}
            classes = tuple(o for o in classes if signature(self.workload, o) not in banned)
        return classes

    def _with_innermost(self, lv: int, dims: frozenset[int], names: tuple[str, ...]) -> tuple[tuple[int, ...], ...]:
        """One order per class among the orders whose innermost loops are the non-unit dims of
        `names`, in that order (a unit loop may sit anywhere: it changes nothing); the other
        dims in any order outside them. A class is kept when any of its members qualifies."""
        tail = tuple(d for d in (self._dim_index(n, lv, "innermost_order") for n in names) if d in dims)
        free = sorted(dims - set(tail))
        seen, out = set(), []
        for head in itertools.permutations(free):
            order = head + tail
            key = signature(self.workload, order)
            if key not in seen:
                seen.add(key)
                out.append(order)
        return tuple(out)

    def _order_counts(self, constrained: bool) -> list[np.ndarray]:
        """counts[lv][mask]: number of order classes at lv for the set of non-unit dims `mask`.
        Cached per order rule: levels without order constraints share one table, so a deep
        hierarchy costs no more than a shallow one."""
        cache = self.__dict__.setdefault("_order_count_cache", {})
        out = []
        for lv, lc in enumerate(self.level_constraints):
            rule = (lc.order, lc.innermost_order, lc.stationary, lc.forbid) if constrained else None
            if rule == (None, None, None, ()):
                rule = None                 # no order constraint: the level sees every class
            if rule not in cache:
                cache[rule] = self._order_count_table(lv, constrained=rule is not None)
            out.append(cache[rule])
        return out

    def _order_count_table(self, lv: int, constrained: bool) -> np.ndarray:
        masks = np.arange(1 << self.n_dims)
        lc = self.level_constraints[lv]
        sliding = any(t.has_sliding_axis for t in self.workload.tensors)
        if sliding and (not constrained or (lc.order is None and lc.innermost_order is None and not lc.forbid)):
            # a tensor with a sliding axis sees the whole order (orders.signature): every
            # permutation is a class of its own, so they can be counted without listing them
            if constrained and lc.stationary is not None:
                # stationary: the held tensor's dims (any order) outside all others (any order)
                dims = self.workload.tensors[self._tensor_index(lc.stationary, lv, "stationary")].dims
                held = sum(1 << d for d in dims)
                return np.array([math.factorial(_bits(m & held)) * math.factorial(_bits(m & ~held))
                                 for m in masks.tolist()], np.int64)
            return np.array([math.factorial(_bits(m)) for m in masks.tolist()], np.int64)
        return np.array([len(self.orders_for(lv, self._dims_of(m), constrained)) for m in masks.tolist()],
                        np.int64)

    def _dims_of(self, mask: int) -> frozenset[int]:
        return frozenset(d for d in range(self.n_dims) if mask >> d & 1)

    # ------------------------------------------------------------------ sizes

    def _closed_form_size(self, tables: list[np.ndarray], constrained: bool,
                          max_terms: int = MAX_EXACT_TERMS) -> tuple[int, bool]:
        """Number of mappings over the per-dim tables (orders, keeps, stages included), and
        whether it is exact: summed exactly (`_orders_summed`) unless that would combine more
        than `max_terms` terms at one dim, else estimated without bias from `PATTERN_SAMPLES`
        rows drawn uniformly (`_orders_sampled`)."""
        patterns, weights = zip(*(self._patterns(rows) for rows in tables))
        rows = math.prod(int(w.sum()) for w in weights)
        if rows == 0:
            return 0, True
        order_counts = self._order_counts(constrained)
        multiplicity = self._choice_multiplicity(constrained)
        summed = self._orders_summed(patterns, weights, order_counts, max_terms)
        if summed is not None:
            return summed * multiplicity, True
        mean = self._orders_sampled(patterns, weights, order_counts)
        return round(rows * mean * multiplicity), False

    def _patterns(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Distinct patterns of per-dim rows (bit lv set: a temporal factor > 1 at level lv) and
        how many rows have each. The number of loop orders depends on a row only through them."""
        temporal = self.level_view(rows)[0] > 1
        return np.unique(temporal @ (1 << np.arange(self.n_levels)), return_counts=True)

    def _level_masks(self, patterns: list[np.ndarray]) -> np.ndarray:
        """(L, N) bitmask of the non-unit dims per level, from N per-dim patterns per dim."""
        masks = np.zeros((self.n_levels, len(patterns[0])), np.int64)
        for d, pattern in enumerate(patterns):
            for lv in range(self.n_levels):
                masks[lv] |= (pattern >> lv & 1) << d
        return masks

    def _orders_summed(self, patterns, weights, order_counts, max_terms: int) -> int | None:
        """The sum over every combination of per-dim rows of the product over levels of the
        order classes, exactly; None when a step would combine more than `max_terms` terms.

        A dynamic programme over dims. Its state keeps, per level, only what that level's count
        depends on (`_count_dependence`): nothing for a fixed order, the number of non-unit
        dims where every permutation is a class (sliding windows), else the set of them. Kept
        whole, the sets would make up to 2^(levels x dims) states; counted, a 6-level 7-dim
        convolution needs a few hundred thousand."""
        n_dims = self.n_dims
        kinds = [_count_dependence(c, n_dims) for c in order_counts]
        radix = [{"none": 1, "size": n_dims + 1, "set": 1 << n_dims}[k] for k in kinds]
        if math.prod(radix) >= 2**62:
            return None
        place = [math.prod(radix[:lv]) for lv in range(self.n_levels)]
        rows = math.prod(int(w.sum()) for w in weights)
        keys = np.zeros(1, np.int64)
        values = np.ones(1, np.int64 if rows < 2**62 else object)  # partial sums never exceed `rows`
        for d in sorted(range(n_dims), key=lambda d: -len(patterns[d])):   # few states early
            if len(keys) * len(patterns[d]) > max_terms:
                return None
            step = np.zeros(len(patterns[d]), np.int64)
            for lv, kind in enumerate(kinds):
                if kind != "none":
                    step += (patterns[d] >> lv & 1) * place[lv] * (1 if kind == "size" else 1 << d)
            keys, values = _summed_by_key((keys[:, None] + step[None, :]).ravel(),
                                          (values[:, None] * weights[d].astype(values.dtype)[None, :]).ravel())
        orders = np.ones(len(keys), object)
        for lv, (kind, counts) in enumerate(zip(kinds, order_counts)):
            digit = keys // place[lv] % radix[lv]
            by_state = counts[(1 << digit) - 1] if kind == "size" else counts[digit]
            orders = orders * by_state.astype(object)
        return int((values.astype(object) * orders).sum())

    def _orders_sampled(self, patterns, weights, order_counts) -> float:
        """Mean order classes per row over `PATTERN_SAMPLES` rows drawn uniformly (by pattern)."""
        rng = np.random.default_rng(0)      # fixed: a size is a property of the space
        picks = [p[rng.choice(len(p), size=PATTERN_SAMPLES, p=w / w.sum())] for p, w in zip(patterns, weights)]
        masks = self._level_masks(picks)
        per_row = np.ones(PATTERN_SAMPLES)
        for lv in range(self.n_levels):
            per_row *= order_counts[lv][masks[lv]]
        return float(per_row.mean())

    def _choice_multiplicity(self, constrained: bool) -> int:
        if constrained:
            return math.prod(len(c.keeps) * len(c.stages) for c in self.choices)
        out = 1
        for lv, level in enumerate(self.arch.levels):
            allowed = sum(level.may_keep(t.name) for t in self.workload.tensors)
            out *= (1 if lv == 0 else 2 ** allowed) * level.max_stages
        return out

    @cached_property
    def _raw_size(self) -> tuple[int, bool]:
        return self._closed_form_size(self._tables["raw"], constrained=False)

    @property
    def size(self) -> int:
        """Size of the raw space: every factorisation, order class, keep set and stage count;
        an estimate (rounded) where counting would take too long: see `size_is_exact`."""
        return self._raw_size[0]

    @property
    def size_is_exact(self) -> bool:
        return self._raw_size[1]

    def funnel(self, exact_limit: int = 3_000_000, samples: int = 50_000, seed: int = 0,
               max_terms: int = MAX_EXACT_TERMS) -> Funnel:
        """Candidates left after each pruning step. Bounded work whatever the space: the raw,
        constraints and divisibility counts are exact up to `max_terms` combinations of per-dim
        loop patterns (`_closed_form_size`), the coupled steps up to `exact_limit` factor
        combinations of the per-dim tables; beyond, each is estimated and listed in
        `Funnel.estimated` (the coupled steps from `samples` uniform draws)."""
        counts = {"raw": self._raw_size if max_terms == MAX_EXACT_TERMS
                  else self._closed_form_size(self._tables["raw"], False, max_terms)}
        counts["constraints"] = self._closed_form_size(self._tables["constraints"], True, max_terms)
        counts["divisibility"] = self._closed_form_size(self.dim_tables, True, max_terms)
        funnel = Funnel(counts["raw"][0], {step: counts[step][0] for step in STEPS[:2]},
                        estimated=tuple(name for name, (_, exact) in counts.items() if not exact))
        combos = math.prod(len(t) for t in self.dim_tables)
        totals = dict.fromkeys(STEPS[2:], 0.0)
        if combos == 0:
            funnel.after.update(totals)
            return funnel
        if combos <= exact_limit:
            for index in _chunks(combos, 200_000):
                if self.stop is not None and self.stop():     # out of time: estimate instead
                    totals = dict.fromkeys(STEPS[2:], 0.0)
                    break
                for step, value in self._weights(self._factors(index)).items():
                    totals[step] += float(value.sum())
            else:
                funnel.after.update({k: int(v) for k, v in totals.items()})
                return funnel
        rng = np.random.default_rng(seed)
        index = rng.integers(0, combos, size=samples, dtype=np.int64) if combos < 2**62 else None
        factors = self._factors(index) if index is not None else self._sample_factors(samples, rng)
        weights = self._weights(factors)
        for step in totals:
            totals[step] = round(combos * float(weights[step].mean()))
        funnel.after.update(totals)
        funnel.estimated += STEPS[2:]
        funnel.samples = samples
        return funnel

    # ------------------------------------------------------------------ batches of the cross product

    def _factors(self, index: np.ndarray) -> np.ndarray:
        """Factor arrays (L, 3, D, N) for flat indices into the product of the per-dim tables."""
        rows = np.unravel_index(index, [len(t) for t in self.dim_tables])
        return self.assemble([t[r] for t, r in zip(self.dim_tables, rows)])

    def _sample_factors(self, count: int, rng: np.random.Generator) -> np.ndarray:
        return self.assemble([t[rng.integers(0, len(t), size=count)] for t in self.dim_tables])

    def assemble(self, per_dim: list[np.ndarray]) -> np.ndarray:
        n = per_dim[0].shape[0]
        factors = np.ones((self.n_levels, 3, self.n_dims, n), np.int64)
        for d, rows in enumerate(per_dim):
            for k, (lv, kind) in enumerate(self.slots):
                factors[lv, kind, d] = rows[:, k]
        return factors

    def tile_words(self, factors: np.ndarray) -> list[np.ndarray]:
        """Tile words per tensor, each (L, N)."""
        full = factors.prod(axis=1)
        span = np.cumprod(full[::-1], axis=0)[::-1]
        out = []
        for tensor in self.workload.tensors:
            words = 1
            for axis in tensor.axes:
                words = words * (1 + sum(c * (span[:, d] - 1) for d, c in axis))
            out.append(words)
        return out

    def fanout_mask(self, factors: np.ndarray) -> np.ndarray:
        fanout = np.array([self.arch.fanout(lv) for lv in range(self.n_levels)])[:, :, None]
        ok = (factors[:, 1:].prod(axis=2) <= fanout).all(axis=(0, 1))
        if self.constraints.min_utilization > 0:
            used = factors[:, 1:].prod(axis=(0, 1, 2))
            ok &= used >= self.constraints.min_utilization * self.arch.compute.instances
        return ok

    def _footprints(self, factors: np.ndarray) -> list[np.ndarray]:
        """Per level, bytes of one stage of each keep option: (options, N)."""
        tiles = self.tile_words(factors)
        word_bytes = [[level.word_bytes(t) for t in self.workload.tensors] for level in self.arch.levels]
        return [np.array([sum((tiles[t][lv] * word_bytes[lv][t] for t in keep), np.zeros(factors.shape[-1]))
                          for keep in choice.keeps])
                for lv, choice in enumerate(self.choices)]

    @cached_property
    def gpu_levels(self) -> tuple[int, int] | None:
        """(shared-memory level, register level) of a GPU, or None (see `cost.occupancy`)."""
        return gpu_levels(self.arch)

    def blocks_per_sm(self, smem_bytes: np.ndarray, rf_bytes: np.ndarray) -> np.ndarray:
        """Resident thread blocks per SM given one block's shared-memory and register bytes."""
        return blocks_per_sm(self.arch, smem_bytes, rf_bytes)

    def _weights(self, factors: np.ndarray) -> dict[str, np.ndarray]:
        """For each factor combination, how many mappings (orders x keeps x stages) survive the
        coupled steps: fanout, then capacity, then occupancy."""
        orders = self._order_multiplicity(factors)
        fits = self.fanout_mask(factors)
        footprints = self._footprints(factors)
        capacity_ok = []
        for lv, (level, choice) in enumerate(zip(self.arch.levels, self.choices)):
            per_stage = [footprints[lv] * s <= level.capacity for s in choice.stages]
            capacity_ok.append(np.array(per_stage))                  # (S, K, N)
        cap_counts = [c.sum(axis=(0, 1)) for c in capacity_ok]       # per level: options fitting
        after_fanout = fits * orders * math.prod(len(c.keeps) * len(c.stages) for c in self.choices)
        after_capacity = fits * orders * np.prod(cap_counts, axis=0)
        if self.gpu_levels is None or self.constraints.min_occupancy <= 1:
            after_occupancy = after_capacity
        else:
            smem_lv, rf_lv = self.gpu_levels
            other = np.prod([cap_counts[lv] for lv in range(self.n_levels) if lv not in (smem_lv, rf_lv)], axis=0)
            pair = 0
            for si, s in enumerate(self.choices[smem_lv].stages):
                for ki in range(len(self.choices[smem_lv].keeps)):
                    for ri, r in enumerate(self.choices[rf_lv].stages):
                        for kj in range(len(self.choices[rf_lv].keeps)):
                            ok = capacity_ok[smem_lv][si, ki] & capacity_ok[rf_lv][ri, kj]
                            blocks = self.blocks_per_sm(footprints[smem_lv][ki] * s, footprints[rf_lv][kj] * r)
                            pair = pair + (ok & (blocks >= self.constraints.min_occupancy))
            after_occupancy = fits * orders * other * pair
        return {"fanout": after_fanout, "capacity": after_capacity, "occupancy": after_occupancy}

    def _order_multiplicity(self, factors: np.ndarray) -> np.ndarray:
        counts = self._order_counts_constrained
        masks = self._nonunit_masks(factors)
        out = np.ones(factors.shape[-1], np.int64)
        for lv in range(self.n_levels):
            out = out * counts[lv][masks[lv]]
        return out

    @cached_property
    def _order_counts_constrained(self) -> list[np.ndarray]:
        return self._order_counts(True)

    def _nonunit_masks(self, factors: np.ndarray) -> np.ndarray:
        """(L, N) bitmask of the dims with a non-unit temporal loop at each level."""
        return ((factors[:, TEMPORAL] > 1) * (1 << np.arange(self.n_dims))[None, :, None]).sum(axis=1)

    # ------------------------------------------------------------------ enumeration and sampling

    def looping_dims(self, level: int) -> frozenset[int]:
        """Dims that may have a non-unit temporal loop at `level` (the per-dim tables say)."""
        column = self.slots.index((level, TEMPORAL))
        return frozenset(d for d, rows in enumerate(self.dim_tables) if len(rows) and rows[:, column].max() > 1)

    def expansion_bound(self) -> int:
        """The most mappings one factor combination expands to (keep sets x stage counts x loop
        orders at every level): batches of factor combinations are sized by it, so that the
        rows priced together stay bounded."""
        return math.prod(len(c.keeps) * len(c.stages) * max(1, len(self.orders_for(lv, self.looping_dims(lv))))
                         for lv, c in enumerate(self.choices))

    def combinations(self) -> int:
        """Size of the cross product of the per-dim tables (before coupled pruning)."""
        return math.prod(len(t) for t in self.dim_tables)

    def tables(self, batch: int = 100_000, stop=None):
        """Every mapping of the pruned space, as MappingTables of at most about `batch` rows;
        `stop()`, when given, is asked between batches (most batches may yield nothing)."""
        for index in _chunks(self.combinations(), batch):
            if stop is not None and stop():
                return
            factors = self._factors(index)
            factors = factors[..., self.fanout_mask(factors)]
            if factors.shape[-1]:
                table = self.expand(factors)
                if len(table):
                    yield table

    def sample(self, count: int, rng: np.random.Generator) -> MappingTable:
        """`count` mappings drawn choice by choice: per dim a uniform factorisation row, per level
        a uniform order class, keep set and stage count. Rows that break a coupled constraint
        (fanout, capacity, occupancy) are dropped, not redrawn."""
        factors = self._sample_factors(count, rng)
        keep_idx = [rng.integers(0, len(c.keeps), size=count) for c in self.choices]
        stage_idx = [rng.integers(0, len(c.stages), size=count) for c in self.choices]
        table = self._build(factors, keep_idx, stage_idx, rng)
        return table.take(self.valid_mask(table))

    def expand(self, factors: np.ndarray) -> MappingTable:
        """All keep/stage/order choices for each factor combination, pruned by capacity."""
        n = factors.shape[-1]
        combos = list(itertools.product(*[itertools.product(range(len(c.keeps)), range(len(c.stages)))
                                          for c in self.choices]))
        tables = []
        for combo in combos:
            keep_idx = [np.full(n, k) for k, _ in combo]
            stage_idx = [np.full(n, s) for _, s in combo]
            table = self._build(factors, keep_idx, stage_idx, None)
            table = table.take(self.valid_mask(table))
            if len(table):
                tables.append(table)
        if tables:
            return MappingTable.concat(tables)
        empty = [np.zeros(0, np.int64)] * self.n_levels
        return self._build(factors[..., :0], empty, empty, None)

    def _build(self, factors, keep_idx, stage_idx, rng) -> MappingTable:
        """Tables for factor arrays with the given keep/stage choices; with `rng`, one random order
        class per level, else every combination of order classes (rows repeated)."""
        n = factors.shape[-1]
        keep = np.zeros((self.n_levels, len(self.workload.tensors), n), bool)
        stages = np.ones((self.n_levels, n), np.int64)
        for lv, choice in enumerate(self.choices):
            keep_table = np.zeros((len(choice.keeps), len(self.workload.tensors)), bool)
            for i, k in enumerate(choice.keeps):
                keep_table[i, list(k)] = True
            keep[lv] = keep_table[keep_idx[lv]].T
            stages[lv] = np.array(choice.stages)[stage_idx[lv]]
        masks = self._nonunit_masks(factors)
        order_lists = [[self.order_array(lv, m) for m in range(1 << self.n_dims)] for lv in range(self.n_levels)]
        if rng is not None:
            order = np.empty((self.n_levels, self.n_dims, n), np.int64)
            for lv in range(self.n_levels):
                for m in np.unique(masks[lv]):
                    rows = np.flatnonzero(masks[lv] == m)
                    options = order_lists[lv][m]
                    order[lv, :, rows] = options[rng.integers(0, len(options), size=len(rows))]
            return MappingTable(factors, order, keep, stages)
        if n == 0:
            return MappingTable(factors, np.zeros((self.n_levels, self.n_dims, 0), np.int64), keep, stages)
        # every combination of order classes: group rows by their non-unit masks
        key = np.zeros(n, np.int64)
        for lv in range(self.n_levels):
            key = key * (1 << self.n_dims) + masks[lv]
        parts = []
        for value in np.unique(key):
            rows = np.flatnonzero(key == value)
            per_level = [order_lists[lv][masks[lv][rows[0]]] for lv in range(self.n_levels)]
            for choice in itertools.product(*[range(len(p)) for p in per_level]):
                order = np.stack([np.repeat(per_level[lv][c][:, None], len(rows), axis=1)
                                  for lv, c in enumerate(choice)])
                parts.append(MappingTable(factors[..., rows], order, keep[..., rows], stages[..., rows]))
        return MappingTable.concat(parts)

    def order_array(self, lv: int, mask: int) -> np.ndarray:
        cache = self.__dict__.setdefault("_order_array_cache", {})
        if (lv, mask) not in cache:
            dims = frozenset(d for d in range(self.n_dims) if mask >> d & 1)
            rest = [d for d in range(self.n_dims) if d not in dims]
            cache[lv, mask] = np.array([list(o) + rest for o in self.orders_for(lv, dims)], np.int64).reshape(-1, self.n_dims)
        return cache[lv, mask]

    def valid_mask(self, table: MappingTable) -> np.ndarray:
        """Fanout, capacity and occupancy hold (per-dim constraints hold by construction)."""
        ok = self.fanout_mask(table.factors)
        tiles = self.tile_words(table.factors)
        footprint = []
        for lv, level in enumerate(self.arch.levels):
            used = sum(tiles[t][lv] * table.keep[lv, t] * level.word_bytes(tensor)
                       for t, tensor in enumerate(self.workload.tensors)) * table.stages[lv]
            footprint.append(used)
            ok &= used <= level.capacity
        if self.gpu_levels is not None and self.constraints.min_occupancy > 1:
            smem_lv, rf_lv = self.gpu_levels
            ok &= self.blocks_per_sm(footprint[smem_lv], footprint[rf_lv]) >= self.constraints.min_occupancy
        return ok


    # ------------------------------------------------------------------ why nothing fits

    def require_nonempty(self, funnel: Funnel | None = None) -> Funnel:
        """The funnel, or an InfeasibleError saying which step removed the last candidates,
        by how much, and what to relax."""
        funnel = funnel or self.funnel()
        previous = funnel.size
        for step in STEPS:
            if funnel.after.get(step, 1) == 0:
                raise InfeasibleError(f"no mapping of {self.workload.name} fits {self.arch.name}: "
                                      f"the {step} step removed the last {previous:,} candidates. "
                                      + self._why(step))
            previous = funnel.after[step]
        return funnel

    def _why(self, step: str) -> str:
        names = self.workload.dims
        if step in ("constraints", "divisibility"):
            key = "constraints" if step == "constraints" else "divisibility"
            empty = [names[d] for d, t in enumerate(self._tables[key]) if len(t) == 0]
            if step == "constraints":
                return (f"No factorisation of dim(s) {', '.join(empty)} meets the bounds of mapspace "
                        f"'{self.constraints.name}': widen its temporal/spatial/tile ranges.")
            native = dict(self.arch.compute.native_shape)
            detail = ", ".join(f"{n} (size {self.workload.sizes[names.index(n)]}, native {native.get(n)})"
                               for n in empty)
            return (f"The innermost tile of {detail} cannot be a multiple of the native operation "
                    "shape: use factors: imperfect (padding) or align_to_native: false.")
        if step == "fanout":
            best = max(self.arch.fanout(lv)[0] * self.arch.fanout(lv)[1] for lv in range(self.n_levels))
            return (f"Spatial splits must use at least {self.constraints.min_utilization:.0%} of the "
                    f"{self.arch.compute.instances} compute units and fit each level's fanout "
                    f"(largest {best}): lower min_utilization.")
        lines = []
        for lv, (level, choice) in enumerate(zip(self.arch.levels, self.choices)):
            smallest = self.smallest_footprint(lv)
            if smallest > level.capacity:
                lines.append(f"level {level.name}: its smallest possible tiles take {smallest:,.0f} B "
                             f"x {min(choice.stages)} stage(s), above its capacity of {level.capacity:,.0f} B")
        if step == "capacity":
            hint = "; ".join(lines) or "no single level is too small, but no combination fits all levels"
            return hint + ": allow bypass there (a mapspace with `bypass: true`), fewer stages, or a larger level."
        smem, rf = self.gpu_levels
        blocks = self.blocks_per_sm(np.array([self.smallest_footprint(smem)]), np.array([self.smallest_footprint(rf)]))[0]
        return (f"At most {blocks:.0f} blocks fit per SM with the smallest tiles, below min_occupancy "
                f"{self.constraints.min_occupancy}: lower min_occupancy or the stages.")

    def smallest_footprint(self, lv: int) -> float:
        """Bytes per instance of the smallest tiles level lv can hold (one stage x its fewest
        stages), over every keep choice: each dim at its smallest tile there."""
        smallest_span = []
        for rows in self.dim_tables:
            tile = self.level_view(rows)[2][:, lv] if len(rows) else np.array([1])
            smallest_span.append(int(tile.min()))
        best = math.inf
        for keep in self.choices[lv].keeps:
            words = sum(math.prod(1 + sum(c * (smallest_span[d] - 1) for d, c in axis)
                                  for axis in self.workload.tensors[t].axes)
                        * self.arch.levels[lv].word_bytes(self.workload.tensors[t])
                        for t in keep)
            best = min(best, words)
        return best * min(self.choices[lv].stages)


def _bits(mask: int) -> int:
    return bin(mask).count("1")


def _count_dependence(counts: np.ndarray, n_dims: int) -> str:
    """What a level's order-class counts (indexed by the mask of non-unit dims) depend on:
    "none" (constant), "size" (only the number of dims) or "set"."""
    if (counts == counts[0]).all():
        return "none"
    size = np.array([_bits(m) for m in range(1 << n_dims)])
    return "size" if (counts == counts[(1 << size) - 1]).all() else "set"


def _summed_by_key(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct keys (sorted) and the sum of the values sharing each."""
    order = np.argsort(keys, kind="stable")
    keys, values = keys[order], values[order]
    starts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
    return keys[starts], np.add.reduceat(values, starts)


def _chunks(total: int, batch: int):
    for start in range(0, total, batch):
        yield np.arange(start, min(total, start + batch), dtype=np.int64)


def padded_extents(size: int, max_padding: float, limit: int = 8) -> tuple[int, ...]:
    """Extents a dim may be padded to: its size and the smoothest (largest prime factor <= 7)
    numbers up to size * (1 + max_padding), closest first; at most `limit` of them, so a dim
    of 6144 or 4099 stays a handful of candidates."""
    top = int(size * (1 + max_padding))
    smooth = smooth_numbers(size + 1, top)      # listed directly: a range of 10^8 is not scanned
    return (size,) + tuple(sorted(smooth)[: limit - 1])

"""Counting the mapspace without listing it: the closed-form size (exact, or an unbiased
estimate past a cap on work) and the funnel of counts after each pruning step."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable

import numpy as np

from .. import tiles
from . import order_tables, pruning, sampling, tables
from .common import STEPS, _bits, _chunks

if TYPE_CHECKING:
    from .space import Mapspace

MAX_EXACT_TERMS = 1_000_000     # most terms one dim may combine when a size is summed exactly
PATTERN_SAMPLES = 100_000       # loop-pattern draws per estimated size
# factor combinations counted together: the arrays of a batch stay under the allocator's
# threshold for fresh pages (`memory.MMAP_BYTES`; 200,000 took gemv-1024's exact count on
# pe-array from 0.18 s to 0.42 s, most of it page faults)
COUNT_BATCH = 50_000


@dataclass
class Funnel:
    """Mapspace size before and after each pruning step. `estimated` names the counts that are
    estimates ("raw" for `size`, else step names); `samples` is the number of uniform draws the
    coupled steps (fanout, capacity, occupancy) were estimated from, when they were."""

    size: int
    after: dict[str, float] = field(default_factory=dict)
    estimated: tuple[str, ...] = ()
    samples: int = 0
    roles: str = ""             # which dims play the native op shape (`roles.Roles.describe`)
    coupled: tuple[str, ...] = ("fanout", "capacity", "occupancy")   # the steps counted on factor combinations

    @property
    def exact(self) -> bool:
        return not self.estimated

    def to_json(self) -> dict:
        return {"size": self.size, "after": dict(self.after), "exact": self.exact,
                **({"estimated": list(self.estimated), "samples": self.samples} if not self.exact else {}),
                **({"roles": self.roles} if self.roles else {})}


def _closed_form_size(space: Mapspace, tables: list[np.ndarray], constrained: bool,
                      max_terms: int = MAX_EXACT_TERMS) -> tuple[int, bool]:
    """Number of mappings over the per-dim tables (orders, keeps, stages included), and
    whether it is exact: summed exactly (`_orders_summed`) unless that would combine more
    than `max_terms` terms at one dim, else estimated without bias from `PATTERN_SAMPLES`
    rows drawn uniformly (`_orders_sampled`)."""
    patterns, weights = zip(*(_patterns(space, rows) for rows in tables))
    rows = math.prod(int(w.sum()) for w in weights)
    if rows == 0:
        return 0, True
    order_counts = order_tables.order_counts(space, constrained)
    multiplicity = _choice_multiplicity(space, constrained)
    summed = _orders_summed(space, patterns, weights, order_counts, max_terms)
    if summed is not None:
        return summed * multiplicity, True
    mean = _orders_sampled(space, patterns, weights, order_counts)
    return round(rows * mean * multiplicity), False


def _patterns(space: Mapspace, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct patterns of per-dim rows (bit lv set: a temporal factor > 1 at level lv) and
    how many rows have each. The number of loop orders depends on a row only through them."""
    temporal = tables.level_view(space, rows)[0] > 1
    return np.unique(temporal @ (1 << np.arange(space.n_levels)), return_counts=True)


def _level_masks(space: Mapspace, patterns: list[np.ndarray]) -> np.ndarray:
    """(L, N) bitmask of the non-unit dims per level, from N per-dim patterns per dim."""
    masks = np.zeros((space.n_levels, len(patterns[0])), np.int64)
    for d, pattern in enumerate(patterns):
        for lv in range(space.n_levels):
            masks[lv] |= (pattern >> lv & 1) << d
    return masks


def _orders_summed(space: Mapspace, patterns, weights, order_counts, max_terms: int) -> int | None:
    """The sum over every combination of per-dim rows of the product over levels of the
    order classes, exactly; None when a step would combine more than `max_terms` terms.

    A dynamic programme over dims. Its state keeps, per level, only what that level's count
    depends on (`_count_dependence`): nothing for a fixed order, the number of non-unit
    dims where every permutation is a class (sliding windows), else the set of them. Kept
    whole, the sets would make up to 2^(levels x dims) states; counted, a 6-level 7-dim
    convolution needs a few hundred thousand."""
    n_dims = space.n_dims
    kinds = [_count_dependence(c, n_dims) for c in order_counts]
    radix = [{"none": 1, "size": n_dims + 1, "set": 1 << n_dims}[k] for k in kinds]
    if math.prod(radix) >= 2**62:
        return None
    place = [math.prod(radix[:lv]) for lv in range(space.n_levels)]
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


def _orders_sampled(space: Mapspace, patterns, weights, order_counts) -> float:
    """Mean order classes per row over `PATTERN_SAMPLES` rows drawn uniformly (by pattern)."""
    rng = np.random.default_rng(0)      # fixed: a size is a property of the space
    picks = [p[rng.choice(len(p), size=PATTERN_SAMPLES, p=w / w.sum())] for p, w in zip(patterns, weights)]
    masks = _level_masks(space, picks)
    per_row = np.ones(PATTERN_SAMPLES)
    for lv in range(space.n_levels):
        per_row *= order_counts[lv][masks[lv]]
    return float(per_row.mean())


def _choice_multiplicity(space: Mapspace, constrained: bool) -> int:
    if constrained:
        return math.prod(len(c.keeps) * len(c.stages) for c in space.choices)
    out = 1
    for lv, level in enumerate(space.arch.levels):
        allowed = sum(level.may_keep(t.name) for t in space.workload.tensors)
        out *= (1 if lv == 0 else 2 ** allowed) * level.max_stages
    return out


def raw_size(space: Mapspace) -> tuple[int, bool]:
    """(`size`, `size_is_exact`), counted once per space and its parts."""
    if "raw size" not in space.shared:
        space.shared["raw size"] = _closed_form_size(space, space.step_tables["raw"], constrained=False)
    return space.shared["raw size"]


def size(space: Mapspace) -> int:
    """Size of the raw space: every factorisation, order class, keep set and stage count;
    an estimate (rounded) where counting would take too long: see `size_is_exact`."""
    return raw_size(space)[0]


def size_is_exact(space: Mapspace) -> bool:
    return raw_size(space)[1]


def funnel(space: Mapspace, exact_limit: int = 3_000_000, samples: int = 50_000, seed: int = 0,
           max_terms: int = MAX_EXACT_TERMS, stop: Callable[[], bool] | None = None) -> Funnel:
    """`_funnel`, computed once per space and arguments (a joint search and its greedy warm
    start both ask, and it is not free on the largest presets); a copy each time. `stop`
    (the search context's `stopped`), once true, makes the coupled counts estimates: a
    funnel so cut short (estimated for want of time) is not kept."""
    memo = space.own.setdefault("funnels", {})
    key = (exact_limit, samples, seed, max_terms)
    if key not in memo:
        funnel, cut = _funnel(space, exact_limit, samples, seed, max_terms, stop)
        if cut:
            return funnel
        memo[key] = funnel
    kept = memo[key]
    return replace(kept, after=dict(kept.after))


def _funnel(space: Mapspace, exact_limit: int, samples: int, seed: int, max_terms: int,
            stop: Callable[[], bool] | None) -> tuple[Funnel, bool]:
    """Candidates left after each pruning step. Bounded work whatever the space: the raw,
    constraints and divisibility counts are exact up to `max_terms` combinations of per-dim
    loop patterns (`_closed_form_size`), the coupled steps up to `exact_limit` factor
    combinations of the per-dim tables; beyond, each is estimated and listed in
    `Funnel.estimated` (the coupled steps from `samples` uniform draws). With it, whether
    `stop` cut the exact count short."""
    counts = {"raw": raw_size(space) if max_terms == MAX_EXACT_TERMS
              else _closed_form_size(space, space.step_tables["raw"], False, max_terms)}
    counts["constraints"] = _closed_form_size(space, space.step_tables["constraints"], True, max_terms)
    counts["divisibility"] = _closed_form_size(space, space.dim_tables, True, max_terms)
    # a role several dims share couples them: its step is counted with the coupled ones
    coupled = STEPS[1:] if space.roles is not None and space.roles.fused else STEPS[2:]
    funnel = Funnel(counts["raw"][0], {step: counts[step][0] for step in STEPS[:2]},
                    estimated=tuple(name for name, (_, exact) in counts.items() if not exact
                                    and name not in coupled), roles=_roles_text(space), coupled=coupled)
    combos = math.prod(len(t) for t in space.dim_tables)
    totals = dict.fromkeys(coupled, 0.0)
    if combos == 0:
        funnel.after.update(totals)
        return funnel, False
    cut = False
    if combos <= exact_limit:
        for index in _chunks(combos, COUNT_BATCH):
            if stop is not None and stop():     # out of time: estimate instead
                cut = True
                totals = dict.fromkeys(coupled, 0.0)
                break
            for step, value in _weights(space, sampling.factors_at(space, index)).items():
                if step in totals:
                    totals[step] += float(value.sum())
        else:
            funnel.after.update({k: int(v) for k, v in totals.items()})
            return funnel, False
    rng = np.random.default_rng(seed)
    index = rng.integers(0, combos, size=samples, dtype=np.int64) if combos < 2**62 else None
    factors = sampling.factors_at(space, index) if index is not None else sampling.sample_factors(space, samples, rng)
    weights = _weights(space, factors)
    for step in totals:
        totals[step] = round(combos * float(weights[step].mean()))
    funnel.after.update(totals)
    funnel.estimated += coupled
    funnel.samples = samples
    return funnel, cut


def _roles_text(space: Mapspace) -> str:
    return "" if space.roles is None else space.roles.describe(space.workload)


def _weights(space: Mapspace, factors: np.ndarray) -> dict[str, np.ndarray]:
    """For each factor combination, how many mappings (orders x keeps x stages) survive the
    coupled steps: fanout, then capacity, then occupancy."""
    orders = _order_multiplicity(space, factors)
    fragments = pruning.fragment_mask(space, factors)
    fits = fragments & pruning.fanout_mask(space, factors)
    footprints = pruning.footprints(space, factors)
    capacity_ok = []
    for lv, (level, choice) in enumerate(zip(space.arch.levels, space.choices)):
        per_stage = [tiles.fits_level(level, footprints[lv] * s) for s in choice.stages]
        capacity_ok.append(np.array(per_stage))                  # (S, K, N)
    cap_counts = [c.sum(axis=(0, 1)) for c in capacity_ok]       # per level: options fitting
    after_fanout = fits * orders * math.prod(len(c.keeps) * len(c.stages) for c in space.choices)
    after_capacity = fits * orders * np.prod(cap_counts, axis=0)
    if space.gpu_levels is None or space.constraints.min_occupancy <= 1:
        after_occupancy = after_capacity
    else:
        smem_lv, rf_lv = space.gpu_levels
        other = np.prod([cap_counts[lv] for lv in range(space.n_levels) if lv not in (smem_lv, rf_lv)], axis=0)
        pair = 0
        for si, s in enumerate(space.choices[smem_lv].stages):
            for ki in range(len(space.choices[smem_lv].keeps)):
                for ri, r in enumerate(space.choices[rf_lv].stages):
                    for kj in range(len(space.choices[rf_lv].keeps)):
                        ok = capacity_ok[smem_lv][si, ki] & capacity_ok[rf_lv][ri, kj]
                        blocks = pruning.blocks_per_sm(space, footprints[smem_lv][ki] * s, footprints[rf_lv][kj] * r)
                        pair = pair + (ok & (blocks >= space.constraints.min_occupancy))
        after_occupancy = fits * orders * other * pair
    choices = math.prod(len(c.keeps) * len(c.stages) for c in space.choices)
    return {"divisibility": fragments * orders * choices, "fanout": after_fanout, "capacity": after_capacity,
            "occupancy": after_occupancy}


def _order_multiplicity(space: Mapspace, factors: np.ndarray) -> np.ndarray:
    counts = order_tables.constrained_order_counts(space)
    masks = pruning.nonunit_masks(space, factors)
    out = np.ones(factors.shape[-1], np.int64)
    for lv in range(space.n_levels):
        out = out * counts[lv][masks[lv]]
    return out


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

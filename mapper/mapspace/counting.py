"""Counting the mapspace without listing it: the closed-form size (exact, or an unbiased
estimate past a cap on work) and the funnel of counts after each pruning step."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from .. import tiles
from .common import STEPS, _bits, _chunks

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
    roles: str = ""             # which dims play the native op shape (`roles.Roles.describe`)
    coupled: tuple[str, ...] = ("fanout", "capacity", "occupancy")   # the steps counted on factor combinations

    @property
    def exact(self) -> bool:
        return not self.estimated

    def to_json(self) -> dict:
        return {"size": self.size, "after": dict(self.after), "exact": self.exact,
                **({"estimated": list(self.estimated), "samples": self.samples} if not self.exact else {}),
                **({"roles": self.roles} if self.roles else {})}



class CountingMixin:
    """Sizes (`size`, `size_is_exact`) and the funnel (`funnel`).

    Part of `Mapspace` (see `space`): it reads `arch`, `workload`, `constraints`, `n_levels`,
    `n_dims`, `level_constraints`, `slots`, `extents`, `choices` and the other mixins' methods."""

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
        """`_funnel`, computed once per space and arguments (a joint search and its greedy warm
        start both ask, and it is not free on the largest presets); a copy each time. One
        that `stop` cut short (estimated for want of time) is not kept."""
        memo = self.__dict__.setdefault("_funnel_memo", {})
        key = (exact_limit, samples, seed, max_terms)
        if key not in memo:
            self._funnel_cut = False
            funnel = self._funnel(exact_limit, samples, seed, max_terms)
            if self._funnel_cut:
                return funnel
            memo[key] = funnel
        kept = memo[key]
        return replace(kept, after=dict(kept.after))

    def _funnel(self, exact_limit: int, samples: int, seed: int, max_terms: int) -> Funnel:
        """Candidates left after each pruning step. Bounded work whatever the space: the raw,
        constraints and divisibility counts are exact up to `max_terms` combinations of per-dim
        loop patterns (`_closed_form_size`), the coupled steps up to `exact_limit` factor
        combinations of the per-dim tables; beyond, each is estimated and listed in
        `Funnel.estimated` (the coupled steps from `samples` uniform draws)."""
        counts = {"raw": self._raw_size if max_terms == MAX_EXACT_TERMS
                  else self._closed_form_size(self._tables["raw"], False, max_terms)}
        counts["constraints"] = self._closed_form_size(self._tables["constraints"], True, max_terms)
        counts["divisibility"] = self._closed_form_size(self.dim_tables, True, max_terms)
        # a role several dims share couples them: its step is counted with the coupled ones
        coupled = STEPS[1:] if self.roles is not None and self.roles.fused else STEPS[2:]
        funnel = Funnel(counts["raw"][0], {step: counts[step][0] for step in STEPS[:2]},
                        estimated=tuple(name for name, (_, exact) in counts.items() if not exact
                                        and name not in coupled), roles=self._roles_text(), coupled=coupled)
        combos = math.prod(len(t) for t in self.dim_tables)
        totals = dict.fromkeys(coupled, 0.0)
        if combos == 0:
            funnel.after.update(totals)
            return funnel
        if combos <= exact_limit:
            for index in _chunks(combos, 200_000):
                if self.stop is not None and self.stop():     # out of time: estimate instead
                    self._funnel_cut = True
                    totals = dict.fromkeys(coupled, 0.0)
                    break
                for step, value in self._weights(self._factors(index)).items():
                    if step in totals:
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
        funnel.estimated += coupled
        funnel.samples = samples
        return funnel

    def _roles_text(self) -> str:
        return "" if self.roles is None else self.roles.describe(self.workload)

    def _weights(self, factors: np.ndarray) -> dict[str, np.ndarray]:
        """For each factor combination, how many mappings (orders x keeps x stages) survive the
        coupled steps: fanout, then capacity, then occupancy."""
        orders = self._order_multiplicity(factors)
        fragments = self.fragment_mask(factors)
        fits = fragments & self.fanout_mask(factors)
        footprints = self._footprints(factors)
        capacity_ok = []
        for lv, (level, choice) in enumerate(zip(self.arch.levels, self.choices)):
            per_stage = [tiles.fits_level(level, footprints[lv] * s) for s in choice.stages]
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
        choices = math.prod(len(c.keeps) * len(c.stages) for c in self.choices)
        return {"divisibility": fragments * orders * choices, "fanout": after_fanout, "capacity": after_capacity,
                "occupancy": after_occupancy}

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

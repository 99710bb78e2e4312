"""The mapspace against brute force on small cases: sizes, funnel counts and membership."""
import dataclasses
import itertools
import math

import numpy as np
import pytest

from mapper.constraints import Constraints, LevelConstraints, Range
from mapper.cost import evaluate_many
from mapper.load import arch_from_dict, workload_from_dict
from mapper.mapping import LevelMapping, Mapping, from_table, to_table
from mapper.mapspace import Mapspace, counting, order_tables, padded_extents, pruning, sampling, tables
from mapper.orders import signature
from mapper.units import Where

W = Where("<test>")


def small_arch(capacity="24 B", fanout=(2, 2), stages=2, rf="6 B", native_shape=None):
    """DRAM / buffer / a fanout of register files, with energies and bandwidths that make the
    choices matter (DRAM 100 pJ, buffer 6 pJ with a 2 B/cycle port, RF 1 pJ, MAC 0.5 pJ); the
    compute units' `native_shape` ({m, n, k}), if any."""
    return arch_from_dict({
        "name": "small", "clock": "1 GHz",
        "levels": [{"name": "DRAM", "max_stages": 1, "energy": {"read": 100, "write": 100, "update": 100},
                    "bandwidth": "4 B/cycle"},
                   {"name": "Buf", "capacity": capacity, "max_stages": stages, "bandwidth": "2 B/cycle",
                    "energy": {"read": 6, "write": 6, "update": 6}, "block_size": 2},
                   {"name": "RF", "capacity": rf, "instances": fanout[0] * fanout[1],
                    "mesh": list(fanout), "energy": {"read": 1, "write": 1, "update": 1}}],
        "compute": {"mesh": list(fanout), "instances": fanout[0] * fanout[1], "energy": 0.5,
                    **({"native_shape": native_shape} if native_shape else {})}}, W)


def gemm(m=4, n=2, k=2):
    return workload_from_dict({"name": "g", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                               "sizes": {"m": m, "n": n, "k": k}, "dtype": 8}, W)


def conv1d():
    return workload_from_dict({"name": "c", "einsum": "O[k,p] += I[p+r] * W[k,r]",
                               "sizes": {"k": 2, "p": 3, "r": 2}, "dtype": 8}, W)


def brute_force(arch, workload, constraints):
    """Every mapping by nested loops: (set of canonical keys of all raw mappings, set of keys of
    the valid ones under `constraints`), a key being (factors, order signatures, keeps, stages)."""
    ms = Mapspace(arch, workload, constraints)
    n_levels, n_dims = len(arch.levels), len(workload.dims)
    slots = ms.slots
    per_dim = []
    for d in range(n_dims):
        options = []
        for extent in ms.extents[d]:
            for combo in itertools.product(range(1, extent + 1), repeat=len(slots)):
                if math.prod(combo) == extent:
                    options.append(combo)
        per_dim.append(options)
    # the factor rows each dim's constraints and divisibility admit, asked once per row
    fits = [{row for row, ok in zip(options, tables.constraint_mask(ms, d, np.array(options))
                                    & tables.divisibility_mask(ms, d, np.array(options))) if ok}
            for d, options in enumerate(per_dim)]
    tensors = range(len(workload.tensors))
    keep_options = [[tuple(tensors)]] + [[c for r in range(len(tensors) + 1)
                                          for c in itertools.combinations(tensors, r)]
                                         for _ in range(n_levels - 1)]
    raw, admitted = set(), []          # admitted: (key, mapping) meeting the constraints
    for rows in itertools.product(*per_dim):
        levels_t = [[1] * n_dims for _ in range(n_levels)]
        levels_s = [[] for _ in range(n_levels)]
        for d, row in enumerate(rows):
            for (lv, kind), f in zip(slots, row):
                if kind == 0:
                    levels_t[lv][d] *= f
                elif f > 1:
                    levels_s[lv].append((d, f, kind - 1))
        rows_fit = all(row in fits[d] for d, row in enumerate(rows))
        nonunit = [[d for d in range(n_dims) if levels_t[lv][d] > 1] for lv in range(n_levels)]
        for perms in itertools.product(*[itertools.permutations(u) for u in nonunit]):
            sigs = tuple(signature(workload, p) for p in perms)
            for keeps in itertools.product(*keep_options):
                for stages in itertools.product(*[range(1, lvl.max_stages + 1) for lvl in arch.levels]):
                    key = (rows, sigs, keeps, stages)
                    if key in raw:
                        continue
                    raw.add(key)
                    if rows_fit and _admits(ms, perms, keeps, stages):
                        admitted.append((key, Mapping(tuple(
                            LevelMapping(tuple((d, levels_t[lv][d]) for d in perms[lv]), tuple(levels_s[lv]),
                                         frozenset(keeps[lv]), stages[lv]) for lv in range(n_levels)))))
    # the cost model's validity (capacity, fanout, occupancy) and the mapspace's own checks,
    # row by row but priced together: one call per mapping took two minutes on the gemm case
    if not admitted:
        return raw, set()
    table = to_table([m for _, m in admitted], n_dims, len(workload.tensors))
    ok = evaluate_many(arch, workload, table).valid & pruning.valid_mask(ms, table)
    return raw, {key for (key, _), good in zip(admitted, ok) if good}


def _admits(ms, perms, keeps, stages):
    """The mapping satisfies the constraints on its orders, keeps and stages."""
    wl = ms.workload
    for lv, choice in enumerate(ms.choices):
        if keeps[lv] not in choice.keeps or stages[lv] not in choice.stages:
            return False
        allowed = order_tables.orders_for(ms, lv, frozenset(perms[lv]))
        if perms[lv] not in allowed and not any(signature(wl, perms[lv]) == signature(wl, o) for o in allowed):
            return False
    return True


def key_of(ms, table, row):
    mapping = from_table(table, row)
    wl = ms.workload
    rows = []
    for d in range(len(wl.dims)):
        rows.append(tuple(int(table.factors[lv, kind, d, row]) for lv, kind in ms.slots))
    sigs = tuple(signature(wl, tuple(d for d, _ in lm.temporal)) for lm in mapping.levels)
    keeps = tuple(tuple(sorted(lm.keep)) for lm in mapping.levels)
    stages = tuple(lm.stages for lm in mapping.levels)
    return tuple(rows), sigs, keeps, stages


BYPASS_BOTH = Constraints(levels=(("Buf", LevelConstraints(bypass=True)), ("RF", LevelConstraints(bypass=True))))
CASES = {
    "gemm": (small_arch(), gemm(), BYPASS_BOTH),
    "gemm-2x2x1": (small_arch(), gemm(2, 2, 1), BYPASS_BOTH),      # the same, in the default run
    "gemm-stationary-util": (small_arch(), gemm(), Constraints(
        min_utilization=0.5, levels=(("Buf", LevelConstraints(stationary="output")),
                                     ("RF", LevelConstraints(temporal=(("k", Range(1, 1)),)))))),
    "conv1d-bypass": (small_arch(capacity="12 B", fanout=(2, 1)), conv1d(),
                      Constraints(levels=(("RF", LevelConstraints(bypass=True)),))),
    "gemm-imperfect": (small_arch(fanout=(2, 1), stages=1), gemm(m=3, n=1, k=2),
                       Constraints(factors="imperfect", max_padding=0.5)),
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] * (n == "gemm")) for n in CASES])
def test_sizes_funnel_and_membership_match_brute_force(name):
    arch, workload, constraints = CASES[name]
    ms = Mapspace(arch, workload, constraints)
    raw, valid = brute_force(arch, workload, constraints)
    assert counting.size(ms) == len(raw)
    funnel = counting.funnel(ms)
    assert funnel.exact
    assert funnel.after["occupancy"] == len(valid)
    yielded = [key_of(ms, t, r) for t in sampling.all_tables(ms, batch=97) for r in range(len(t))]
    assert len(yielded) == len(set(yielded)) == len(valid)
    assert set(yielded) == valid
    for table in sampling.all_tables(ms):
        assert evaluate_many(arch, workload, table).valid.all()


def test_the_space_is_a_value_and_its_parts_cover_it_sharing_the_keep_free_tables():
    """Nothing assigns to a space; `part(picks)` is a new value with one keep set per level,
    sharing the factor tables; the parts over every pick vector count to the whole."""
    arch, workload, constraints = CASES["gemm-2x2x1"]
    space = Mapspace(arch, workload, constraints)
    with pytest.raises(dataclasses.FrozenInstanceError):
        space.constraints = Constraints()
    options = [range(len(c.keeps)) for c in space.choices]
    assert math.prod(len(o) for o in options) > 1          # bypass: several parts to cover
    whole = counting.funnel(space).after["occupancy"]
    total = 0
    for picks in itertools.product(*options):
        part = space.part(picks)
        assert part.dim_tables is space.dim_tables          # built once, not rebuilt per part
        assert [c.keeps for c in part.choices] == [(c.keeps[i],) for c, i in zip(space.choices, picks)]
        table = next(iter(sampling.all_tables(part)), None)
        if table is not None:
            assert pruning.valid_mask(space, table).all()   # a part's mappings are the whole's
        total += counting.funnel(part).after["occupancy"]
    assert total == whole and whole > 0
    with pytest.raises(ValueError):
        part.part(picks)


def test_orders_in_one_class_cost_the_same():
    """Collapsing orders is safe: every order of a class gives identical access counts."""
    arch, workload = small_arch(capacity="unlimited"), gemm(4, 4, 4)
    ms = Mapspace(arch, workload)
    rng = np.random.default_rng(1)
    base = sampling.sample(ms, 200, rng)
    for row in range(len(base)):
        mapping = from_table(base, row)
        variants = []
        for perm in itertools.permutations(mapping.levels[1].temporal):
            levels = list(mapping.levels)
            levels[1] = LevelMapping(tuple(perm), levels[1].spatial, levels[1].keep, levels[1].stages)
            variants.append(Mapping(tuple(levels)))
        costs = evaluate_many(arch, workload, to_table(variants, 3, 3))
        sigs = [signature(workload, tuple(d for d, _ in v.levels[1].temporal)) for v in variants]
        for i, j in itertools.combinations(range(len(variants)), 2):
            if sigs[i] == sigs[j]:
                assert (costs.reads[i] == costs.reads[j]).all() and (costs.fills[i] == costs.fills[j]).all()


def test_padded_extents_stay_bounded():
    assert padded_extents(6144, 0.125) [0] == 6144
    assert len(padded_extents(6144, 0.125)) <= 8
    assert len(padded_extents(4099, 1.0)) <= 8
    assert all(e >= 4099 for e in padded_extents(4099, 1.0))
    ms = Mapspace(small_arch(), workload_from_dict({"name": "x", "einsum": "Z[m] += A[m]",
                                                    "sizes": {"m": 6144}, "dtype": 8}, W),
                  Constraints(factors="imperfect"))
    assert sum(len(t) for t in ms.dim_tables) < 200_000


def test_sampled_rows_are_valid_and_deterministic():
    arch, workload, constraints = CASES["gemm"]
    ms = Mapspace(arch, workload, constraints)
    a = sampling.sample(ms, 500, np.random.default_rng(7))
    b = sampling.sample(ms, 500, np.random.default_rng(7))
    assert (a.factors == b.factors).all() and (a.order == b.order).all()
    assert evaluate_many(arch, workload, a).valid.all()


def test_a_space_with_a_dim_no_tile_can_split_samples_nothing():
    """A dim with no factorisation (k = 24 under perfect factors, whose innermost tile must be a
    multiple of h100's k16 fragment) leaves nothing to draw: an empty table, not an error."""
    from mapper.load import load_arch
    workload = workload_from_dict({"name": "g", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                                   "sizes": {"m": 16, "n": 8, "k": 24}, "dtype": "bf16"}, W)
    ms = Mapspace(load_arch("h100"), workload, Constraints(factors="perfect"))
    assert [len(t) for t in ms.dim_tables] == [1, 1, 0]
    assert len(sampling.sample(ms, 10, np.random.default_rng(0))) == 0


def test_factorization_counts_and_uniform_sampling():
    from mapper.factors import count_factorizations, enumerate_factorizations, sample_factorizations
    for n, k in [(12, 3), (4096, 4), (360, 5), (1, 3), (97, 2)]:
        table = enumerate_factorizations(n, k)
        assert len(table) == count_factorizations(n, k) == len({tuple(r) for r in table})
        assert (table.prod(axis=1) == n).all()
    draws = sample_factorizations(12, 3, 18_000, np.random.default_rng(0))
    assert (draws.prod(axis=1) == 12).all()
    _, counts = np.unique(draws, axis=0, return_counts=True)
    assert len(counts) == 18 and counts.min() > 800 and counts.max() < 1200   # uniform: ~1000 each

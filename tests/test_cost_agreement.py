"""The scalar path (one mapping, full breakdown) and the vectorised path agree exactly."""
import numpy as np
from hypothesis import strategies as st

from mapper.cost import evaluate, evaluate_many
from mapper.mapping import from_table, to_table

from strategies import mappings, problems, archs, workloads
from scaled import quick_and_full


def assert_same(arch, workload, mapping, costs, row=0):
    ev = evaluate(arch, workload, mapping)
    for lv, lc in enumerate(ev.levels):
        for t, tensor in enumerate(workload.tensors):
            got = (costs.reads[row, lv, t], costs.fills[row, lv, t], costs.updates[row, lv, t])
            if tensor.name in lc.tensors:
                c = lc.tensors[tensor.name]
                assert got == (c.reads, c.fills, c.updates), (lc.name, tensor.name)
            else:
                assert got == (0, 0, 0)
        assert costs.instances[row, lv] == lc.instances
        assert np.isclose(costs.level_cycles[row, lv], lc.cycles, rtol=1e-12)
    assert np.isclose(costs.energy_pj[row], ev.energy_pj, rtol=1e-12)
    assert costs.cycles[row] == ev.cycles
    assert np.isclose(costs.utilization[row], ev.utilization, rtol=1e-12)
    assert costs.resident[row] == ev.resident and costs.waves[row] == ev.waves
    for lv, lc in enumerate(ev.levels):
        assert np.isclose(costs.level_latency_hidden[lv, row], lc.latency_hidden, rtol=1e-12)
        assert np.isclose(costs.level_latency_exposed[lv, row], lc.latency_exposed, rtol=1e-12)


@quick_and_full(40, 400, problems(latency=True))
def test_agree_with_latency_and_occupancy(problem):
    """Levels with an access latency, on GPU-like archs with occupancy limits too."""
    arch, workload, mapping = problem
    costs = evaluate_many(arch, workload, to_table([mapping], len(workload.dims), len(workload.tensors)))
    assert_same(arch, workload, mapping, costs)


@quick_and_full(30, 300, problems(latency=True))
def test_latency_never_lowers_cycles(problem):
    """Latency only adds time: the same mapping without any latency is never slower (the
    joint search's lower bounds rely on this)."""
    import dataclasses
    arch, workload, mapping = problem
    plain = dataclasses.replace(arch, gpu=None, levels=tuple(dataclasses.replace(lv, latency=0.0)
                                                             for lv in arch.levels))
    table = to_table([mapping], len(workload.dims), len(workload.tensors))
    with_latency, without = evaluate_many(arch, workload, table), evaluate_many(plain, workload, table)
    assert (with_latency.level_time >= without.level_time - 1e-9).all()
    assert with_latency.cycles[0] >= without.cycles[0]


@quick_and_full(40, 1000, problems())
def test_scalar_and_vectorised_agree(problem):
    arch, workload, mapping = problem
    costs = evaluate_many(arch, workload, to_table([mapping], len(workload.dims), len(workload.tensors)))
    assert_same(arch, workload, mapping, costs)


@quick_and_full(12, 40, st.data())
def test_agree_row_by_row_in_one_table(data):
    """Many different mappings in one table: no row leaks into another."""
    workload = data.draw(workloads())
    arch = data.draw(archs())
    batch = [data.draw(mappings(arch, workload)) for _ in range(12)]
    costs = evaluate_many(arch, workload, to_table(batch, len(workload.dims), len(workload.tensors)))
    for row, mapping in enumerate(batch):
        assert_same(arch, workload, mapping, costs, row)


@quick_and_full(30, 100, problems())
def test_table_round_trip(problem):
    arch, workload, mapping = problem
    table = to_table([mapping], len(workload.dims), len(workload.tensors))
    again = to_table([from_table(table, 0)], len(workload.dims), len(workload.tensors))
    a, b = evaluate_many(arch, workload, table), evaluate_many(arch, workload, again)
    assert (a.reads == b.reads).all() and (a.fills == b.fills).all() and (a.updates == b.updates).all()


@quick_and_full(6, 40, st.data())
def test_agree_on_deep_convolution_tables(data):
    """Sliding windows under four or five levels, many mappings in one table: the vectorised
    path takes a loop's stride from the spans (a level's loops are a permutation of the dims)
    and a slot's wrap from the levels between it and the tile's level, summed per level; the
    scalar path steps the loops. Rows differ in keeps and stages, so the per-mapping and the
    whole-table forms of each rule (a keep or a buffering shared by every row) both run."""
    workload = data.draw(workloads(kinds=("conv1d", "conv1d-strided", "conv2d")))
    arch = data.draw(archs(min_levels=4, max_levels=5, latency=data.draw(st.booleans())))
    batch = [data.draw(mappings(arch, workload)) for _ in range(10)]
    costs = evaluate_many(arch, workload, to_table(batch, len(workload.dims), len(workload.tensors)))
    for row, mapping in enumerate(batch):
        assert_same(arch, workload, mapping, costs, row)


@quick_and_full(6, 40, st.data())
def test_a_row_is_priced_alike_alone_and_in_a_table(data):
    """Every field of a mapping's costs, bit for bit, whether its table holds it alone or among
    others, and pricing writes nothing into the table: the vectorised path picks the slots that
    step in some row (all of them, as a view, or an index array: a copy), and hands views of
    the table's factors around (a product of one array is that array) that no rule may write."""
    workload = data.draw(workloads(kinds=("conv1d", "conv1d-strided", "conv2d", "gemm")))
    arch = data.draw(archs(min_levels=3, max_levels=5, latency=data.draw(st.booleans())))
    batch = [data.draw(mappings(arch, workload)) for _ in range(8)]
    table = to_table(batch, len(workload.dims), len(workload.tensors))
    before = [a.copy() for a in (table.factors, table.order, table.keep, table.stages)]
    together = evaluate_many(arch, workload, table)
    for a, b in zip(before, (table.factors, table.order, table.keep, table.stages)):
        assert np.array_equal(a, b)
    for row in range(len(batch)):
        alone = evaluate_many(arch, workload, table.take(np.array([row])))
        for name, value in vars(together).items():
            if isinstance(value, np.ndarray):
                assert np.array_equal(value[..., row:row + 1], getattr(alone, name)), name


@quick_and_full(10, 100, st.data())
def test_the_costs_of_some_rows_are_those_of_pricing_them_alone(data):
    """`Costs.take` (the keep parts' roots are priced together, then bounded part by part): the
    rows taken from a table's costs are exactly the costs of a table of those rows."""
    import dataclasses
    arch, workload = data.draw(archs(latency=True)), data.draw(workloads())
    table = to_table([data.draw(mappings(arch, workload)) for _ in range(6)], len(workload.dims), len(workload.tensors))
    rows = np.array(data.draw(st.lists(st.integers(0, 5), min_size=1, max_size=6)))
    taken, alone = evaluate_many(arch, workload, table).take(rows), evaluate_many(arch, workload, table.take(rows))
    for field in dataclasses.fields(alone):
        a, b = getattr(taken, field.name), getattr(alone, field.name)
        assert (np.array_equal(a, b) if isinstance(b, np.ndarray) else a == b), field.name

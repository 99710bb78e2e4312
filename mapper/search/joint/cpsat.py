"""CP-SAT proposals for the joint search (the only module that imports OR-Tools).

Variables: per dim, which row of its factorisation table it takes (so divisibility to the
native operation shape holds by construction); through element constraints, per level the
tile extent, its log2 (scaled), and the spatial split of every dim. Constraints: every level's
fanout along x and y, its capacity for the tensors it must keep at its fewest stages (tiles as
exact products of extents, `tiles.extent`), and on a GPU the shared memory a block needs for
the required occupancy. Objective, in the log domain: the traffic into each level of a tensor
shrinks with the tile extents of the dims that do not index it (the reuse it can capture), so
maximise sum over levels and tensors of (energy per word of that link) x sum of log2 of those
extents, plus (for time-sensitive objectives) the log2 of the compute units kept busy.
Solutions are only proposals: each is expanded over its loop orders, keeps and stages and
priced by the cost model; the branch and bound does the proving.
"""
from __future__ import annotations

import math
import threading
import time

import numpy as np
from ortools.sat.python import cp_model

from ... import tiles
from ...mapspace import Mapspace, sampling, tables
from ..bounds import link_weight
from ..context import SearchContext

SCALE = 1000          # log2 values are scaled to integers
MIN_SOLVE_S = 0.05    # wall seconds of solving below which no proposal is worth its model
MAX_COMBINED = 200_000  # values of one element constraint over a combined index, at most


class _Collector(cp_model.CpSolverSolutionCallback):
    def __init__(self, rows, limit: int):
        super().__init__()
        self.rows, self.limit, self.solutions = rows, limit, []

    def on_solution_callback(self):
        self.solutions.append([self.value(r) for r in self.rows])
        if len(self.solutions) >= self.limit:
            self.stop_search()


def propose(space: Mapspace, context: SearchContext, time_limit: float, favour_parallelism: bool = True,
            hint: list[int] | None = None, max_solutions: int = 20, seed: int = 0,
            deterministic_time: float = 8.0) -> np.ndarray | None:
    """Factor arrays (L, 3, D, N) of up to `max_solutions` improving CP-SAT solutions, or None
    when the space has padded extents (several per dim; the tree search covers those).

    Against the command's wall-clock deadline (`context`), building the model (Python, slow
    on a large space, slower under load) counts too: no proposals (an
    empty array) when building has used half of what was left at entry, or when less than
    MIN_SOLVE_S of solving would remain."""
    return start(space, context, time_limit, favour_parallelism, hint, max_solutions, seed,
                 deterministic_time).collect()


class Proposals:
    """CP-SAT solving in a worker thread (it releases the interpreter while it solves), so
    that the search goes on meanwhile; `collect()` waits for it and gives `propose`'s answer."""

    def __init__(self, space: Mapspace, answer: np.ndarray | None = None, solve=None, context=None):
        self.space, self.answer, self.solve, self.context = space, answer, solve, context

    def ready(self) -> bool:
        """Whether `collect()` would answer at once."""
        return self.solve is None or not self.solve[2].is_alive()

    def cancel(self) -> None:
        """Stop the solve (its answer is no longer wanted) and wait for its thread."""
        if self.solve is not None:
            solver, _, worker, _ = self.solve
            solver.stop_search()
            worker.join()
            self.solve = None

    def collect(self) -> np.ndarray | None:
        if self.solve is not None:
            solver, collector, worker, outcome = self.solve
            _wait(solver, worker, self.context)
            self.solve = None
            if self.context is not None:
                self.context.past_deadline()        # recorded when the wall-clock cap cut the solve
            ok = outcome and outcome[0] in (cp_model.OPTIMAL, cp_model.FEASIBLE) and collector.solutions
            if ok:
                index = np.array(collector.solutions, np.int64).T                       # (D, S)
                self.answer = sampling.assemble(self.space, [t[i] for t, i in zip(self.space.dim_tables, index)])
        return self.answer


def start(space: Mapspace, context: SearchContext, time_limit: float, favour_parallelism: bool = True,
          hint: list[int] | None = None, max_solutions: int = 20, seed: int = 0,
          deterministic_time: float = 8.0) -> Proposals:
    """`propose`, its model built here and solved in a worker thread."""
    if any(len(e) > 1 for e in space.extents):
        return Proposals(space)
    empty = np.zeros((space.n_levels, 3, space.n_dims, 0), np.int64)       # no proposals
    none = Proposals(space, empty)
    out_of_time = _build_clock(context)
    if out_of_time():
        return none
    built = _Model(space)
    if out_of_time():
        return none
    log_units = built.fanouts()
    footprint_bits = []
    for lv in range(1, space.n_levels):
        if out_of_time():
            return none
        footprint_bits.append(built.capacity(lv))
    built.occupancy(footprint_bits)
    built.objective(log_units, favour_parallelism)
    model = built.model
    if hint is not None:
        for var, value in zip(built.rows, hint):
            model.add_hint(var, value)
    wall_cap = _wall_seconds(context, time_limit)
    if out_of_time() or (wall_cap < MIN_SOLVE_S and out_of_time.walled):
        return none
    solver = cp_model.CpSolver()
    # a deterministic-time budget keeps the proposals reproducible while the wall-clock
    # `time_limit` does not bind first; on a counting clock the cap itself is in deterministic time
    counted = context.per_evaluation is not None
    solver.parameters.max_deterministic_time = min(deterministic_time, time_limit) if counted else deterministic_time
    solver.parameters.max_time_in_seconds = wall_cap
    solver.parameters.catch_sigint_signal = False   # Ctrl-C is the CLI's: it keeps the best so far
    solver.parameters.num_workers = 1      # deterministic under the seed
    solver.parameters.random_seed = seed
    collector, outcome = _Collector(built.rows, max_solutions), []
    worker = threading.Thread(target=lambda: outcome.append(solver.solve(model, collector)), daemon=True)
    worker.start()
    return Proposals(space, empty, (solver, collector, worker, outcome), context)


class _Model:
    """The CP-SAT model of a space, built step by step (the variables in a fixed order, so that
    the solve is reproducible)."""

    def __init__(self, space: Mapspace):
        self.space = space
        model = self.model = cp_model.CpModel()
        self.views = views = [tables.level_view(space, t) for t in space.dim_tables]     # temporal, spatial, tile
        self.rows = [model.new_int_var(0, len(t) - 1, f"row_{d}") for d, t in enumerate(space.dim_tables)]
        dims, levels = range(space.n_dims), range(space.n_levels)
        self.tile_index = [[self.indexed(d, views[d][2][:, lv], f"tidx_{lv}_{d}") for d in dims] for lv in levels]
        self.tile = [[self.element(d, views[d][2][:, lv], f"tile_{lv}_{d}") for d in dims] for lv in levels]
        self.log_tile = [[self.element(d, np.round(np.log2(views[d][2][:, lv]) * SCALE), f"log_{lv}_{d}")
                          for d in dims] for lv in levels]

    def element(self, d, values, name):
        """(variable, upper bound): values[row_d]."""
        values = [int(v) for v in values]
        var = self.model.new_int_var(min(values), max(values), name)
        self.model.add_element(self.rows[d], values, var)
        return var, max(values)

    def indexed(self, d, values, name):
        """(index variable, distinct values): which of the distinct `values` row_d picks."""
        distinct, position = np.unique(np.asarray(values, np.int64), return_inverse=True)
        var = self.model.new_int_var(0, len(distinct) - 1, name)
        self.model.add_element(self.rows[d], [int(p) for p in position.reshape(-1)], var)
        return var, [int(v) for v in distinct]

    def product(self, factors, name):
        """(variable, upper bound) for the product of indexed factors: one element constraint
        over the combined index while the table stays small, else multiplication chains."""
        model = self.model
        (index, values), rest = factors[0], factors[1:]
        for i, (other, other_values) in enumerate(rest):
            if len(values) * len(other_values) > MAX_COMBINED:
                break
            combined = model.new_int_var(0, len(values) * len(other_values) - 1, f"{name}_i{i}")
            model.add(combined == index * len(other_values) + other)
            index, values = combined, [a * b for a in values for b in other_values]
        else:
            var = model.new_int_var(min(values), max(values), name)
            model.add_element(index, values, var)
            return var, max(values)
        var = model.new_int_var(min(values), max(values), f"{name}_partial")
        model.add_element(index, values, var)
        pairs = [(var, max(values))]
        for j, (other, other_values) in enumerate(rest[i:]):
            value = model.new_int_var(min(other_values), max(other_values), f"{name}_v{j}")
            model.add_element(other, other_values, value)
            pairs.append((value, max(other_values)))
        return _product(model, pairs, name)

    def fanouts(self) -> list:
        """Every level's spatial split within its fanout on each mesh axis; the log2 of the
        units each dim's split keeps busy (for the objective)."""
        space, log_units = self.space, []
        for lv in range(space.n_levels):
            fans = []
            for kind, limit in zip((1, 2), space.arch.fanout(lv)):
                cols = [k for k, slot in enumerate(space.slots) if slot == (lv, kind)]
                if not cols:
                    continue
                parts = [self.indexed(d, space.dim_tables[d][:, cols[0]], f"sp_{lv}_{kind}_{d}")
                         for d in range(space.n_dims)]
                fans.append(self.product(parts, f"fan_{lv}_{kind}"))
                self.model.add(fans[-1][0] <= limit)
                log_units += [self.element(d, np.round(np.log2(space.dim_tables[d][:, cols[0]]) * SCALE),
                                           f"lsp_{lv}_{kind}_{d}")[0] for d in range(space.n_dims)]
            if len(fans) == 2 and space.arch.levels[lv].clusters is not None:
                # block clusters side by side (x) times their CTAs (y): at most the children
                # (the schedulable count per cluster size is checked when the proposal is priced)
                both = _product(self.model, [(v, hi) for v, hi in fans], f"fan_{lv}_xy")
                self.model.add(both[0] <= space.arch.fanout_units(lv))
        return log_units

    def capacity(self, lv: int):
        """Level lv's footprint in bits (the tensors it must keep, at its fewest stages), held
        within its capacity; returned for the occupancy constraint (0 when it must keep none)."""
        space, model = self.space, self.model
        arch, workload = space.arch, space.workload
        must = [t for t in range(len(workload.tensors)) if all(t in k for k in space.choices[lv].keeps)]
        terms = []
        for t in must:
            axes = workload.tensors[t].axes
            if all(len(axis) == 1 and axis[0][1] == 1 for axis in axes):
                words = self.product([self.tile_index[lv][axis[0][0]] for axis in axes], f"words_{lv}_{t}")[0]
            else:
                extents = []
                spans, highest = [var for var, _ in self.tile[lv]], [hi for _, hi in self.tile[lv]]
                for a, axis in enumerate(axes):
                    hi = int(tiles.extent(axis, highest))
                    e = model.new_int_var(1, hi, f"ext_{lv}_{t}_{a}")
                    model.add(e == tiles.extent(axis, spans))
                    extents.append((e, hi))
                words = _product(model, extents, f"words_{lv}_{t}")[0]
            terms.append(words * round(arch.levels[lv].word_bytes(workload.tensors[t]) * 8))
        bits = sum(terms) * min(space.choices[lv].stages) if terms else 0
        capacity = arch.levels[lv].capacity
        if terms and not math.isinf(capacity):
            model.add(tiles.within(bits, int(capacity * 8)))
        return bits

    def occupancy(self, footprint_bits: list) -> None:
        """On a GPU with a required occupancy: that many blocks' shared memory within an SM's."""
        space = self.space
        if space.gpu_levels is not None and space.constraints.min_occupancy > 1:
            smem, _ = space.gpu_levels
            if smem >= 1:
                self.model.add(footprint_bits[smem - 1] * space.constraints.min_occupancy
                               <= int(space.arch.gpu.smem_per_sm * 8))

    def objective(self, log_units: list, favour_parallelism: bool) -> None:
        """Maximise the reuse each link's tiles capture, weighed by its energy per word (and the
        units kept busy, for time-sensitive objectives)."""
        space = self.space
        workload, n_levels = space.workload, space.n_levels
        objective = []
        for lv in range(1, n_levels):
            for t, tensor in enumerate(workload.tensors):
                if not any(t in k for k in space.choices[lv].keeps):
                    continue
                weight = int(round(link_weight(space, lv, t) * 1000)) or 1
                for d in range(space.n_dims):
                    if d not in tensor.dims:
                        objective.append(weight * self.log_tile[lv][d][0])
        if favour_parallelism and log_units:
            # time scales with the units kept busy: weigh parallelism above any single link
            weight = 4 * sum(int(round(link_weight(space, lv, t) * 1000)) or 1
                             for lv in range(1, n_levels) for t in range(len(workload.tensors)))
            objective += [weight * u for u in log_units]
        self.model.maximize(sum(objective))


def _wait(solver, worker, context: SearchContext | None) -> None:
    """Wait for the solve in `worker` while watching for Ctrl-C: the CLI's SIGINT handler runs
    only between Python steps of the main thread, and a solve in it would let it run (and the
    command stop) only at the solver's wall cap, seconds later."""
    while worker.is_alive():
        worker.join(0.05)
        if context is not None and context.interrupted:
            solver.stop_search()


def _build_clock(context: SearchContext):
    """A check for the model building: True once it has used half of the wall seconds left to
    the command's deadline at the start (at once when under 2 x MIN_SOLVE_S were left). Always
    False without a wall deadline (none, or an evaluation budget): the proposals then never
    depend on the machine's load."""
    left, started = context.seconds_left(), time.perf_counter()

    def out_of_time() -> bool:
        return out_of_time.walled and (left < 2 * MIN_SOLVE_S or time.perf_counter() - started > left / 2)
    out_of_time.walled = not math.isinf(left)
    return out_of_time


def _wall_seconds(context: SearchContext, time_limit: float) -> float:
    """The solver's wall-clock cap: within the command's time limit (half of what is left);
    on a counting clock (an evaluation budget, a work clock) only the deterministic budget binds,
    so the proposals do not depend on the machine's load, the deadline kept as a stop."""
    if context.per_evaluation is not None:
        cap = max(60.0, 10 * time_limit)
        return cap if context.deadline is None else max(0.01, min(cap, context.deadline - time.perf_counter()))
    if context.deadline is not None:      # at most half of what is left: the walk needs the rest
        return max(0.01, min(time_limit, (context.deadline - time.perf_counter()) / 2))
    return time_limit


def _product(model, factors, name):
    """(variable, upper bound) equal to the product of the (variable, upper bound) `factors`;
    None when the bound would overflow what CP-SAT holds (the caller drops the constraint)."""
    out, hi = factors[0]
    for i, (f, f_hi) in enumerate(factors[1:]):
        hi = hi * f_hi
        var = model.new_int_var(0, hi, f"{name}_{i}")
        model.add_multiplication_equality(var, [out, f])
        out = var
    return out, hi

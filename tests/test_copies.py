"""Bounds that see the copies a split over a fanout that shares nothing forces (every SM
fills its own), and the factor choices bounded before the loop orders of a level above the
leaves are crossed in (`bounds/innermost.py` `with_split`, `joint/copies_cut.py`,
`joint/order_free.py` `PartialOrderFreeCut`)."""
import itertools

import numpy as np
import pytest
from hypothesis import strategies as st

from mapper.constraints import Constraints
from mapper.cost import evaluate_many
from mapper.load import arch_from_dict, workload_from_dict
from mapper.mapping import along_last
from mapper.mapspace import Mapspace, pruning, sampling
from mapper.search import Exhaustive, Joint, parse_objective
from mapper.search.bounds import LinkBounds, lower_bounds
from mapper.search.bounds import window
from mapper.search.bounds.node import deepest_keeper
from mapper.search.joint import copies_cut, order_free
from mapper.search.tree import LevelTree, Nodes, feasible
from mapper.units import Where

from prefixes import NEVER_BEATEN, prefix_nodes, prefix_table
from scaled import quick_and_full
from test_joint import _walk

W = Where("<test>")


def _gpu_like_dict(shares: bool = False) -> dict:
    """DRAM / L2 / a fanout of 2 buffers (like SMs: the L2's network shares nothing, unless
    `shares`) / a fanout of 2 register files each, with energies that make copies cost."""
    level = {"max_stages": 1, "block_size": 1}
    return {
        "name": "gpu-like", "clock": "1 GHz",
        "levels": [dict(level, name="DRAM", energy={"read": 100, "write": 100, "update": 100}),
                   dict(level, name="L2", capacity="64 B", energy={"read": 8, "write": 8, "update": 8},
                        multicast=shares, spatial_reduction=shares),
                   dict(level, name="SM", capacity="16 B", instances=2, mesh=[2, 1], max_stages=2,
                        energy={"read": 3, "write": 3, "update": 3}),
                   dict(level, name="RF", capacity="4 B", instances=4, mesh=[2, 2],
                        energy={"read": 1, "write": 1, "update": 1})],
        "compute": {"mesh": [2, 2], "instances": 4, "energy": 0.5}}


def _gpu_like(shares: bool = False):
    return arch_from_dict(_gpu_like_dict(shares), W)


def _workloads():
    return [workload_from_dict({"name": "g", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                                "sizes": {"m": 4, "n": 2, "k": 2}, "dtype": 8}, W),
            workload_from_dict({"name": "c", "einsum": "O[k,p] += I[c,p+r] * W[k,c,r]",
                                "sizes": {"k": 2, "c": 1, "p": 4, "r": 2}, "dtype": 8, "dtypes": {"O": 16}}, W)]


def _completions(tree: LevelTree, space: Mapspace, nodes: Nodes):
    """Every valid complete mapping under `nodes`, with the node each comes from."""
    origin = np.arange(len(nodes))
    while nodes.depth < tree.leaf_depth:
        children, parent = [], []
        for i in range(len(nodes)):
            kids = tree.children(nodes.take([i]))
            children.append(kids)
            parent.append(np.full(len(kids), origin[i]))
        nodes, origin = Nodes.concat(children), np.concatenate(parent)
    table = tree.table(nodes)
    valid = np.flatnonzero(pruning.valid_mask(space, table))
    return table.take(valid), origin[valid]


def factor_choices(tree: LevelTree, nodes: Nodes):
    """Each factor choice of the depth-1 `nodes`' children once (its first child: every order,
    stage and keep follows it): its parent, its groups, and the choices as depth-2 nodes."""
    children = tree.children(nodes)
    identity = np.vstack([children.groups.T, children.orders[:-1].reshape(-1, len(children)),
                          children.stages[:-1], children.keeps[:-1]])
    first = np.flatnonzero(np.r_[True, np.any(identity[:, 1:] != identity[:, :-1], axis=0)])
    parents = np.searchsorted(np.cumsum([len(tree.children(nodes.take([i]))) for i in range(len(nodes))]),
                              first, side="right")
    groups = children.groups[first]
    return parents, groups, Nodes(2, groups, *(along_last(a, parents) for a in (nodes.orders, nodes.stages, nodes.keeps)))


@pytest.mark.parametrize("workload", _workloads(), ids=["gemm", "conv1d"])
def test_node_bounds_with_their_split_stay_below_every_mapping_under_them(workload):
    """At every depth, the bounds of every mapping's prefix (energy, and EDP refined as under
    an incumbent that beats none) stay at or below its cost, and the node's split over the
    SMs raises the innermost level's bound above the one that counts one SM, for some node."""
    arch = _gpu_like()
    space = Mapspace(arch, workload, Constraints())
    links = LinkBounds(space)
    assert links.innermost.takes_split_at(1)
    sample = sampling.sample(space, 3000, np.random.default_rng(0))
    costs = evaluate_many(arch, workload, sample)
    objective = parse_objective("edp", arch)
    raised = 0
    for depth, node, node_costs in prefix_nodes(space, sample):
        bounds = lower_bounds(space, objective, depth, node, node_costs, links, refine_below=NEVER_BEATEN)
        assert (bounds.energy <= costs.energy_pj * (1 + 1e-9)).all(), depth
        assert (bounds.objective <= costs.edp * (1 + 1e-9)).all(), depth
        split = links.innermost.node_split(depth, node)
        if split is not None:
            deepest = [deepest_keeper(space, t, depth, node) for t in range(len(workload.tensors))]
            plain = links.innermost.bound(depth, node, deepest)
            raised += int((links.innermost.with_split(depth, deepest, split) > plain * (1 + 1e-9)).sum())
    assert raised > 0


@pytest.mark.parametrize("workload", _workloads(), ids=["gemm", "conv1d"])
def test_a_factor_choice_above_the_leaves_is_bounded_below_every_completion_of_it(workload):
    """For every factor choice of the depth-1 nodes (whose children are partial nodes): the
    bound before the L2's orders are crossed in (`PartialOrderFreeCut.bounds`) and the bound
    from the choice's split over the SMs (`CopiesCut`, as energy) lie below the least energy
    among the choice's completions, and the former's cycles bound below their fewest cycles,
    the same whether each keep option is priced at its fewest stages or at every stage count;
    and the copies bound cuts none whose completions beat a bar."""
    spec = _gpu_like_dict()
    for level, bandwidth in zip(spec["levels"], ("4 B/cycle", "2 B/cycle", "1 B/cycle")):
        level["bandwidth"] = bandwidth          # so that the traffic's time bounds the cycles
    arch = arch_from_dict(spec, W)
    space = Mapspace(arch, workload, Constraints())
    tree = LevelTree(space)
    objective = parse_objective("energy", arch)
    walk = _walk(space, objective, tree)
    nodes = tree.children(tree.roots())
    nodes = nodes.take(np.flatnonzero(feasible(space, 1, tree.table(nodes))))
    assert tree.leaf_depth == 3 and order_free.PartialOrderFreeCut.applies(walk.view(), nodes)
    assert copies_cut.CopiesCut.applies(walk.view(), nodes)
    partial = order_free.PartialOrderFreeCut(walk.view(), nodes, np.zeros(len(nodes)))
    copies = copies_cut.CopiesCut(walk.view(), nodes, np.zeros(len(nodes)))
    parents, groups, choices = factor_choices(tree, nodes)
    allowed = tree.fitting_choices(choices)
    priced = partial._priced_options(allowed)
    assert priced.sum() < allowed.sum() and not (priced & ~allowed).any()
    energy, cycles = partial.bounds(choices, priced, parents)
    every_energy, every_cycles = partial.bounds(choices, allowed, parents)
    assert np.array_equal(energy, every_energy) and np.array_equal(cycles, every_cycles)
    completions, origin = _completions(tree, space, tree.expand(choices, 1, allowed=allowed)[0])
    choice_of = tree.expand(choices, 1, allowed=allowed)[1][origin]
    costs = evaluate_many(arch, workload, completions)
    least, fewest = np.full(len(choices), np.inf), np.full(len(choices), np.inf)
    np.minimum.at(least, choice_of, costs.energy_pj)
    np.minimum.at(fewest, choice_of, costs.cycles)
    finite = np.isfinite(least)
    assert finite.sum() > 20
    assert (energy[finite] <= least[finite] * (1 + 1e-9)).all()
    assert (cycles[finite] <= fewest[finite] * (1 + 1e-9)).all() and (cycles[finite] > 0).all()
    # the copies bound: beaten exactly where its energy exceeds the bar, never above a completion
    dropped = 0
    for bar in np.quantile(least[finite], [0.1, 0.5, 0.9]):
        cut = copies(parents, groups, (bar, bar, 0.0))
        assert not (cut & (least < bar * (1 - 1e-9))).any()
        dropped += int(cut.sum())
    assert dropped > 0


def _conv2d(p: int = 4):
    return workload_from_dict({"name": "c2", "einsum": "O[k,p,q] += I[c,p+r,q+s] * W[k,c,r,s]",
                               "sizes": {"k": 2, "c": 2, "p": p, "q": 2, "r": 2, "s": 2}, "dtype": 8,
                               "dtypes": {"O": 32}}, W)


def _conv2d_p3():
    """p=3: exhaustive's reference in a third of p=4's time, the cut still dropping choices."""
    return _conv2d(p=3)


def _conv1d():
    return workload_from_dict({"name": "c", "einsum": "O[k,p] += I[c,p+r] * W[k,c,r]",
                               "sizes": {"k": 2, "c": 2, "p": 6, "r": 3}, "dtype": 8}, W)


# each search at p=4 ~8 s here (exhaustive's): the default run's 2-D convolution has p=3 (~3 s),
# the slow run every objective at p=4
ROOMY = (None, "64 B", "24 B", "8 B")       # room for loops at every level: the orders matter


@pytest.mark.parametrize("workload, capacities, objective, cutting", [
    (_conv1d, None, "edp", copies_cut.CopiesCut), (_conv2d_p3, ROOMY, "edp", order_free.PartialOrderFreeCut),
    *(pytest.param(_conv2d, ROOMY, o, order_free.PartialOrderFreeCut, marks=pytest.mark.slow)
      for o in ("edp", "energy", "delay,energy"))])
def test_the_joint_search_with_both_cuts_returns_the_optimum(monkeypatch, workload, capacities, objective, cutting):
    """On GPU-like spaces the joint search, with the factor choices above the leaves cut by
    their copies and by their orders' least, returns exactly exhaustive search's mapping, and
    the cut under test drops some choices."""
    spec = _gpu_like_dict()
    if capacities:
        spec["levels"] = [{**level, "capacity": capacity} if capacity else level
                          for level, capacity in zip(spec["levels"], capacities)]
    arch = arch_from_dict(spec, W)
    if cutting is copies_cut.CopiesCut:
        # the windows' fills in the innermost bound leave the cut nothing here: without them
        # the node bounds are those it was built under, and leave it the conv1d's choices
        monkeypatch.setattr(window, "steps", lambda tensor, trips, ways, cutoffs, give_up=None:
                            np.ones((len(ways), trips.shape[1])))
        monkeypatch.setattr(window, "touched", lambda tensor, tile, trips: np.zeros(tile.shape[1]))
    space = Mapspace(arch, workload(), Constraints())
    objective = parse_objective(objective, arch)
    seen = []
    call = cutting.__call__

    def counted(self, *args):
        out = call(self, *args)
        seen.append(int(out.sum()))
        return out
    monkeypatch.setattr(cutting, "__call__", counted)
    exact = Exhaustive().run(space, objective)
    # greedy's mapping to start from: the cuts need an incumbent to bound against
    joint = Joint(local_search=False, dives=0, cpsat_seconds=0, parts_above=10**9,
                  parallel_above=10**9, workers=1).run(space, objective)
    assert joint.optimal and joint.score == exact.score and joint.mapping == exact.mapping
    assert sum(seen) > 0


def test_a_nodes_copies_of_the_output_are_not_read_back_twice():
    """A split along k over a fanout that shares nothing makes three copies of Z in the buffers
    below it; their partial sums are added in DRAM, whose read-backs the node has priced. The
    read-backs below (in the buffers, or in registers that keep Z) must not then be charged as
    if Z had one copy there (a keep part's bound was 130.5 pJ on a 94.5 pJ mapping: CI,
    hypothesis). By hand, on a 3x3x3 GEMM (Z 32-bit, A and B 8-bit; 0.5 pJ per byte read at
    every level, 1 pJ per MAC), with the buffers keeping Z and A and the registers nothing:
    27 MACs; from DRAM Z's 27 partial sums into 9 words read back 18 times x 4 B, A's 3 words
    into each of 3 buffers, B once per MAC; from the buffers A once per MAC. Then every keep set
    of both levels below DRAM that has the buffers keep Z, each bound at every depth, of the
    whole space and of the mapping's keep part."""
    from mapper.constraints import LevelConstraints
    from mapper.mapping import MappingTable
    level = {"max_stages": 1, "block_size": 1, "energy_per_byte": {"read": 0.5}}
    arch = arch_from_dict({"name": "copies", "clock": "1 GHz", "compute": {"mesh": [4, 2], "instances": 8, "energy": 1.0},
                           "levels": [dict(level, name="DRAM", multicast=False, spatial_reduction=False),
                                      dict(level, name="Buffer", mesh=[4, 1], instances=4),
                                      dict(level, name="Registers", mesh=[4, 2], instances=8)]}, W)
    workload = workload_from_dict({"name": "g", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                                   "sizes": {"m": 3, "n": 3, "k": 3}, "dtype": 8, "dtypes": {"Z": 32}}, W)
    space = Mapspace(arch, workload, Constraints(levels=(("every", LevelConstraints(bypass=True)),)))
    factors = np.ones((3, 3, 3, 1), np.int64)
    factors[0, 1, 2] = 3            # k over the buffers
    factors[1, 0, 1] = 3            # n in each buffer
    factors[2, 0, 0] = 3            # m in the registers
    order = np.tile(np.arange(3)[None, :, None], (3, 1, 1))
    whole = LinkBounds(space)
    objective = parse_objective("energy", arch)
    checked = 0
    for buffer, registers in itertools.product(space.choices[1].keeps, space.choices[2].keeps):
        if 0 not in buffer:
            continue
        keep = np.zeros((3, 3, 1), bool)
        keep[0], keep[1, list(buffer)], keep[2, list(registers)] = True, True, True
        table = MappingTable(factors, order, keep, np.ones((3, 1), np.int64))
        energy = evaluate_many(arch, workload, table).energy_pj[0]
        if (buffer, registers) == ((0, 1), ()):
            assert energy == 27 + 0.5 * (18 * 4 + 3 * 3 + 27) + 0.5 * 27 == 94.5
        checked += _energy_bounds_stay_below(space, whole, objective, table, energy)
    assert checked == 4 * 8 * 2 * 4


def _energy_bounds_stay_below(space, whole, objective, table, energy) -> int:
    """Checks that the energy bound of every prefix of the one mapping in `table`, in the whole
    space and in the mapping's keep part, is at most its `energy`; returns how many."""
    picks = tuple(choice.keeps.index(tuple(np.flatnonzero(table.keep[lv, :, 0])))
                  for lv, choice in enumerate(space.choices))
    part, checked = space.part(picks), 0
    for bounded, links in ((space, whole), (part, whole.for_space(part))):
        for depth, node, node_costs in prefix_nodes(space, table):
            bound = lower_bounds(bounded, objective, min(depth, space.n_levels), node, node_costs, links,
                                 refine_below=NEVER_BEATEN)
            assert bound.energy[0] <= energy * (1 + 1e-9), (picks, bounded is part, depth)
            checked += 1
    return checked


def test_copies_a_network_adds_up_on_the_way_are_not_read_back_above():
    """A k split of 2 over DRAM's network, which adds partial sums, and 2 over the buffers',
    which does not: DRAM receives each of Z's 6 words from the 2 buffer halves only, 12
    updates, 6 read back, not 18 (the read-modify-write bound read back a word per copy made
    anywhere above: 338 pJ on this 326 pJ mapping). By hand, a 2x3x4 GEMM (Z 32-bit), the
    registers keeping Z and A, the buffers nothing: 24 MACs; DRAM (1 pJ a read, update, 0.5
    per byte read): Z 12 updates and 6 read-backs of 4 B, A's 8 words once, B once per MAC;
    the registers (4 pJ a read and a write, 4 per byte read): A once per MAC, filled once."""
    from mapper.constraints import LevelConstraints
    from mapper.mapping import MappingTable
    arch = arch_from_dict({
        "name": "adds-above", "clock": "1 GHz", "compute": {"mesh": [16, 2], "instances": 32, "energy": 1.0},
        "levels": [{"name": "DRAM", "multicast": False, "spatial_reduction": True,
                    "energy": {"read": 1.0, "write": 0.0, "update": 1.0}, "energy_per_byte": {"read": 0.5}},
                   {"name": "Buffer", "mesh": [4, 1], "instances": 4, "multicast": False, "spatial_reduction": False,
                    "energy": {"read": 1.0, "write": 0.5, "update": 1.0}, "energy_per_byte": {"read": 4.0}},
                   {"name": "Registers", "mesh": [16, 2], "instances": 32, "multicast": True,
                    "spatial_reduction": False, "energy": {"read": 4.0, "write": 4.0, "update": 0.0},
                    "energy_per_byte": {"read": 4.0}}]}, W)
    workload = workload_from_dict({"name": "g", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                                   "sizes": {"m": 2, "n": 3, "k": 4}, "dtype": 8, "dtypes": {"Z": 32}}, W)
    space = Mapspace(arch, workload, Constraints(levels=(("every", LevelConstraints(bypass=True)),)))
    factors = np.ones((3, 3, 3, 1), np.int64)
    factors[0, 0, 1], factors[0, 1, 2] = 3, 2       # n in DRAM, k over the buffers
    factors[1, 1, 2], factors[1, 2, 0] = 2, 2       # k and m over the registers
    keep = np.zeros((3, 3, 1), bool)
    keep[0], keep[2, :2] = True, True
    order = np.tile(np.arange(3)[None, :, None], (3, 1, 1))
    table = MappingTable(factors, order, keep, np.ones((3, 1), np.int64))
    energy = evaluate_many(arch, workload, table).energy_pj[0]
    assert energy == 24 + (12 + 6 * 3) + 8 * 1.5 + 24 * 1.5 + 24 * 8 + 8 * 4 == 326
    assert _energy_bounds_stay_below(space, LinkBounds(space), parse_objective("energy", arch), table, energy) == 8


@quick_and_full(3, 120, st.data())
def test_bounds_over_networks_that_add_or_share_nothing_stay_below_their_mappings(data):
    """Three or four levels whose networks multicast, add partial sums, both or neither, each
    independently (the copies of the output those that add nothing make, where the read-modify-
    write bounds went wrong twice), with energies per access and per byte: in a few keep parts
    of each space, every prefix's bound at or below each of 400 sampled mappings under it."""
    from mapper.constraints import LevelConstraints
    from test_joint import _keep_picks
    energy = st.sampled_from([0.0, 0.5, 1.0, 4.0])
    levels, mesh = [], [1, 1]
    for i in range(data.draw(st.integers(3, 4), label="levels")):
        if i > 0:
            mesh = [mesh[0] * data.draw(st.sampled_from([1, 2, 4])), mesh[1] * data.draw(st.sampled_from([1, 2]))]
        levels.append({"name": f"L{i}", "mesh": list(mesh), "instances": mesh[0] * mesh[1], "max_stages": 1,
                       "block_size": 1, "multicast": data.draw(st.booleans()),
                       "spatial_reduction": data.draw(st.booleans()),
                       "energy": {k: data.draw(energy) for k in ("read", "write", "update")},
                       "energy_per_byte": {"read": data.draw(energy)}})
    units = [mesh[0] * data.draw(st.sampled_from([1, 2])), mesh[1]]
    arch = arch_from_dict({"name": "networks", "clock": "1 GHz", "levels": levels,
                           "compute": {"mesh": units, "instances": units[0] * units[1], "energy": 1.0}}, W)
    workload = data.draw(st.sampled_from([
        {"name": "g", "einsum": "Z[m,n] += A[m,k] * B[k,n]", "sizes": {"m": 2, "n": 3, "k": 4}, "dtype": 8,
         "dtypes": {"Z": 32}},
        {"name": "c", "einsum": "O[k,p] += I[c,p+r] * W[k,c,r]", "sizes": {"k": 2, "c": 2, "p": 3, "r": 2},
         "dtype": 8, "dtypes": {"O": 16}}]))
    workload = workload_from_dict(workload, W)
    space = Mapspace(arch, workload, Constraints(levels=(("every", LevelConstraints(bypass=True)),)))
    objective = parse_objective(data.draw(st.sampled_from(["energy", "edp"])), arch)
    sample = sampling.sample(space, 400, np.random.default_rng(data.draw(st.integers(0, 1000))))
    costs = evaluate_many(arch, workload, sample)
    score = costs.energy_pj if objective.kind == "energy" else costs.edp
    whole = LinkBounds(space)
    picks = sorted({_keep_picks(space, sample, row) for row in range(len(sample))})
    for keeps in data.draw(st.permutations(picks))[:8]:
        rows = np.array([r for r in range(len(sample)) if _keep_picks(space, sample, r) == keeps])
        table, part = sample.take(rows), space.part(keeps)
        links = whole.for_space(part)
        for depth in range(space.n_levels + 1):
            node = prefix_table(space, table, depth)
            bound = lower_bounds(part, objective, min(depth, space.n_levels), node, evaluate_many(arch, workload, node),
                                 links, refine_below=NEVER_BEATEN).objective
            assert (bound <= score[rows] * (1 + 1e-9)).all(), (keeps, depth)

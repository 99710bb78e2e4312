"""The cost model agrees with the literal loop-nest simulator on random small mappings,
with spatial fanout over both mesh axes, fanout networks with and without multicast and
reduction, bypass and sliding (and strided) windows."""

from mapper.cost import evaluate
from mapper.mapping import AXES

from brute_force import simulate
from strategies import problems
from scaled import quick_and_full


def as_plain(arch, workload, mapping):
    dims = workload.dims
    problem = {"dims": dict(zip(dims, workload.sizes)),
               "tensors": {t.name: {"axes": [{dims[d]: c for d, c in axis} for axis in t.axes],
                                    "output": t.is_output} for t in workload.tensors}}
    nest = [{"name": level.name,
             "temporal": [(dims[d], b) for d, b in lm.temporal],
             "spatial": [(dims[d], b, AXES[a]) for d, b, a in lm.spatial],
             "keep": {workload.tensors[t].name for t in lm.keep},
             "multicast": level.multicast, "reduction": level.reduction, "clusters": level.clusters is not None}
            for level, lm in zip(arch.levels, mapping.levels)]
    return problem, nest, arch.fanout(len(arch.levels) - 1)


@quick_and_full(60, 2000, problems())
def test_cost_model_matches_brute_force(problem):
    arch, workload, mapping = problem
    truth = simulate(*as_plain(arch, workload, mapping))
    ev = evaluate(arch, workload, mapping)
    assert truth["macs"] == ev.macs
    for level in ev.levels:
        simulated = truth["levels"][level.name]
        assert simulated["instances"] == level.instances, level.name
        for name, cost in level.tensors.items():
            want = simulated["tensors"][name]
            assert (cost.reads, cost.fills, cost.updates) == (want["reads"], want["fills"], want["updates"]), \
                (level.name, name)

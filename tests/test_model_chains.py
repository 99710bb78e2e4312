"""Model presets' chains (`chains:` in models/*.yaml): the layers again with their non-GEMM ops
(norms, activations, bias and residual adds, softmax) as op graphs, expanded for every phase;
they stand for exactly the layers they list (same MACs, same counts), and adding them leaves
the sweep's layer points (their keys) exactly as they were."""
from pathlib import Path

import pytest
import yaml

from mapper.errors import SpecError
from mapper.load import load_arch, preset_names
from mapper.sweep.models import expand, load_model, model_from_dict
from mapper.sweep.points import make_point
from mapper.load import load_constraints
from mapper.units import Where

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("llama-7b", "gpt2", "bert-base", "resnet50")
SMALL = {"seq": 16, "batch": 2}


def small_inputs(model):
    return {k: v for k, v in SMALL.items() if k in dict(model.inputs)}


@pytest.mark.parametrize("name", MODELS)
def test_chains_stand_for_their_layers_with_the_same_macs_and_counts(name):
    """Per instance, the chain's einsum ops multiply as many MACs as the layers it lists (an
    independent sum over the layer groups), in every phase, at the presets' sizes and small ones."""
    model = load_model(name)
    assert model.chains, f"{name} has no chains"
    for phase in model.phase_names:
        for inputs in ({}, small_inputs(model)):
            e = expand(model, phase, inputs)
            layer_macs = {}
            for g in e.groups:
                for layer in g.layers:
                    layer_macs[layer] = g.workload.macs
            for chain in e.chains:
                einsums = [op for op in chain.graph.ops if op.family == "einsum"]
                assert sum(op.workload.macs for op in einsums) == sum(layer_macs[n] for n in chain.layers)
                assert any(op.family != "einsum" for op in chain.graph.ops)    # the ops it adds


def test_transformer_presets_gain_their_norms_activations_residuals_and_softmax():
    kinds = {name: {op.kind for c in expand(load_model(name), None, {}).chains for op in c.graph.ops}
             for name in MODELS}
    assert {"rmsnorm", "silu", "mul", "add", "softmax", "mask", "scale"} <= kinds["llama-7b"]
    assert {"layernorm", "gelu", "bias", "add", "softmax", "mask"} <= kinds["gpt2"]
    assert {"layernorm", "gelu", "bias", "add", "softmax"} <= kinds["bert-base"]
    assert {"add", "relu"} <= kinds["resnet50"]
    llama = expand(load_model("llama-7b"), "prefill", {})
    covered = [layer for c in llama.chains for layer in c.layers]
    assert sorted(covered) == sorted(layer.name for layer in load_model("llama-7b").layers)


@pytest.mark.parametrize("name", MODELS)
def test_chains_leave_the_layer_points_exactly_as_they_were(name):
    """The sweep points of a model (their input hashes) with and without its `chains:` section."""
    path = ROOT / "models" / f"{name}.yaml"
    data = yaml.safe_load(path.read_text())
    without = {k: v for k, v in data.items() if k != "chains"}
    arch, space = load_arch("h100"), load_constraints(None)

    def keys(model):
        e = expand(model, None, small_inputs(model))
        return [make_point(arch, g.workload, space, "joint", "edp", {"time_limit": 5.0}).key for g in e.groups]
    assert keys(model_from_dict(data, Where(str(path)))) == keys(model_from_dict(without, Where(str(path))))


def chain_model(chain_overrides: dict) -> dict:
    data = yaml.safe_load((ROOT / "tests" / "data" / "sweep-tiny-chain-model.yaml").read_text())
    data["chains"][0].update(chain_overrides)
    return data


@pytest.mark.parametrize("change, key", [
    ({"layers": ["nope"]}, "chains[0].layers[0]: no layer named 'nope'"),
    ({"count": 3}, "chains[0].count: chain proj counts 3 but its layer proj counts 2"),
    ({"layers": ["proj", "down"]}, "chains[1].layers[0]: layer 'down' is already in chain 'proj'"),
    ({"sizes": {"t": "tokens", "e": "hidden"}}, "chains[0].ops[0].einsum: dim 'c' has no size"),
    ({"ops": [{"name": "x", "kind": "relu"}]}, "chains[0].ops[0].inputs: required key is missing"),
])
def test_a_bad_chain_is_one_line_naming_the_key(change, key):
    with pytest.raises(SpecError) as err:
        model_from_dict(chain_model(change), Where("m.yaml"))
    assert key in str(err.value) and "\n" not in str(err.value)


def names_tensors(arch) -> bool:
    """An architecture whose levels keep tensors by name (Timeloop's conv designs keep I, W, O):
    it takes only workloads with those tensors, the layer points of a GEMM model included."""
    return any(level.keeps is not None and len(level.keeps) > 0 for level in arch.levels)


def refused_alone(arch, graph, message: str) -> bool:
    """The op the refusal names is refused by a plain search of it alone as well (as its layer
    point is: ResNet's bf16 convolutions do not fit timeloop-simba_like's 1-byte registers)."""
    from mapper.errors import MapperError
    from mapper.mapspace import Mapspace
    from mapper.search import SearchContext, make_strategy, parse_objective
    name = message.split(":")[0].removeprefix("op ")
    op = next(o for o in graph.ops if o.name == name)
    try:
        make_strategy("greedy", {}).run(Mapspace(arch, op.workload, load_constraints(None)),
                                        parse_objective("edp", arch), SearchContext(time_limit=5))
    except MapperError:
        return True
    return False


def study_or_refusal(arch, graph, seconds):
    """The fusion study, or the refusal of an architecture that names tensors the graph lacks
    or that refuses the op on its own too, or of an op whose mapspace takes longer to set up
    than its share of these short time limits (a vocabulary's dim: the refusal says which
    time limit would do)."""
    from mapper.errors import MapperError
    from mapper.fusion.run import fuse
    from mapper.search import SearchContext
    try:
        return fuse(arch, graph, SearchContext.for_command(seconds), seconds)
    except MapperError as exc:
        named = names_tensors(arch) and "no tensor" in str(exc)
        too_short = "ends before the mapspace of" in str(exc) and "give a time limit of" in str(exc)
        assert named or too_short or refused_alone(arch, graph, str(exc)), (arch.name, str(exc))
        return None


def test_every_preset_arch_studies_a_chain_without_refusal():
    """The fusion study behind `--fuse` on every architecture preset (the tiny model's chains:
    a GEMM with bias and ReLU, a GEMM with a residual add): every op priced, fused never worse
    than unfused; only an architecture that keeps tensors by other names refuses, as it refuses
    the layer points."""
    model = model_from_dict(chain_model({}), Where("tiny"))
    chains = expand(model, "prefill", {}).chains
    studied = 0
    for arch_name in preset_names("archs"):
        arch = load_arch(arch_name)
        for chain in chains:
            result = study_or_refusal(arch, chain.graph, 0.1)
            if result is None:
                continue
            studied += 1
            assert sorted(i for g in result.fused.groups for i in g.ops) == list(range(len(chain.graph.ops)))
            assert result.fused.score <= result.unfused.score * (1 + 1e-9), arch_name
    # tpu-v4i maps only with its keeps by role (`--mapspace tpu-v4i-roles`): its 1-byte
    # registers hold no MAC's three words, and it refuses the layer points alike
    plain = [a for a in preset_names("archs") if not names_tensors(load_arch(a)) and a != "tpu-v4i"]
    assert len(plain) >= 6 and studied == len(chains) * len(plain)


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_every_model_preset_studies_its_chains_on_every_arch_preset(name):
    """What `mapper sweep ARCH --model M --fuse` runs, at a small sequence and time limit: no
    refusal on any architecture preset (about a minute per model on two cores)."""
    model = load_model(name)
    for phase in model.phase_names:
        for chain in expand(model, phase, small_inputs(model)).chains:
            for arch_name in preset_names("archs"):
                result = study_or_refusal(load_arch(arch_name), chain.graph, 0.2)
                assert result is None or result.fused.score <= result.unfused.score * (1 + 1e-9), (arch_name, chain.name)

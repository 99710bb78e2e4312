"""Model presets (`models/*.yaml`): a network's layers as einsums with sizes written in terms of
the model's parameters, expanded for a phase (prefill, decode, ...) and run-time inputs
(sequence length, batch) into workloads.

The layers form a graph (networkx: each layer after the ones it reads from), which fixes the
order of reports and plots and must be acyclic. Layers with the same einsum, sizes and element
types are one *group*: it is searched once and counted with the sum of their multiplicities,
so a model's totals are the weighted sums over its groups.

A model may also hold `chains` (`sweep.chains`): its layers again with their non-GEMM ops as op
graphs, expanded with the same names; each chain must count as the layers it stands for.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import networkx as nx

from ..load import fields, read_yaml, resolve, text, workload_from_dict
from ..spec import Workload
from ..dtypes import BLOCK_FORMATS
from ..units import Where, parse_dtype
from .chains import Chain, ChainGroup, chains_from_list, expand_chain
from .expr import integer_expr

@dataclass(frozen=True)
class Layer:
    name: str
    einsum: str
    sizes: tuple[tuple[str, object], ...]        # dim -> int or expression, as written
    count: object                                # int or expression
    after: tuple[str, ...]
    dtypes: tuple[tuple[str, str], ...]          # tensor -> dtype, the layer's own
    dtype: str | None
    where: Where


@dataclass(frozen=True)
class Model:
    name: str
    description: str
    source: str
    params: tuple[tuple[str, int], ...]          # fixed facts of the network
    inputs: tuple[tuple[str, int], ...]          # run-time inputs a sweep may set, with defaults
    phases: tuple[tuple[str, tuple[tuple[str, object], ...]], ...]   # phase -> derived names
    dtype: str
    output_dtype: str | None
    layers: tuple[Layer, ...]
    where: Where
    chains: tuple[Chain, ...] = ()               # the layers again with their non-GEMM ops (`--fuse`)

    @property
    def phase_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.phases)

    def graph(self) -> nx.DiGraph:
        """Layers as nodes (in file order), an edge from each layer to the ones that read it."""
        g = nx.DiGraph()
        for i, layer in enumerate(self.layers):
            g.add_node(layer.name, index=i)
        for i, layer in enumerate(self.layers):
            for j, before in enumerate(layer.after):
                if before not in g:
                    raise (layer.where / "after" / j).error(
                        f"no layer named {before!r} in model {self.name}")
                g.add_edge(before, layer.name)
        if not nx.is_directed_acyclic_graph(g):
            cycle = " -> ".join(u for u, _ in nx.find_cycle(g))
            raise (self.where / "layers").error(f"the layers' `after` lists form a cycle ({cycle})")
        return g

    def layer_order(self) -> list[str]:
        """Dataflow order, ties broken by the order in the file."""
        g = self.graph()
        return list(nx.lexicographical_topological_sort(g, key=lambda n: g.nodes[n]["index"]))


@dataclass(frozen=True)
class Group:
    """Identical layers of one expansion: searched once, counted `count` times."""
    workload: Workload
    layers: tuple[str, ...]
    count: int


@dataclass(frozen=True)
class Expansion:
    model: str
    phase: str
    inputs: tuple[tuple[str, int], ...]
    groups: tuple[Group, ...]                    # in dataflow order of their first layer
    chains: tuple[ChainGroup, ...] = ()          # in file order

    @property
    def label(self) -> str:
        values = "-".join(f"{k}{v}" for k, v in self.inputs)
        return f"{self.model}-{self.phase}-{values}" if values else f"{self.model}-{self.phase}"


def with_dtype(model: Model, value, where: Where) -> Model:
    """The model with its operands in dtype `value` (`--dtype fp8`, `nvfp4`), named for it
    (`llama-7b-fp8`: its rows stand beside the model's own). Outputs keep the model's
    `output_dtype`, or where it gives none bf16: the MMA accumulates in FP32 and the epilogue
    writes BF16, as an FP8 or FP4 GEMM's does. A layer with its own `dtype` keeps it. In a
    block-scaled format the model has no chains: an op graph keeps each tensor's one shape, so
    its scales cannot be tensors there (`load/opgraph.py` refuses one)."""
    name, _ = parse_dtype(value, where)
    if not name:
        raise where.error(f"expected a dtype name such as fp8 or nvfp4, got {value!r}")
    chains = () if name in BLOCK_FORMATS else model.chains
    return dataclasses.replace(model, name=f"{model.name}-{name}", dtype=name,
                               output_dtype=model.output_dtype or "bf16", chains=chains)


def load_model(name_or_path) -> Model:
    path = resolve("models", name_or_path)
    return model_from_dict(read_yaml(path), Where(str(path)))


def _int_map(raw, where: Where) -> tuple[tuple[str, int], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise where.error("expected a mapping of name -> positive integer")
    return tuple((text(k, where), integer_expr(v, {}, where / k)) for k, v in raw.items())


def model_from_dict(data, where: Where) -> Model:
    fields(data, where, ("name", "layers"), ("description", "source", "params", "inputs", "phases",
                                              "dtype", "output_dtype", "chains"))
    params, inputs = _int_map(data.get("params"), where / "params"), _int_map(data.get("inputs"), where / "inputs")
    clash = set(dict(params)) & set(dict(inputs))
    if clash:
        raise (where / "inputs" / sorted(clash)[0]).error("name is also a param")
    phases_raw = data.get("phases") or {"default": {}}
    if not isinstance(phases_raw, dict):
        raise (where / "phases").error("expected a mapping of phase name -> {derived name: expression}")
    phases = []
    for phase, derived in phases_raw.items():
        derived = derived or {}
        if not isinstance(derived, dict):
            raise (where / "phases" / phase).error("expected a mapping of name -> expression")
        phases.append((text(phase, where / "phases"), tuple(derived.items())))
    raw_layers = data["layers"]
    if not isinstance(raw_layers, list) or not raw_layers:
        raise (where / "layers").error("expected a non-empty list of layers")
    layers, seen = [], set()
    for i, lay in enumerate(raw_layers):
        w = where / "layers" / i
        fields(lay, w, ("name", "einsum", "sizes"), ("count", "after", "dtype", "dtypes", "description"))
        name = text(lay["name"], w / "name")
        if name in seen:
            raise (w / "name").error(f"layer name {name!r} is used twice")
        seen.add(name)
        if not isinstance(lay["sizes"], dict) or not lay["sizes"]:
            raise (w / "sizes").error("expected a mapping of dim -> integer or expression")
        after = lay.get("after") or []
        if not isinstance(after, list) or not all(isinstance(a, str) for a in after):
            raise (w / "after").error("expected a list of layer names")
        dtypes = lay.get("dtypes") or {}
        if not isinstance(dtypes, dict):
            raise (w / "dtypes").error("expected a mapping of tensor -> dtype")
        layers.append(Layer(name, text(lay["einsum"], w / "einsum"), tuple(lay["sizes"].items()),
                            lay.get("count", 1), tuple(after), tuple(dtypes.items()), lay.get("dtype"), w))
    model = Model(name=text(data["name"], where / "name"),
                  description=text(data.get("description", ""), where / "description"),
                  source=text(data.get("source", ""), where / "source"),
                  params=params, inputs=inputs, phases=tuple(phases),
                  dtype=text(data.get("dtype", "bf16"), where / "dtype"),
                  output_dtype=None if data.get("output_dtype") is None else text(data["output_dtype"], where / "output_dtype"),
                  layers=tuple(layers), where=where,
                  chains=chains_from_list(data.get("chains"), where / "chains", seen))
    model.graph()                     # unknown `after` names and cycles fail here, at load time
    for phase in model.phase_names:   # and so does every size, with the default inputs
        expand(model, phase, {})
    return model


def expand(model: Model, phase: str | None, inputs: dict[str, int], where: Where | None = None) -> Expansion:
    """The model's layers for one phase and input values (defaults for those not given),
    identical layers merged into groups."""
    where = where or model.where
    phase = phase or model.phase_names[0]
    phases = dict(model.phases)
    if phase not in phases:
        raise (where / "phase").error(f"model {model.name} has no phase {phase!r} "
                                      f"(phases: {', '.join(model.phase_names)})")
    known = dict(model.inputs)
    for key in inputs:
        if key not in known:
            raise (where / key).error(f"model {model.name} takes no input {key!r} "
                                      f"(inputs: {', '.join(known) or 'none'})")
    values = {**known, **inputs}
    env = {**dict(model.params), **values}
    for name, expr in phases[phase]:
        env[name] = integer_expr(expr, env, model.where / "phases" / phase / name)
    prefix = Expansion(model.name, phase, tuple(values.items()), ()).label
    groups: dict[tuple, list] = {}
    counts: dict[str, int] = {}
    for name in model.layer_order():
        layer = next(lay for lay in model.layers if lay.name == name)
        sizes = {dim: integer_expr(expr, env, layer.where / "sizes" / dim) for dim, expr in layer.sizes}
        count = integer_expr(layer.count, env, layer.where / "count")
        counts[name] = count
        output = layer.einsum.split("[", 1)[0].strip()
        dtypes = {**({output: model.output_dtype} if model.output_dtype else {}), **dict(layer.dtypes)}
        spec = {"name": f"{prefix}-{name}", "einsum": layer.einsum, "sizes": sizes,
                "dtype": layer.dtype or model.dtype, "dtypes": dtypes,
                "source": f"model preset {model.name}, layer {name}"}
        workload = workload_from_dict(spec, layer.where)
        signature = (workload.einsum, workload.dims, workload.sizes, tuple(t.bits for t in workload.tensors))
        groups.setdefault(signature, []).append((name, count, workload))
    out = []
    for members in groups.values():
        names = tuple(n for n, _, _ in members)
        workload = members[0][2]
        if len(names) > 1:
            from dataclasses import replace
            workload = replace(workload, name=f"{prefix}-{'+'.join(names)}")
        out.append(Group(workload, names, sum(c for _, c, _ in members)))
    chains = tuple(expand_chain(chain, env, prefix, model.dtype) for chain in model.chains)
    for chain, group in zip(model.chains, chains):
        for name in chain.layers:       # a chain stands for its layers: it must count as they do
            if counts[name] != group.count:
                raise (chain.where / "count").error(
                    f"chain {chain.name} counts {group.count} but its layer {name} counts {counts[name]}")
    return Expansion(model.name, phase, tuple(values.items()), tuple(out), chains)


"""A model preset's chains (`chains:` in `models/*.yaml`): its layers again, now with the ops
between them (norms, activations, bias and residual adds, softmax), as op graphs whose sizes
are expressions over the model's params, inputs and phase names.

A chain stands for the model layers it lists (`layers:`): under `mapper sweep --fuse` each
chain is one fusion study (`fusion.run`), counted `count` times, and the model's fused and
unfused totals take the chain's figures in place of those layers' own points. The layers'
points themselves never change (a chain is an extra point), so a sweep without `--fuse`
searches exactly what it did before chains existed.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..load import fields, opgraph_from_dict, text
from ..opgraph import OpGraph
from ..units import Where


def freeze(value):
    """Nested YAML data as tuples (dicts as ('__map__', items)), so a frozen spec can hold it."""
    if isinstance(value, dict):
        return ("__map__", tuple((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value):
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "__map__":
        return {k: thaw(v) for k, v in value[1]}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


@dataclass(frozen=True)
class Chain:
    name: str
    description: str
    count: object                                 # int or expression
    layers: tuple[str, ...]                       # the model layers the chain stands for
    sizes: tuple[tuple[str, object], ...]         # dim -> int or expression
    ops: tuple                                    # the op-graph ops as written (frozen)
    dtypes: tuple[tuple[str, str], ...]
    where: Where


@dataclass(frozen=True)
class ChainGroup:
    """One chain of one expansion: its op graph, counted `count` times."""
    name: str
    graph: OpGraph
    layers: tuple[str, ...]
    count: int


def chain_from_dict(raw, where: Where, layer_names: set[str]) -> Chain:
    fields(raw, where, ("name", "layers", "sizes", "ops"), ("description", "count", "dtypes"))
    layers = raw["layers"]
    if not isinstance(layers, list) or not all(isinstance(n, str) for n in layers):
        raise (where / "layers").error("expected a list of the model's layer names (empty for a chain of "
                                       "non-GEMM ops alone: an embedding lookup, a norm between convolutions)")
    for i, name in enumerate(layers):
        if name not in layer_names:
            raise (where / "layers" / i).error(f"no layer named {name!r} in the model")
    if not isinstance(raw["sizes"], dict) or not raw["sizes"]:
        raise (where / "sizes").error("expected a mapping of dim -> integer or expression")
    if not isinstance(raw["ops"], list) or not raw["ops"]:
        raise (where / "ops").error("expected a non-empty list of op-graph ops")
    dtypes = raw.get("dtypes") or {}
    if not isinstance(dtypes, dict):
        raise (where / "dtypes").error("expected a mapping of tensor -> dtype")
    return Chain(text(raw["name"], where / "name"), text(raw.get("description", ""), where / "description"),
                 raw.get("count", 1), tuple(layers), tuple(raw["sizes"].items()), freeze(raw["ops"]),
                 tuple(dtypes.items()), where)


def chains_from_list(raw, where: Where, layer_names: set[str]) -> tuple[Chain, ...]:
    """The `chains:` list; each layer belongs to at most one chain."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise where.error("expected a list of chains")
    chains, owner = [], {}
    for i, entry in enumerate(raw):
        chain = chain_from_dict(entry, where / i, layer_names)
        if chain.name in [c.name for c in chains]:
            raise (where / i / "name").error(f"chain name {chain.name!r} is used twice")
        for j, layer in enumerate(chain.layers):
            if layer in owner:
                raise (where / i / "layers" / j).error(f"layer {layer!r} is already in chain {owner[layer]!r}")
            owner[layer] = chain.name
        chains.append(chain)
    return tuple(chains)


def expand_chain(chain: Chain, env: dict[str, int], prefix: str, dtype: str) -> ChainGroup:
    """The chain's op graph at one expansion's values (`env`: params, inputs, phase names)."""
    from .expr import integer_expr
    sizes = {dim: integer_expr(expr, env, chain.where / "sizes" / dim) for dim, expr in chain.sizes}
    count = integer_expr(chain.count, env, chain.where / "count")
    data = {"name": f"{prefix}-{chain.name}", "sizes": sizes, "dtype": dtype, "dtypes": dict(chain.dtypes),
            "ops": thaw(chain.ops), "description": chain.description}
    return ChainGroup(chain.name, opgraph_from_dict(data, chain.where), chain.layers, count)

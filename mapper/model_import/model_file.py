"""An imported graph as a model file (`docs/SPECS.md`, "Models"): its symbolic dims as the
model's `inputs`, every size an expression over them.

The graph is analysed at three bindings of its symbols to distinct primes (`PROBES`); the
three analyses must agree on everything but the sizes, and each size is fitted to
`c * s1^e1 * s2^e2 ...` (the products a reshape of batch and sequence makes) or `a * s + b`
(a sequence and one more token) by the three values; a size that fits neither is refused. The
inputs' defaults are the values the user bound (`--seq`, `--batch`, `--dim`); a batch left
unbound is 1, any other symbol must be bound. A graph with fixed shapes is analysed once.
"""
from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass

from ..errors import SpecError
from .onnx_graph import Source
from .structure import DtypeChoice, Structure, analyse

# distinct primes per symbol and probe (probe k binds symbol i to PRIMES[k * symbols + i]): no
# model size has them as factors by accident at all three
PRIMES = (37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 101, 103, 107, 109, 113, 127, 131, 137, 139, 149)
PROBES = 3
MAX_SYMBOLS = len(PRIMES) // PROBES
MAX_VALUE = 2**31 - 1
BATCH_NAMES = frozenset({"batch", "batch_size", "batchsize", "bs", "b", "n", "num_sequences"})
SEQ_NAMES = frozenset({"seq", "seq_len", "seqlen", "sequence", "sequence_length", "sequence_len", "s",
                       "tokens", "num_tokens", "length", "len", "input_length"})


@dataclass(frozen=True)
class Imported:
    model: dict                          # the model file's contents
    structure: Structure                 # at one binding: its counts, copies and ops kept streaming
    inputs: dict[str, int]


def canonical_symbol(symbol: str) -> str:
    """`batch_size` -> batch, `sequence_length` -> seq; others as identifiers."""
    low = symbol.strip().lower()
    if low in BATCH_NAMES:
        return "batch"
    if low in SEQ_NAMES:
        return "seq"
    name = re.sub(r"[^A-Za-z0-9_]", "_", symbol).strip("_") or "dim"
    return name if not name[0].isdigit() else f"d{name}"


def bind(source: Source, values: dict[str, int]) -> dict[str, int]:
    """The symbols' values: flags by canonical name (`seq`) or the graph's own (`--dim NAME=N`);
    batch defaults to 1; any other symbol left unbound is refused, naming its flag."""
    out = {}
    for symbol in source.symbols:
        name = canonical_symbol(symbol)
        value = values.get(symbol, values.get(name))
        if value is None and name == "batch":
            value = 1
        flag = "--seq N" if name == "seq" else "--batch N" if name == "batch" else f"--dim {symbol}=N"
        if value is None:
            where = next(f"input {i.name} axis {i.dims.index(symbol)}" for i in source.data_inputs if symbol in i.dims)
            raise SpecError(source.path, "", f"the graph's shapes need a value for its symbolic dim {symbol!r} "
                            f"({where}): give it with {flag}")
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_VALUE:
            raise SpecError(source.path, "", f"{flag}: expected a positive integer up to {MAX_VALUE:,}, got {value!r}")
        out[symbol] = value
    return out


def import_source(source: Source, values: dict[str, int], name: str, dtypes: DtypeChoice) -> Imported:
    binding = bind(source, values)
    symbols = list(source.symbols)
    inputs = {canonical_symbol(s): binding[s] for s in symbols}
    if len(set(inputs)) != len(symbols):
        raise SpecError(source.path, "", f"two symbolic dims share a name once written as inputs ({symbols}): "
                        "rename one in the graph")
    if not symbols:
        structure = analyse(source, {}, dtypes)
        return Imported(_model_dict(source, structure, name, inputs, dtypes), structure, inputs)
    if len(symbols) > MAX_SYMBOLS:
        raise SpecError(source.path, "", f"{len(symbols)} symbolic dims, above the {MAX_SYMBOLS} the importer fits "
                        "sizes over: export the graph with fewer (fixed) dims")
    points = [[PRIMES[k * len(symbols) + i] for i in range(len(symbols))] for k in range(PROBES)]
    probes = [analyse(source, dict(zip(symbols, point)), dtypes) for point in points]
    _check_same(source, probes)
    names = [canonical_symbol(s) for s in symbols]
    fitted = [_model_dict(source, p, name, inputs, dtypes) for p in probes]
    model = fitted[0]
    model["layers"] = [_fit_entry(source, [f["layers"][i] for f in fitted], names, points, "layer")
                       for i in range(len(model["layers"]))]
    if "chains" in model:
        model["chains"] = [_fit_entry(source, [f["chains"][i] for f in fitted], names, points, "chain")
                           for i in range(len(model["chains"]))]
    return Imported(model, probes[0], inputs)


def _model_dict(source: Source, structure: Structure, name: str, inputs: dict[str, int],
                dtypes: DtypeChoice) -> dict:
    operand_types = [t for layer in structure.layers for t in list(layer["dtypes"].values())[1:]]
    output_types = [list(layer["dtypes"].values())[0] for layer in structure.layers]
    dtype = _most(operand_types) or dtypes.dtype or "fp32"
    output_dtype = _most(output_types) or dtype
    layers = []
    for layer in structure.layers:
        entry = {k: v for k, v in layer.items() if k != "dtypes"}
        names = list(layer["dtypes"])
        own = {t: d for t, d in layer["dtypes"].items() if d != (output_dtype if t == names[0] else dtype)}
        if own:
            entry["dtypes"] = own
        layers.append(entry)
    chains = []
    for chain in structure.chains:
        entry = {k: v for k, v in chain.items() if k not in ("dtypes", "ops")}
        own = {t: d for t, d in chain["dtypes"].items() if d != dtype}
        if own:
            entry["dtypes"] = own
        entry["ops"] = chain["ops"]
        chains.append(entry)
    model = {"name": name,
             "description": _description(structure),
             "source": f"{source.path} (ONNX opset {source.opset}"
                       + (f", written by {source.producer}" if source.producer else "") + "), read by mapper import-model",
             "inputs": dict(inputs) if inputs else None, "dtype": dtype}
    if output_dtype != dtype:
        model["output_dtype"] = output_dtype
    model["layers"] = layers
    model["chains"] = chains or None
    return {k: v for k, v in model.items() if v is not None}


def _most(values):
    return max(sorted(set(values), key=str), key=values.count) if values else None


def _description(structure: Structure) -> str:
    layers = sum(entry["count"] for entry in structure.layers)
    text = (f"{layers} layers in {len(structure.layers)} entries (identical ones counted once), "
            f"{len(structure.chains)} chains")
    if structure.merged:
        text += (f"; {structure.merged} projections feeding attention from the same activations written as "
                 f"{structure.merged_into} GEMMs")
    return text + "."


# ------------------------------------------------------------------------------ fitting

def _check_same(source: Source, probes: list[Structure]) -> None:
    shapes = [_skeleton(p) for p in probes]
    if any(s != shapes[0] for s in shapes[1:]):
        raise SpecError(source.path, "", "the graph's structure changes with the values of its symbolic dims "
                        "(ops merge or split at some sizes): bind every symbol and export it with fixed shapes")


def _skeleton(structure: Structure):
    def strip(value):
        if isinstance(value, dict):
            return {k: (None if k == "sizes" else strip(v)) for k, v in value.items()}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value
    return strip(structure.layers), strip(structure.chains)


def _fit_entry(source: Source, entries: list[dict], names, points, what: str) -> dict:
    entry = dict(entries[0])
    entry["sizes"] = {dim: fit([e["sizes"][dim] for e in entries], names, points, source,
                               f"{what} {entry['name']}, size {dim}") for dim in entry["sizes"]}
    return entry


def fit(values: list[int], names: list[str], points: list[list[int]], source: Source, where: str):
    """An integer, or an expression over the symbols, with `values[i]` at `points[i]`."""
    if len(set(values)) == 1:
        return values[0]
    for exps in sorted(itertools.product(range(3), repeat=len(names)), key=sum):
        if not any(exps):
            continue
        den = [math.prod(p ** e for p, e in zip(point, exps)) for point in points]
        if values[0] % den[0]:
            continue
        c = values[0] // den[0]
        if all(v == c * d for v, d in zip(values, den)):
            factors = [n if e == 1 else f"{n} * {n}" for n, e in zip(names, exps) if e]
            return " * ".join(([str(c)] if c != 1 else []) + factors)
    for i, name in enumerate(names):           # a * s + b, the other symbols not involved
        xs = [p[i] for p in points]
        if xs[1] == xs[0] or (values[1] - values[0]) % (xs[1] - xs[0]):
            continue
        a = (values[1] - values[0]) // (xs[1] - xs[0])
        b = values[0] - a * xs[0]
        if a and all(v == a * x + b for v, x in zip(values, xs)):
            term = name if a == 1 else f"{a} * {name}"
            return term + (f" + {b}" if b > 0 else f" - {-b}" if b < 0 else "")
    raise SpecError(source.path, where, f"its values {values} at the probe bindings fit no product or "
                    "linear function of the symbols: bind every symbol and export the graph with fixed shapes")

"""An ONNX model read as a graph whose every tensor has a concrete shape, at any binding of its
symbolic dims.

`read_onnx` checks the file (protobuf it can parse, a graph with nodes, no cycle, numeric
dtypes) and keeps the graph without the weights' data: the importer needs each tensor's shape
and element type, the values of small constants (shapes, axes, scalars) and nothing else, so
a 7B-parameter model costs what its graph costs. `Source.at(binding)` gives every tensor's
shape with the symbols bound: ONNX's shape inference (the `onnx` package's own), with the small
tensors that only shapes and constants determine (a `Range` over the sequence, a mask's
indices) computed by ONNX's reference implementation of their op first, so that inference sees
them as constants.

A tensor is *data* when it depends on a data input of the graph through any op but `Shape` and
`Size`; otherwise it is *constant* (weights, and what shapes and constants alone determine:
positions, causal masks, a transposed weight): a runtime could compute it once.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from types import MappingProxyType

import networkx as nx
import numpy as np

from ..errors import SpecError, shown

MAX_FILE_BYTES = 2**31 - 1      # protobuf's limit on one message: larger models keep weights outside
SMALL = 64                      # constants of at most this many elements keep their values
FOLD_LIMIT = 1 << 20            # constant tensors of at most this many elements are computed
SHAPE_OPS = frozenset({"Shape", "Size"})
PARAMETER_KINDS = frozenset({"PARAMETER", "BUFFER", "CONSTANT_TENSOR"})  # torch.export's input kinds

# ONNX element types (TensorProto.DataType) -> a mapper dtype or a number of bits
DTYPES = MappingProxyType({1: "fp32", 2: "uint8", 3: "int8", 4: 16, 5: "int16", 6: "int32", 7: 64,
                           9: 8, 10: "fp16", 11: "fp64", 12: 32, 13: 64, 16: "bf16", 17: "fp8",
                           18: "fp8", 19: "fp8", 20: "fp8", 21: "int4", 22: "int4", 23: "fp4"})
DTYPE_NAMES = MappingProxyType({8: "string", 14: "complex64", 15: "complex128"})


@dataclass(frozen=True)
class Node:
    index: int
    name: str
    op: str                                  # op_type, prefixed by its domain outside ONNX's own
    inputs: tuple[str, ...]                  # "" for an optional input left out
    outputs: tuple[str, ...]
    attrs: MappingProxyType
    scope: tuple[str, ...]                   # the module path it came from, where the file says


@dataclass(frozen=True)
class DataInput:
    name: str
    dims: tuple[int | str, ...]              # a size, or the symbol that names it


@dataclass(frozen=True)
class Source:
    """One ONNX graph, independent of any binding of its symbols."""
    path: str
    opset: int
    producer: str
    nodes: tuple[Node, ...]                  # in a topological order
    data_inputs: tuple[DataInput, ...]
    outputs: tuple[str, ...]
    weights: frozenset[str]                  # initializers and parameter inputs
    constants: MappingProxyType              # name -> np.ndarray: small constants' values
    dtypes: MappingProxyType                 # tensor -> mapper dtype (or bits)
    data: frozenset[str]                     # tensors that depend on a data input
    proto: object                            # the ModelProto without weights' data (for inference)

    @property
    def symbols(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(d for i in self.data_inputs for d in i.dims if isinstance(d, str)))

    def producer_of(self) -> dict[str, Node]:
        return {t: n for n in self.nodes for t in n.outputs if t}

    def error(self, expected: str) -> SpecError:
        return SpecError(self.path, "", expected)

    def at(self, binding: dict[str, int]) -> "Shapes":
        """Every tensor's shape with the symbols bound (`binding` names every symbol)."""
        return _infer(self, binding)


@dataclass(frozen=True)
class Shapes:
    """The tensors' shapes at one binding, and the values of the small constant tensors."""
    shapes: MappingProxyType                 # name -> tuple of ints, or None where inference failed
    values: MappingProxyType                 # name -> np.ndarray (small constants)


def read_onnx(path: str) -> Source:
    import onnx
    name = str(path)
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise SpecError(name, "", f"cannot read file ({exc.strerror})") from None
    if size > MAX_FILE_BYTES:
        raise SpecError(name, "", f"{size / 2**30:.1f} GiB in one file, above protobuf's 2 GiB: save the model with "
                        "its weights as external data (onnx.save(model, path, save_as_external_data=True)); "
                        "the importer reads only the graph")
    try:
        model = onnx.load(name, load_external_data=False)
    except Exception as exc:          # protobuf's DecodeError and friends: the file is not ONNX
        raise SpecError(name, "", f"not an ONNX model ({type(exc).__name__}: {exc}); export one with "
                        "torch.onnx.export, or give a model YAML file") from None
    return source_from_proto(model, name)


def source_from_proto(model, name: str) -> Source:
    """The checked graph of an in-memory ModelProto (`read_onnx`, or a torch export)."""
    from onnx import TensorProto, numpy_helper
    graph = model.graph
    if not graph.node:
        raise SpecError(name, "", "no ONNX graph in the file (no nodes): it is empty, truncated or not an "
                        "ONNX model")
    _check_text(model, name)
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    if opset <= 0:
        raise SpecError(name, "", "the model imports no version of ONNX's default operator set: a truncated "
                        "or hand-damaged file")
    weights, constants, dtypes = set(), {}, {}
    for init in graph.initializer:
        _check_dtype(name, init.name, init.data_type)
        dtypes[init.name] = DTYPES[init.data_type]
        weights.add(init.name)
        if math.prod(init.dims) <= SMALL:
            constants[init.name] = _array(numpy_helper, init, name)
        else:
            _strip(init, TensorProto)
    data_inputs = []
    for value in graph.input:
        kind = {p.key: p.value for p in value.metadata_props}.get("pkg.torch.export.graph_signature.InputSpec.kind")
        if value.name in weights or kind in PARAMETER_KINDS:
            weights.add(value.name)
        tensor = value.type.tensor_type
        if not value.type.HasField("tensor_type"):
            raise SpecError(name, f"input {value.name}", "not a tensor: the importer reads tensor inputs only")
        _check_dtype(name, value.name, tensor.elem_type)
        dtypes[value.name] = DTYPES[tensor.elem_type]
        if value.name in weights:
            continue
        dims = []
        for axis, d in enumerate(tensor.shape.dim):
            if d.HasField("dim_value"):
                if d.dim_value <= 0:
                    raise SpecError(name, f"input {value.name}", f"axis {axis} has size {d.dim_value}: every "
                                    "size must be positive")
                dims.append(d.dim_value)
            else:
                dims.append(d.dim_param.strip() or f"{value.name}.{axis}")
        data_inputs.append(DataInput(value.name, tuple(dims)))
    if not data_inputs:
        raise SpecError(name, "", "the graph has no data input (every input is a weight): nothing flows "
                        "through it")
    nodes = _nodes(graph, name)
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.output:
            _constant_node(node, constants, dtypes, weights, name)
    for value in list(graph.value_info) + list(graph.output):
        if value.type.HasField("tensor_type") and value.type.tensor_type.elem_type in DTYPES:
            dtypes.setdefault(value.name, DTYPES[value.type.tensor_type.elem_type])
    data = _data_tensors(nodes, {i.name for i in data_inputs})
    producer = model.producer_name + (f" {model.producer_version}" if model.producer_version else "")
    return Source(path=name, opset=opset, producer=producer.strip(), nodes=nodes, data_inputs=tuple(data_inputs),
                  outputs=tuple(o.name for o in graph.output), weights=frozenset(weights),
                  constants=MappingProxyType(constants), dtypes=MappingProxyType(dtypes),
                  data=frozenset(data), proto=model)


def _check_text(model, file: str) -> None:
    """Every name the importer reads is text (protobuf hands a damaged string over as bytes)."""
    graph = model.graph
    values = list(graph.input) + list(graph.output) + list(graph.value_info)
    names = [v.name for v in values] + [d.dim_param for v in values if v.type.HasField("tensor_type")
                                        for d in v.type.tensor_type.shape.dim]
    names += [i.name for i in graph.initializer]
    names += [model.producer_name, model.producer_version, *(o.domain for o in model.opset_import)]
    for node in graph.node:
        names += [node.name, node.op_type, node.domain, *node.input, *node.output, *(a.name for a in node.attribute)]
        names += [x for p in node.metadata_props for x in (p.key, p.value)]
    if not all(isinstance(n, str) for n in names):
        raise SpecError(file, "", "a name in the graph is not valid text: the file is damaged")


def _check_dtype(file: str, tensor: str, elem_type: int) -> None:
    if elem_type not in DTYPES:
        kind = DTYPE_NAMES.get(elem_type, f"element type {elem_type}")
        raise SpecError(file, f"tensor {tensor}", f"{kind} tensors are not supported: the importer models "
                        "numeric tensors (floats of 4 to 64 bits, integers, booleans)")


def _array(numpy_helper, tensor, file: str) -> np.ndarray:
    try:
        return numpy_helper.to_array(tensor)
    except Exception as exc:          # a truncated or inconsistent raw_data
        raise SpecError(file, f"tensor {tensor.name}", f"its data cannot be read ({exc})") from None


def _strip(tensor, TensorProto) -> None:
    """Drop a tensor's data, keeping its name, dims and type (inference needs no more)."""
    for field in ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data",
                  "string_data", "external_data"):
        tensor.ClearField(field)
    tensor.data_location = TensorProto.DEFAULT


def _nodes(graph, file: str) -> tuple[Node, ...]:
    """The nodes in a topological order (the file's own where it is one), checked for cycles,
    for tensors two nodes produce and for tensors read that nothing defines."""
    from onnx import helper
    produced, raw = {}, list(graph.node)
    for i, node in enumerate(raw):
        for out in node.output:
            if out and out in produced:
                raise SpecError(file, f"node {node.name or i}", f"tensor {shown(out)} is produced by two nodes")
            if out:
                produced[out] = i
    defined = set(produced) | {v.name for v in graph.input} | {t.name for t in graph.initializer}
    for i, node in enumerate(raw):
        missing = next((t for t in node.input if t and t not in defined), None)
        if missing is not None:
            raise SpecError(file, f"node {node.name or i}", f"reads tensor {shown(missing)}, which no node "
                            "produces and no input or initializer defines")
    g = nx.DiGraph()
    g.add_nodes_from(range(len(raw)))
    for j, node in enumerate(raw):
        for t in node.input:
            if t in produced:
                g.add_edge(produced[t], j)
    if not nx.is_directed_acyclic_graph(g):
        cycle = nx.find_cycle(g)
        names = " -> ".join(raw[i].name or raw[i].op_type for i, _ in cycle)
        raise SpecError(file, "", f"the graph has a cycle ({names}): an ONNX graph is acyclic")
    order = list(nx.lexicographical_topological_sort(g))
    nodes = []
    for index, i in enumerate(order):
        node = raw[i]
        op = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
        attrs = {}
        for a in node.attribute:
            if a.type in (a.GRAPH, a.GRAPHS):
                attrs[a.name] = "<subgraph>"
            elif a.type not in (a.TENSOR, a.TENSORS, a.SPARSE_TENSOR, a.SPARSE_TENSORS, a.TYPE_PROTO, a.TYPE_PROTOS):
                value = helper.get_attribute_value(a)
                if value is None:       # no type (a damaged field): no value to read
                    raise SpecError(file, f"node {node.name or op}", f"attribute {a.name!r} has no type: the file is "
                                    "damaged")
                attrs[a.name] = value.decode() if isinstance(value, bytes) else value
        nodes.append(Node(index, node.name or f"{op}_{index}", op, tuple(node.input), tuple(node.output),
                          MappingProxyType(attrs), _scope(node)))
    return tuple(nodes)


def _scope(node) -> tuple[str, ...]:
    """The module path of a node: torch's exporters record it, as metadata (`name_scopes`, the
    dynamo exporter) or in the node's name (`/transformer/h.0/attn/MatMul`, TorchScript's)."""
    meta = {p.key: p.value for p in node.metadata_props}
    scopes = meta.get("pkg.torch.onnx.name_scopes")
    if scopes:
        parts = [p.strip(" '\"") for p in scopes.strip("[]").split(",")]
        parts = [p for p in parts if p]
        # the last entry names the aten call, the one before it the innermost module
        return tuple(parts[-2].split(".")) if len(parts) >= 2 else ()
    if node.name.startswith("/") and node.name.count("/") >= 2:
        return tuple(p for part in node.name.strip("/").split("/")[:-1] for p in part.split(".") if p)
    return ()


def _constant_node(node, constants: dict, dtypes: dict, weights: set, file: str) -> None:
    """A `Constant` node's value where it is small; a large one is a weight (its data dropped)."""
    from onnx import TensorProto, helper, numpy_helper
    out = node.output[0]
    for a in node.attribute:
        if a.type == a.TENSOR:
            _check_dtype(file, out, a.t.data_type)
            dtypes[out] = DTYPES[a.t.data_type]
            if math.prod(a.t.dims) <= SMALL:
                constants[out] = _array(numpy_helper, a.t, file)
            else:
                weights.add(out)
                _strip(a.t, TensorProto)
        elif a.name in ("value_int", "value_ints", "value_float", "value_floats"):
            integer = a.name.startswith("value_int")
            constants[out] = np.array(helper.get_attribute_value(a), dtype=np.int64 if integer else np.float32)
            dtypes[out] = 64 if integer else "fp32"


def _data_tensors(nodes, data_inputs: set[str]) -> set[str]:
    data = set(data_inputs)
    for node in nodes:
        if node.op not in SHAPE_OPS and any(t in data for t in node.inputs):
            data.update(t for t in node.outputs if t)
    return data


# ---------------------------------------------------------------------------------- inference

def _infer(source: Source, binding: dict[str, int]) -> Shapes:
    """Shapes by ONNX's inference, after computing the small constant tensors it cannot (a Range
    over a bound size): computed values become initializers and inference runs again, until no
    new tensor gets a value."""
    import onnx
    from onnx import numpy_helper, shape_inference
    model = onnx.ModelProto()
    model.CopyFrom(source.proto)
    graph = model.graph
    del graph.value_info[:]
    initialized = {i.name for i in graph.initializer}
    for value in graph.input:
        if value.name in initialized or value.name in source.weights:
            continue
        dims = next(i.dims for i in source.data_inputs if i.name == value.name)
        shape = value.type.tensor_type.shape
        for d, size in zip(shape.dim, dims):
            d.Clear()
            d.dim_value = binding[size] if isinstance(size, str) else size
    values = dict(source.constants)
    opsets = {o.domain or "": o.version for o in model.opset_import}
    raw_nodes = {tuple(n.output): n for n in source.proto.graph.node}
    shapes: dict[str, tuple | None] = {}
    for _ in range(8):
        try:
            inferred = shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
        except Exception as exc:      # inference refuses an inconsistent graph
            raise source.error(f"ONNX shape inference failed at {_binding_text(binding)}: {exc}") from None
        shapes = _read_shapes(inferred)
        computed = _fold(source, shapes, values, opsets, raw_nodes)
        if not computed:
            break
        for name, value in computed.items():
            values[name] = value
            graph.initializer.append(numpy_helper.from_array(value, name))
    return Shapes(MappingProxyType(shapes), MappingProxyType(values))


def _binding_text(binding: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in binding.items()) or "its fixed shapes"


def _read_shapes(model) -> dict[str, tuple | None]:
    out = {}
    graph = model.graph
    for value in list(graph.input) + list(graph.value_info) + list(graph.output):
        if not value.type.HasField("tensor_type") or not value.type.tensor_type.HasField("shape"):
            continue
        dims = value.type.tensor_type.shape.dim
        out[value.name] = (tuple(d.dim_value for d in dims)
                           if all(d.HasField("dim_value") for d in dims) else None)
    for init in graph.initializer:
        out[init.name] = tuple(init.dims)
    return out


def _fold(source: Source, shapes: dict, values: dict, opsets: dict, raw_nodes: dict) -> dict[str, np.ndarray]:
    """Constant tensors that now can be computed: every input known, the result small."""
    from onnx.reference import ReferenceEvaluator
    computed = {}
    for node in source.nodes:
        outs = [t for t in node.outputs if t]
        if not outs or any(t in source.data or t in values for t in outs) or node.op == "Constant":
            continue
        if "<subgraph>" in node.attrs.values():
            continue
        if node.op in SHAPE_OPS:
            shape = shapes.get(node.inputs[0])
            if shape is None:
                continue
            full = np.array(shape, dtype=np.int64)
            if node.op == "Size":
                result = np.array(math.prod(shape), dtype=np.int64)
            else:
                start, end = node.attrs.get("start", 0), node.attrs.get("end", len(shape))
                result = full[start:end]
            computed[outs[0]] = values[outs[0]] = result
            continue
        inputs = [t for t in node.inputs if t]
        if not all(t in values for t in inputs):
            continue
        known = [shapes.get(t) for t in outs]
        if any(s is not None and math.prod(s) > FOLD_LIMIT for s in known):
            continue
        if any(values[t].size > FOLD_LIMIT for t in inputs):
            continue
        raw = raw_nodes[node.outputs]
        domain = raw.domain or ""
        try:
            result = ReferenceEvaluator(raw, opsets={domain: opsets.get(domain, source.opset)}).run(
                None, {t: values[t] for t in inputs})
        except Exception:             # an op the reference cannot run here: inference does without it
            continue
        for t, v in zip(node.outputs, result):
            v = np.asarray(v)
            if t and v.size <= FOLD_LIMIT:
                computed[t] = values[t] = v
    return computed

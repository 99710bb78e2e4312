"""Op-graph workload files (`ops:`): several ops joined by tensors into a DAG (`opgraph.py`).

Refused, each with the file and key path: an unknown key or op kind, an op with both or neither
of `einsum` and `kind`, two ops of one name or producing one tensor, a tensor indexed with
shapes that disagree between two ops (producer and consumer), an elementwise input with a dim
its output lacks, a reduction whose `dim` is not a dim of its row, a cycle, a dtype for no
tensor, a tensor produced but neither read nor listed in `outputs` (dangling) when `outputs`
is given, and every check of a plain einsum workload (`load.workload`).
"""
from __future__ import annotations

from ..dtypes import BLOCK_FORMATS, canonical
from ..einsum import parse_einsum
from ..errors import SpecError, shown
from ..limits import MAX_OPS
from ..opgraph import ELEMENTWISE_FLOPS, REDUCTIONS, STREAMS, GraphTensor, Op, OpGraph
from ..units import Where
from ..validate import fields, name_list, name_text, positive_int, text
from .files import read_yaml, resolve
from .workload import workload_from_dict

KINDS = tuple(ELEMENTWISE_FLOPS) + tuple(REDUCTIONS) + tuple(STREAMS)


def is_opgraph(data) -> bool:
    return isinstance(data, dict) and "ops" in data


def names_opgraph(name) -> bool:
    """Whether a workload preset name or file path names an op graph (`ops:`); False where it
    names nothing readable (the einsum's loader then says why)."""
    try:
        return is_opgraph(read_yaml(resolve("workloads", name)))
    except SpecError:
        return False


def names_model(name) -> bool:
    """Whether a workload argument names a model (`layers:`): a file, else a workload preset,
    else a model preset (a workload preset of the same name wins)."""
    try:
        data = read_yaml(resolve("workloads", name))
    except SpecError:
        try:
            data = read_yaml(resolve("models", name))
        except SpecError:
            return False
    return isinstance(data, dict) and "layers" in data


def load_opgraph(name_or_path) -> OpGraph:
    path = resolve("workloads", name_or_path)
    data = read_yaml(path)
    if isinstance(data, dict) and "einsum" in data and "ops" not in data:
        raise Where(str(path)).error("one einsum (`einsum:`), not an op graph (`ops:`): `mapper search` reads it")
    return opgraph_from_dict(data, Where(str(path)))


def opgraph_from_dict(data, where: Where) -> OpGraph:
    fields(data, where, ("name", "sizes", "ops"), ("description", "source", "dtype", "dtypes", "outputs"))
    sizes = data["sizes"]
    if not isinstance(sizes, dict) or not sizes:
        raise (where / "sizes").error("expected a mapping of dim -> positive integer size")
    for d, v in sizes.items():
        positive_int(v, where / "sizes" / str(d), "a positive integer size")
    dtypes = data.get("dtypes") or {}
    if not isinstance(dtypes, dict):
        raise (where / "dtypes").error("expected a mapping of tensor -> dtype")
    for key, value in [("dtype", data.get("dtype")), *((f"dtypes.{t}", v) for t, v in dtypes.items())]:
        if isinstance(value, str) and canonical(value) in BLOCK_FORMATS:
            raise Where(where.file, key if not where.path else f"{where.path}.{key}").error(
                f"{value}: block-scaled formats are modelled for one einsum (its scales become tensors), not in "
                "an op graph, whose tensors keep one shape across ops; sweep the layers without --fuse")
    if not isinstance(data["ops"], list) or not data["ops"]:
        raise (where / "ops").error("expected a non-empty list of ops")
    if len(data["ops"]) > MAX_OPS:
        raise (where / "ops").error(f"{len(data['ops']):,} ops, above the limit of {MAX_OPS} this tool handles "
                                    "(fusion prices groups of them): split the graph")
    ops, shapes = [], {}
    for i, raw in enumerate(data["ops"]):
        op = _op(raw, where / "ops" / i, sizes, data.get("dtype"), dtypes)
        if op.name in [o.name for o in ops]:
            raise (where / "ops" / i / "name").error(f"a second op named {shown(op.name)}")
        if op.output in [o.output for o in ops]:
            raise (where / "ops" / i).error(f"tensor {op.output} is produced by two ops")
        _check_shapes(op, where / "ops" / i, shapes)
        ops.append(op)
    bits = {}
    for op in ops:
        for tensor in op.workload.tensors:
            bits.setdefault(tensor.name, tensor.bits)
    for name in dtypes:
        if name not in shapes:
            raise (where / "dtypes" / str(name)).error(f"no op reads or writes a tensor of that name "
                                                       f"(tensors: {', '.join(shapes)})")
    graph = OpGraph(name=name_text(data["name"], where / "name"), ops=tuple(ops),
                    tensors=tuple(GraphTensor(t, shapes[t][0], bits[t]) for t in shapes),
                    description=text(data.get("description", ""), where / "description"),
                    source=text(data.get("source", ""), where / "source"), file=where.file)
    _check_dag(graph, where)
    if "outputs" in data:
        listed = name_list(data["outputs"], where / "outputs")
        for t in listed:
            if t not in graph.outputs:
                raise (where / "outputs").error(f"{t} is not a tensor some op produces and none reads "
                                                f"(graph outputs: {', '.join(graph.outputs)})")
        for t in graph.outputs:
            if t not in listed:
                raise (where / "ops" / graph.producer(t)).error(
                    f"tensor {t} is produced but no op reads it and `outputs` does not list it (dangling)")
    return graph


def _op(raw, where: Where, sizes: dict, default_dtype, dtypes: dict) -> Op:
    fields(raw, where, ("name",), ("einsum", "kind", "inputs", "output", "dim", "flops_per_element", "passes"))
    name = name_text(raw["name"], where / "name")
    if ("einsum" in raw) == ("kind" in raw):
        raise where.error("expected exactly one of `einsum` (a contraction) and `kind` (an elementwise "
                          f"map or row reduction: {', '.join(KINDS)})")
    if "einsum" in raw:
        for key in ("inputs", "output", "dim", "flops_per_element", "passes"):
            if key in raw:
                raise (where / key).error("not a key of an einsum op (its tensors are in its einsum)")
        einsum = text(raw["einsum"], where / "einsum")
        kind, flops, dim, passes = "einsum", 0.0, None, 1
    else:
        kind = raw["kind"]
        if kind not in KINDS:
            raise (where / "kind").error(f"unknown op kind {shown(kind)}; expected one of {', '.join(KINDS)}")
        for key in ("inputs", "output"):
            if key not in raw:
                raise (where / key).error("required key is missing")
        inputs = raw["inputs"]
        if not isinstance(inputs, list) or not inputs or not all(isinstance(s, str) for s in inputs):
            raise (where / "inputs").error("expected a list of tensors such as ['Z[m,n]', 'b[n]']")
        if kind == "bias" and len(inputs) != 2:
            raise (where / "inputs").error(f"a bias adds a vector to its input: two tensors such as "
                                           f"['Z[m,n]', 'b[n]'], got {len(inputs)}")
        output = text(raw["output"], where / "output")
        einsum = f"{output} += {' * '.join(inputs)}"
        flops, passes = REDUCTIONS[kind] if kind in REDUCTIONS else ({**ELEMENTWISE_FLOPS, **STREAMS}[kind], 1)
        if "flops_per_element" in raw:
            flops = _nonnegative(raw["flops_per_element"], where / "flops_per_element")
        if "passes" in raw:
            passes = positive_int(raw["passes"], where / "passes", "a positive number of passes")
        dim = raw.get("dim")
        if kind in REDUCTIONS and dim is None:
            raise (where / "dim").error(f"a {kind} needs `dim`, the dim it reduces over")
        if kind not in REDUCTIONS and dim is not None:
            raise (where / "dim").error(f"a {kind} op has no row (`dim` is for {', '.join(REDUCTIONS)})")
    key = where / ("einsum" if kind == "einsum" else "inputs")
    parsed = parse_einsum(einsum, key)
    used = [d for _, axes, _ in parsed for axis in axes for d in axis]
    for d in used:
        if d not in sizes:
            raise key.error(f"dim {shown(d)} has no size in `sizes` (sizes: {', '.join(map(str, sizes))})")
    op_dims = list(dict.fromkeys(used))
    tensor_names = [t for t, _, _ in parsed]
    wl = workload_from_dict({"name": name, "einsum": einsum, "sizes": {d: sizes[d] for d in op_dims},
                             "dtypes": {t: dtypes.get(t, default_dtype) for t in tensor_names
                                        if dtypes.get(t, default_dtype) is not None}},
                            where)
    for tensor, axes, _ in parsed:
        if any(len(axis) != 1 or next(iter(axis.values())) != 1 for axis in axes):
            raise key.error(f"tensor {tensor}: an op graph indexes tensors by plain dims (no 2*p+r)")
    dims_of = {t: tuple(next(iter(axis)) for axis in axes) for t, axes, _ in parsed}
    out_name = parsed[0][0]
    if kind != "einsum" and kind not in STREAMS:
        for t in tensor_names[1:]:
            extra = [d for d in dims_of[t] if d not in dims_of[out_name]]
            if extra:
                raise (where / "inputs").error(f"input {t} has dim {extra[0]} that the output {out_name} "
                                               "lacks (an elementwise map or row reduction reduces nothing away)")
        if kind in REDUCTIONS and (dim not in dims_of[out_name] or dims_of[tensor_names[1]] != dims_of[out_name]):
            raise (where / "dim").error(f"expected a dim of the row: the first input and the output share "
                                        f"dims {', '.join(dims_of[out_name])} and `dim` is one of them")
    return Op(name=name, kind=kind, inputs=tuple(tensor_names[1:]),
              input_dims=tuple(dims_of[t] for t in tensor_names[1:]), output=out_name,
              output_dims=dims_of[out_name], workload=wl, flops_per_element=flops,
              reduced_dim=dim, passes=passes)


def _nonnegative(value, where: Where) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or value == float("inf"):
        raise where.error(f"expected a non-negative number, got {shown(value)}")
    return float(value)


def _check_shapes(op: Op, where: Where, shapes: dict) -> None:
    """Every tensor has one shape and one element size in every op that names it."""
    wl = op.workload
    for tensor in wl.tensors:
        dims = op.dims_of(tensor.name)
        shape = tuple(wl.sizes[wl.dim_index(d)] for d in dims)
        seen = shapes.get(tensor.name)
        if seen is None:
            shapes[tensor.name] = (shape, tensor.bits, op.name)
        elif seen[0] != shape:
            raise where.error(f"shape mismatch: tensor {tensor.name} is {list(shape)} here "
                              f"({','.join(dims)}) but {list(seen[0])} in op {shown(seen[2])}")
        elif seen[1] != tensor.bits:
            raise where.error(f"tensor {tensor.name} has {tensor.bits} bits here but {seen[1]} in op "
                              f"{shown(seen[2])}")


def _check_dag(graph: OpGraph, where: Where) -> None:
    import networkx as nx       # where a graph is read only (`OpGraph.graph`)
    g = graph.graph
    try:
        cycle = nx.find_cycle(g)
    except nx.NetworkXNoCycle:
        cycle = None
    if cycle:
        names = " -> ".join(graph.ops[i].name for i, _ in cycle)
        raise (where / "ops" / cycle[0][0]).error(f"the ops form a cycle ({names} -> "
                                                 f"{graph.ops[cycle[0][0]].name})")
    for i, j in g.edges:
        if j < i:
            raise (where / "ops" / j).error(f"op {graph.ops[j].name} reads {g[i][j]['tensors'][0]}, "
                                            f"which a later op ({graph.ops[i].name}) produces: list ops "
                                            "producers first")

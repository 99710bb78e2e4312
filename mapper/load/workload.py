"""Workload files: an einsum over named dims, their sizes and the tensors' element types.

A workload is refused when it names a dim without a size (or a size no dim uses), when its
counts pass this tool's limits (dims, tensors, coefficients, MACs, a tensor's bits), or when a
tensor has no dtype; every refusal names the file and key path.
"""
from __future__ import annotations

import math

from .. import tiles
from ..einsum import parse_einsum
from ..errors import shown
from ..limits import MAX_COEFFICIENT, MAX_DIMS, MAX_MACS, MAX_TENSORS
from ..spec import Tensor, Workload
from ..units import Where, parse_dtype
from ..validate import fields, name_text, positive_int, text
from .block_scaled import block_scale
from .files import spec_data


def load_workload(spec) -> Workload:
    """A workload from a preset name, a YAML file's path or the dict such a file holds
    (`files.spec_data`); a Workload is returned as it is."""
    if isinstance(spec, Workload):
        return spec
    data, name = spec_data("workloads", spec)
    if isinstance(data, dict) and "ops" in data and "einsum" not in data:
        raise Where(name).error("an op graph (`ops:`), not one einsum: `mapper fuse` reads it")
    return workload_from_dict(data, Where(name))


def workload_from_dict(data, where: Where) -> Workload:
    fields(data, where, ("name", "einsum", "sizes"), ("description", "source", "dtype", "dtypes"))
    parsed = parse_einsum(text(data["einsum"], where / "einsum"), where / "einsum")
    sizes_raw = data["sizes"]
    if not isinstance(sizes_raw, dict) or not sizes_raw:
        raise (where / "sizes").error("expected a mapping of dim -> positive integer size")
    dims = tuple(name_text(d, where / "sizes") for d in sizes_raw)
    if len(dims) > MAX_DIMS:
        raise (where / "sizes").error(f"{len(dims)} dims, above the limit of {MAX_DIMS} this tool "
                                      "handles (loop orders are permutations of the dims)")
    sizes = tuple(positive_int(sizes_raw[d], where / "sizes" / d, "a positive integer size")
                  for d in dims)
    used = {d for _, axes, _ in parsed for axis in axes for d in axis}
    for d in sorted(used - set(dims)):
        raise (where / "einsum").error(f"dim {shown(d)} has no size in `sizes` (sizes: {', '.join(dims)})")
    for d in dims:
        if d not in used:
            raise (where / "sizes" / d).error("dim is not used by the einsum")
    if len(parsed) > MAX_TENSORS:
        raise (where / "einsum").error(f"{len(parsed)} tensors, above the limit of {MAX_TENSORS} "
                                       "this tool handles (keep sets are subsets of them)")
    for tensor, axes, _ in parsed:
        for axis in axes:
            for d, c in axis.items():
                if c > MAX_COEFFICIENT:
                    raise (where / "einsum").error(f"coefficient {c:,} of {d} in {tensor} is above "
                                                   f"the limit of {MAX_COEFFICIENT:,}")
    if math.prod(sizes) > MAX_MACS:
        raise (where / "sizes").error(f"the sizes multiply to {math.prod(sizes):,} MACs, above the "
                                      f"limit of {MAX_MACS:,} (2^53) this tool handles")
    n_outputs = sum(is_out for _, _, is_out in parsed)
    default = data.get("dtype")
    per_tensor = data.get("dtypes") or {}
    if not isinstance(per_tensor, dict):
        raise (where / "dtypes").error("expected a mapping of tensor -> dtype")
    names = [tensor for tensor, _, _ in parsed]
    for tensor in per_tensor:
        if tensor not in names:
            raise (where / "dtypes" / tensor).error(f"no tensor of that name (tensors: {', '.join(names)})")
    dtypes = {}
    for tensor in names:
        raw = per_tensor.get(tensor, default)
        if raw is None:
            raise (where / "dtypes").error(f"tensor {tensor} has no dtype (give `dtype` or `dtypes.{tensor}`)")
        key = where / "dtypes" / tensor if tensor in per_tensor else where / "dtype"
        dtypes[tensor] = parse_dtype(raw, key)
    einsum, scales, block_dims = data["einsum"], {}, ()
    rewritten = block_scale(parsed, dict(zip(dims, sizes)), {t: name for t, (name, _) in dtypes.items()}, where)
    if rewritten is not None:
        parsed, einsum, scales = rewritten.parsed, rewritten.einsum, rewritten.scales
        dims, sizes = tuple(rewritten.sizes), tuple(rewritten.sizes.values())
        block_dims = tuple(dims.index(d) for d in rewritten.block_dims)
        dtypes.update({t: parse_dtype(rewritten.dtypes[t], where / "dtypes") for t in scales})
        if len(dims) > MAX_DIMS or len(parsed) > MAX_TENSORS:
            raise (where / "dtypes").error(f"the block-scaled rewrite ({einsum}) has {len(dims)} dims and "
                                           f"{len(parsed)} tensors, above the limits of {MAX_DIMS} and {MAX_TENSORS}")
    tensors = []
    for tensor, axes, is_output in parsed:
        dtype, bits = dtypes[tensor]
        exprs = tuple(tuple((dims.index(d), c) for d, c in axis.items()) for axis in axes)
        words = tiles.box_words(exprs, sizes)
        if words * bits > MAX_MACS:
            raise (where / "einsum").error(f"tensor {tensor} spans {words:,} words of {bits} bits, above "
                                           f"the limit of {MAX_MACS:,} (2^53) bits this tool handles")
        tensors.append(Tensor(tensor, exprs, is_output, bits, dtype, scales.get(tensor, "")))
    assert n_outputs == 1
    return Workload(name=name_text(data["name"], where / "name"), einsum=einsum, dims=dims, block_dims=block_dims,
                    sizes=sizes, tensors=tuple(tensors),
                    description=text(data.get("description", ""), where / "description"),
                    source=text(data.get("source", ""), where / "source"), file=where.file)

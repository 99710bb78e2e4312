"""What `mapper import-model` prints and writes: the summary of an import, and the model file
in the presets' layout (flow style for sizes, lists and each chain op, one line each)."""
from __future__ import annotations

from pathlib import Path

import yaml

from ..errors import SpecError
from ..sweep.models import expand


class _Flow(dict):
    pass


class _FlowList(list):
    pass


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Flow, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v.items(), flow_style=True))
_Dumper.add_representer(_FlowList, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))


def _styled(data: dict) -> dict:
    out = dict(data)
    if "inputs" in out:
        out["inputs"] = _Flow(out["inputs"])
    out["layers"] = [_entry(layer) for layer in data["layers"]]
    if "chains" in data:
        out["chains"] = [{**_entry(chain), "ops": [_Flow({k: _FlowList(v) if isinstance(v, list) else v
                                                          for k, v in op.items()}) for op in chain["ops"]]}
                         for chain in data["chains"]]
    return out


def _entry(entry: dict) -> dict:
    return {k: (_Flow(v) if isinstance(v, dict) else _FlowList(v) if isinstance(v, list) and k != "ops" else v)
            for k, v in entry.items()}


def yaml_text(data: dict) -> str:
    return yaml.dump(_styled(data), Dumper=_Dumper, sort_keys=False, width=110, allow_unicode=True)


def write_yaml(data: dict, path: Path) -> None:
    try:
        path.write_text(yaml_text(data))
    except OSError as exc:
        raise SpecError(str(path), "", f"cannot write the model file ({exc.strerror})") from None


def _si(value: float, unit: str) -> str:
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:.1f} {prefix}{unit}"
    return f"{value:.0f} {unit}"


def summary_text(source, imported, model, seconds: float) -> str:
    s = imported.structure
    expansion = expand(model, None, {})
    layers = sum(g.count for g in expansion.groups)
    macs = sum(g.workload.macs * g.count for g in expansion.groups)
    at = ", ".join(f"{k}={v}" for k, v in imported.inputs.items())
    lines = [f"{source.path}: ONNX opset {source.opset}" + (f" ({source.producer})" if source.producer else "")
             + f", {len(source.nodes):,} nodes, read in {seconds:.1f} s",
             f"  {len(model.layers)} layer entries ({layers} layers, {len(expansion.groups)} distinct shapes), "
             f"{len(model.chains)} chains; {_si(macs, 'MACs')} per forward pass" + (f" at {at}" if at else "")
             + f"; {_si(s.parameters, 'parameters')}",
             f"  inputs: {at} (the graph's symbolic dims; `mapper sweep --seq/--batch` sets them)" if at else
             "  inputs: none (the graph's shapes are fixed)",
             f"  dtype {model.dtype}" + (f", layer outputs {model.output_dtype}" if model.output_dtype else "")]
    if s.merged:
        lines.append(f"  {s.merged} projections feeding attention from the same activations written as "
                     f"{s.merged_into} GEMMs over their concatenated outputs (fused Q/K/V, as kernels run them)")
    if s.copies:
        lines.append("  layout ops that copy data (free in the model): "
                     + ", ".join(f"{n} {op}" for op, n in s.copies.most_common()))
    if s.unknown:
        counts = {}
        for op in s.unknown:
            counts[op] = counts.get(op, 0) + 1
        lines.append(f"  {len(s.unknown)} ops not modelled as compute (kept as streaming ops with their bytes): "
                     + ", ".join(f"{op}" + (f" x{n}" if n > 1 else "") for op, n in counts.items()))
    else:
        lines.append("  every op modelled (0 ops kept as streaming ops only)")
    return "\n".join(lines)

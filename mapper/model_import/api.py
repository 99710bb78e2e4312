"""`import_model`: any source the importer reads, as a model file's contents, the loaded model and
the summary `mapper import-model` prints."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import SpecError
from .model_file import import_source
from .onnx_graph import Source, read_onnx, source_from_proto
from .structure import DtypeChoice


@dataclass(frozen=True)
class ImportedModel:
    """An imported model: `data` is the model file's contents (a dict), `model` the loaded
    `Model` (what `mapper sweep --model` runs), `summary` what `import-model` prints."""
    data: dict
    model: object
    summary: str

    def write(self, path) -> None:
        from .summary import write_yaml
        write_yaml(self.data, Path(path))


def source_of(path: str, values: dict[str, int]) -> Source:
    """The graph of a file: ONNX, a `torch.export` program (`.pt2`) or a Hugging Face
    configuration (`config.json` or its folder)."""
    p = Path(path)
    if not p.exists():
        raise SpecError(str(path), "", "no such file")
    if p.suffix.lower() == ".pt2":
        from .torch_source import proto_from_pt2
        return source_from_proto(proto_from_pt2(str(p)), str(p))
    if p.suffix.lower() == ".json" or p.is_dir():
        from .torch_source import proto_from_config
        config = p / "config.json" if p.is_dir() else p
        return source_from_proto(proto_from_config(str(config), values.get("batch"), values.get("seq")), str(config))
    return read_onnx(str(p))


def import_model(source, example_inputs=None, *, seq: int | None = None, batch: int | None = None,
                 dims: dict[str, int] | None = None, name: str | None = None, dtype: str | None = None,
                 output_dtype: str | None = None) -> ImportedModel:
    """Import a model: `source` is a path (ONNX, `.pt2`, `config.json`), an `onnx.ModelProto`,
    a `torch.export.ExportedProgram` or a `torch.nn.Module` called on `example_inputs` (meta
    tensors welcome). `seq`, `batch` and `dims` bind the graph's symbolic dims (the written
    model's inputs and their defaults); `dtype` sets every floating-point tensor's element type
    and `output_dtype` the layers' outputs'. Raises `SpecError` on anything it cannot read."""
    from .summary import summary_text
    started = time.perf_counter()
    values = dict(dims or {})
    values.update({k: v for k, v in (("seq", seq), ("batch", batch)) if v is not None})
    where = "<model>"
    if isinstance(source, (str, Path)):
        where = str(source)
        graph = source_of(str(source), values)
    elif type(source).__name__ == "ModelProto":
        graph = source_from_proto(source, where)
    else:
        from .torch_source import proto_from_module
        where = f"<{type(source).__name__}>"
        graph = source_from_proto(proto_from_module(source, example_inputs, where), where)
    label = name or _default_name(where)
    imported = import_source(graph, values, label, DtypeChoice(dtype, output_dtype))
    from ..sweep.models import model_from_dict
    from ..units import Where
    model = model_from_dict(imported.model, Where(where))
    return ImportedModel(imported.model, model, summary_text(graph, imported, model,
                                                             time.perf_counter() - started))


def _default_name(where: str) -> str:
    path = Path(where)
    stem = path.parent.name if path.name == "config.json" else path.stem
    return stem.strip("<>") or "model"


"""PyTorch models as ONNX graphs, without their weights' values: a module with example inputs,
a program saved by `torch.export.save` (`.pt2`), or a Hugging Face `config.json` built with
`transformers` on the meta device (nothing is downloaded; a 7B-parameter model takes what its
graph takes, not 28 GB).

The graph is traced by `torch.export` and written as ONNX by `torch.onnx.export(dynamo=True)`
(it needs `onnxscript`); the weights are then dropped (each becomes a graph input with its shape
and type, marked as a parameter) before anything is serialised, so meta tensors never need
values. Batch and sequence stay symbolic where the trace allows (examples of 2 and 8), so the
written model keeps them as its inputs. This module needs the optional `torch` extra:
`pip install 'mapper[torch]'`.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import SpecError

EXAMPLE_BATCH, EXAMPLE_SEQ = 2, 8


def _torch(where: str):
    try:
        import torch
        import onnxscript  # noqa: F401  (torch's ONNX exporter needs it: said here, not deep in torch)
    except ImportError as exc:
        raise SpecError(where, "", f"importing a PyTorch model needs torch and onnxscript ({exc.name} is missing): "
                        "pip install 'mapper[torch]'") from None
    return torch


def proto_from_module(module, example_inputs, where: str, dynamic_shapes=None, kwargs=None, fixed=None):
    """The ONNX ModelProto of a module (or ExportedProgram) traced on its example inputs, with
    `dynamic_shapes` symbolic; where torch cannot keep them so, traced again on `fixed` (the
    user's own sizes) with every shape fixed."""
    torch = _torch(where)
    if not isinstance(example_inputs, tuple):
        example_inputs = (example_inputs,)
    try:
        program = torch.onnx.export(module, example_inputs, kwargs=kwargs, dynamo=True, optimize=False,
                                    dynamic_shapes=dynamic_shapes, verbose=False, report=False)
    except Exception as exc:          # the trace failed: the model's code, not the user's input
        if dynamic_shapes is not None:
            return proto_from_module(module, fixed or example_inputs, where, None, kwargs)
        raise SpecError(where, "", f"torch could not export the model to ONNX ({type(exc).__name__}: "
                        f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
    return _without_weights(program)


def _without_weights(program):
    """The program's ONNX graph with every initializer turned into a typed graph input (its
    values, meta tensors or not, never read), simplified by onnxscript's optimizer."""
    import onnx_ir as ir
    model = program.model
    graph = model.graph
    initializers = list(graph.initializers.values())
    graph.initializers.clear()
    for value in initializers:
        value.const_value = None
        value.metadata_props.setdefault("pkg.torch.export.graph_signature.InputSpec.kind", "PARAMETER")
        graph.inputs.append(value)
    try:
        import onnxscript
        onnxscript.optimizer.optimize(model)
    except Exception:                 # the optimizer is a convenience: the raw graph imports too
        pass
    return ir.serde.serialize_model(model)


def proto_from_pt2(path: str):
    torch = _torch(path)
    try:
        program = torch.export.load(path)
    except Exception as exc:
        raise SpecError(path, "", f"not a program saved by torch.export.save ({type(exc).__name__}: {exc})") from None
    args, kwargs = program.example_inputs or ((), {})
    return proto_from_module(program, tuple(args), path, kwargs=kwargs or None)


def proto_from_config(path: str, batch: int | None, seq: int | None):
    """A Hugging Face model from its configuration file, on the meta device."""
    torch = _torch(path)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")          # nothing is downloaded, ever
    try:
        import transformers
    except ImportError:
        raise SpecError(path, "", "importing a Hugging Face configuration needs transformers: "
                        "pip install 'mapper[torch]'") from None
    try:
        config = transformers.AutoConfig.from_pretrained(str(Path(path).parent if Path(path).is_file() else path))
    except Exception as exc:
        raise SpecError(path, "", f"not a Hugging Face model configuration ({type(exc).__name__}: "
                        f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
    config._attn_implementation = "eager"                  # attention written out: scores, softmax, values
    if hasattr(config, "use_cache"):
        config.use_cache = False
    cls = _model_class(transformers, config, path)
    with torch.device("meta"):
        try:
            module = cls(config).eval()
        except Exception as exc:
            raise SpecError(path, "", f"transformers could not build {cls.__name__} from it ({exc})") from None
    # traced at small sizes with batch and sequence symbolic (what the trace builds from the
    # sizes, a causal mask say, stays small); at the user's sizes only if that fails
    wrapper, args, dynamic = _inputs(torch, module, config, EXAMPLE_BATCH, EXAMPLE_SEQ)
    fixed = _inputs(torch, module, config, batch or 1, seq or EXAMPLE_SEQ)[1]
    return proto_from_module(wrapper, args, path, dynamic, fixed=fixed)


def _model_class(transformers, config, path: str):
    for name in getattr(config, "architectures", None) or []:
        cls = getattr(transformers, name, None)
        if cls is not None:
            return cls
    for auto in ("AutoModel", "AutoModelForCausalLM", "AutoModelForImageClassification"):
        try:
            mapping = getattr(transformers, auto)._model_mapping
            return mapping[type(config)]
        except (KeyError, AttributeError):
            continue
    raise SpecError(path, "model_type", f"transformers has no model for {type(config).__name__}")


def _inputs(torch, module, config, batch: int, seq: int):
    """The traced call: pixels for a vision model (what its `forward` takes), token ids for any
    other, with batch and sequence left symbolic; the module wrapped to return its first
    output alone."""
    import inspect
    from torch.export import Dim

    class FirstOutput(torch.nn.Module):
        def __init__(self, inner, key):
            super().__init__()
            self.m, self.key = inner, key

        def forward(self, x):
            out = self.m(**{self.key: x})
            return out[0] if isinstance(out, (tuple, list)) else next(iter(out.values()))
    if "pixel_values" in inspect.signature(module.forward).parameters:
        size = getattr(config, "image_size", 224)
        size = size if isinstance(size, int) else size[0]
        x = torch.zeros(batch, getattr(config, "num_channels", 3), size, size, device="meta")
        return FirstOutput(module, "pixel_values").eval(), (x,), {"x": {0: Dim("batch")}}
    x = torch.ones(batch, seq, dtype=torch.long, device="meta")
    return FirstOutput(module, "input_ids").eval(), (x,), {"x": {0: Dim("batch"), 1: Dim("seq")}}

"""The networks the importer's benchmark (`bench_import.py`) and its torch tests
(tests/test_model_import_torch.py) are given: GPT-2 small with random weights, exported to an
ONNX file, and a Hugging Face config written as a `config.json`. Needs the `torch` extra."""
from __future__ import annotations

from pathlib import Path


def gpt2_onnx(folder: Path) -> str:
    """GPT-2 small with random weights (its biases too: an exporter drops all-zero ones),
    exported to `folder`/gpt2.onnx with batch and sequence symbolic; the file's path."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    config = GPT2Config(use_cache=False)
    config._attn_implementation = "eager"
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.02)

    class Logits(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, ids):
            return self.inner(input_ids=ids, use_cache=False).logits
    path = folder / "gpt2.onnx"
    dims = {"ids": {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq")}}
    torch.onnx.export(Logits(model).eval(), (torch.ones(2, 8, dtype=torch.long),), dynamo=True,
                      dynamic_shapes=dims, report=False).save(str(path))
    return str(path)


def config_file(folder: Path, name: str, config) -> str:
    """`config` (a transformers config) written as `folder`/`name`/config.json; its path."""
    (folder / name).mkdir()
    config.to_json_file(str(folder / name / "config.json"))
    return str(folder / name / "config.json")

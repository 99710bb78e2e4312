"""Real models in: an ONNX file, a PyTorch module or saved program, or a Hugging Face
configuration, read into a model file of the existing format (`docs/SPECS.md`, "Models").

Modules, lowest first: `onnx_graph` (the file, checked, its shapes at any binding), `atoms`
(axes as products of atoms through layout ops), `ops` (the importer's op value), `lower`
(ONNX nodes -> ops), `patterns` (attention, merged projections, decomposed norms and
activations), `einsums` (each op's einsum, folded and named as the presets name theirs),
`chains` (op graphs per block), `structure` (one binding's layers and chains, repeats
counted), `model_file` (symbols as inputs, sizes as expressions), `summary` (what is printed
and written), `torch_source` (PyTorch and transformers, optional), `api` (`import_model`),
`cache` (an import a process reuses: `mapper sweep --model FILE.onnx`), `command`
(`mapper import-model`).
"""
__all__ = ["ImportedModel", "import_model", "importable", "imported_model"]


def __getattr__(name: str):
    """The importer loads on first use: a sweep's workers, which only ask `importable`, never do."""
    if name in ("ImportedModel", "import_model"):
        from . import api
        return getattr(api, name)
    if name in ("importable", "imported_model"):
        from . import cache
        return getattr(cache, name)
    raise AttributeError(f"module 'mapper.model_import' has no attribute {name!r}")

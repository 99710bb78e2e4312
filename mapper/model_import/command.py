"""`mapper import-model FILE [-o MODEL.yaml] [--seq N] [--batch N] [--dim NAME=N] [--name NAME]
[--dtype D] [--output-dtype D]`: an ONNX file, a `torch.export` program or a Hugging Face
configuration, written as a model file that `mapper sweep --model` runs."""
from __future__ import annotations

import re
import sys
from pathlib import Path

from .. import flags
from ..errors import SpecError
from ..dtypes import DTYPE_BITS


def add_parser(sub) -> None:
    p = sub.add_parser("import-model", help="read an ONNX model, a torch.export program or a Hugging Face "
                       "config.json into a model file (layers and chains)")
    p.add_argument("file", help="model.onnx, program.pt2 (torch.export.save), or config.json (or its folder)")
    p.add_argument("-o", "--output", default=None, metavar="MODEL.yaml",
                   help="where to write the model file (default: NAME.yaml here, never over an existing "
                        "file; '-': standard output)")
    p.add_argument("--seq", type=flags.count, default=None, help="value of the sequence-length symbol")
    p.add_argument("--batch", type=flags.count, default=None, help="value of the batch symbol (default 1)")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=N",
                   help="value of any other symbolic dim of the graph; repeatable")
    p.add_argument("--name", default=None, help="the model's name (default: the file's)")
    p.add_argument("--dtype", default=None, help="element type of every floating-point tensor "
                   f"({', '.join(DTYPE_BITS)}; default: the graph's own)")
    p.add_argument("--output-dtype", default=None, help="element type of the layers' outputs (their accumulation)")
    p.set_defaults(run=run)


def _dims(items: list[str]) -> dict[str, int]:
    out = {}
    for item in items:
        match = re.fullmatch(r"\s*([^=\s]+)\s*=\s*([0-9]{1,12})\s*", item)
        if not match or int(match.group(2)) <= 0:
            raise SpecError("--dim", "", f"expected NAME=N with N a positive integer, got {item!r}")
        out[match.group(1)] = int(match.group(2))
    return out


def _dtype(value: str | None, flag: str) -> str | None:
    if value is not None and value.lower() not in DTYPE_BITS:
        raise SpecError(flag, "", f"expected one of {', '.join(DTYPE_BITS)}, got {value!r}")
    return value.lower() if value else None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False


def run(args) -> int:
    from .api import import_model
    from .summary import write_yaml, yaml_text
    dims = _dims(args.dim)
    dtype, output_dtype = _dtype(args.dtype, "--dtype"), _dtype(args.output_dtype, "--output-dtype")
    target = None
    if args.output != "-":
        target = Path(args.output) if args.output else None
        if target is not None and target.is_dir():
            raise SpecError(str(target), "", "-o names a folder: give the model file's path")
        if target is not None and _same_file(target, Path(args.file)):
            raise SpecError(str(target), "", "-o names the file being imported: give another path")
    imported = import_model(args.file, seq=args.seq, batch=args.batch, dims=dims, name=args.name,
                            dtype=dtype, output_dtype=output_dtype)
    if args.output == "-":
        sys.stdout.write(yaml_text(imported.data))
        print(imported.summary, file=sys.stderr)
        return 0
    if target is None:
        target = Path(f"{imported.data['name']}.yaml")
        if target.exists():
            raise SpecError(str(target), "", "exists: give -o to choose the file (an existing one is "
                            "overwritten only when named)")
    write_yaml(imported.data, target)
    print(imported.summary)
    print(f"  written to {target}: `mapper sweep ARCH --model {target}` runs it")
    return 0

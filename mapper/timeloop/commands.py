"""The Timeloop side of two commands: `import-timeloop` (translate Timeloop files into this
project's YAML) and `--export-timeloop` (write a mapping as a Timeloop mapping file).

Reading a command's inputs that may be Timeloop files is `mapper.inputs`'s job.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from ..errors import SpecError

if TYPE_CHECKING:
    from .design import Imported

# the Timeloop readers (design, mapping, constraints) are imported where they are used:
# a search of this project's own specs or presets never needs them (their import costs start-up)


def write_export(path, mapping, arch, workload, imported: Imported | None) -> None:
    from .mapping import export
    if arch.capacity_groups:
        raise SpecError("--export-timeloop", "", "a mapping whose tensors sit at their own depths within a level "
                        "(`tensor_depths`) has no Timeloop form: Timeloop holds each level's tiles under all of "
                        "its loops; search without tensor_depths to export")
    ctx = imported.arch_ctx if imported else None
    data = export(mapping, arch, workload, ctx)
    header = (f"# Timeloop mapping written by mapper for {workload.name} on {arch.name}.\n"
              "# Permutations are innermost first; a spatial directive's first `split` dims use the\n"
              "# mesh's X axis, the rest Y.\n")
    Path(path).write_text(header + yaml.safe_dump(data, sort_keys=False, width=120))


def import_command(files, out_dir, ert=None, timeloop_rules: bool = False) -> list[Path]:
    """Translate Timeloop files into this project's YAML in out_dir; returns the files written."""
    from . import constraints as tl_constraints
    from .design import build, design_name, read_parts
    parts = read_parts(list(files) + ([ert] if ert else []))
    imported = build(parts, timeloop_rules=timeloop_rules)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    notes = imported.notes
    written = []
    name = imported.arch_dict["name"] if imported.arch_dict else design_name(parts.problem_path, "design")
    mapspace = None
    if imported.arch_ctx is not None:
        mapspace = tl_constraints.translate(imported.arch_ctx, imported.arch, imported.workload, notes,
                                            f"{name}-timeloop")
    header = "".join(f"# note: {n}\n" for n in notes)
    sources = ", ".join(str(f) for f in files)
    mapping = None
    if imported.mapping_dict is not None:
        mapping = {"arch": imported.arch.name, "workload": imported.workload.name,
                   **imported.mapping_dict}
    docs = [("arch", imported.arch_dict, f"{name}.arch.yaml"),
            ("workload", imported.workload_dict, f"{name}.workload.yaml"),
            ("mapping", mapping, f"{name}.mapping.yaml"),
            ("mapspace", mapspace, f"{name}.mapspace.yaml")]
    for kind, data, filename in docs:
        if data is None:
            continue
        path = out / filename
        path.write_text(f"# {kind} imported from Timeloop files: {sources}\n{header}"
                        + yaml.safe_dump(data, sort_keys=False, width=120))
        written.append(path)
    return written

"""What the command line needs: load inputs that may be Timeloop files, write the import, export.

`load_inputs` looks at each file's top-level keys: when none is a Timeloop file it returns None
and the caller loads this project's specs as usual; otherwise the Timeloop files are translated
and any of this project's own files (a preset arch, say) are used beside them.
"""
from __future__ import annotations

import sys
from pathlib import Path

import yaml

from typing import TYPE_CHECKING

from ..errors import SpecError
from ..units import Where

if TYPE_CHECKING:
    from .design import Imported

# the Timeloop readers (design, mapping, yamlio, constraints) are imported where they are used:
# a search of this project's own specs or presets never needs them (~30 ms of start-up)


def _is_timeloop(arg) -> bool:
    path = Path(str(arg))
    if not path.is_file():
        return False
    from .design import timeloop_keys
    from .yamlio import read_timeloop_yaml
    try:
        return bool(timeloop_keys(read_timeloop_yaml(path)))
    except SpecError:
        return False


def load_inputs(arch_arg, workload_arg, mapping_arg=None, ert=None, extra=(),
                timeloop_rules: bool = False) -> Imported | None:
    """Specs from arguments any of which may be Timeloop files; None if none is.
    `extra`: further files that join the Timeloop set if they are Timeloop files (constraints)."""
    from ..load import load_arch, load_mapping, load_workload
    args = [a for a in (arch_arg, workload_arg, mapping_arg) if a is not None]
    timeloop = [a for a in args if _is_timeloop(a)]
    if timeloop:
        timeloop += [a for a in extra if a is not None and _is_timeloop(a)]
    if not timeloop:
        return None
    from .design import build, read_parts
    parts = read_parts(list(dict.fromkeys(timeloop)) + ([ert] if ert else []))
    arch = None if parts.architecture is not None else load_arch(arch_arg)
    workload = None if parts.problem is not None else load_workload(workload_arg)
    imported = build(parts, arch=arch, workload=workload, timeloop_rules=timeloop_rules)
    if mapping_arg is not None and parts.mapping is None:
        imported.mapping = load_mapping(mapping_arg, imported.arch, imported.workload)
    if mapping_arg is not None and imported.mapping is None:
        raise SpecError(str(mapping_arg), "", "no mapping in this file")
    return imported


def print_notes(imported: Imported | None) -> None:
    for note in (imported.notes if imported else []):
        print(f"mapper: note: {note}", file=sys.stderr)


def write_export(path, mapping, arch, workload, imported: Imported | None) -> None:
    from .mapping import export
    ctx = imported.arch_ctx if imported else None
    data = export(mapping, arch, workload, ctx)
    header = (f"# Timeloop mapping written by mapper for {workload.name} on {arch.name}.\n"
              "# Permutations are innermost first; a spatial directive's first `split` dims use the\n"
              "# mesh's X axis, the rest Y.\n")
    Path(path).write_text(header + yaml.safe_dump(data, sort_keys=False, width=120))


def with_timeloop_rules(arch):
    from .design import with_timeloop_rules as rules
    return rules(arch)


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


def imported_constraints(imported: Imported, name: str = "timeloop"):
    """The mapspace of Timeloop's constraints (inline v0.4 ones and any constraints file read)."""
    from ..load import constraints_from_dict
    from . import constraints as tl_constraints
    data = tl_constraints.translate(imported.arch_ctx, imported.arch, imported.workload,
                                    imported.notes, name)
    return constraints_from_dict(data, Where(f"{name} (translated Timeloop constraints)"))


def search_inputs(args):
    """arch, workload, constraints, warm-start mappings and the import (or None) for a search.

    Any of the arch, workload, --mapspace and --warm-start files may be a Timeloop file; with a
    Timeloop architecture and no --mapspace of this project's format, the mapspace is Timeloop's
    constraints."""
    from ..load import load_arch, load_constraints, load_warm_start, load_workload
    from ..load import mapping_from_checked_dict
    rules = getattr(args, "timeloop_rules", False)
    imported = load_inputs(args.arch, args.workload, None, getattr(args, "ert", None),
                           extra=[args.mapspace, getattr(args, "timeloop_mapper", None)], timeloop_rules=rules)
    if imported is None:
        arch, workload = load_arch(args.arch), load_workload(args.workload)
        if rules:
            arch = with_timeloop_rules(arch)
        constraints = load_constraints(args.mapspace)
        mapper_file = getattr(args, "timeloop_mapper", None)
        if mapper_file:       # Timeloop's mapper settings beside this project's own specs
            imported = _mapper_only(mapper_file, arch, workload)
            print_notes(imported)
    else:
        arch, workload = imported.arch, imported.workload
        if imported.arch_ctx is not None and (args.mapspace is None or _is_timeloop(args.mapspace)):
            constraints = imported_constraints(imported)
        else:
            constraints = load_constraints(args.mapspace)
        print_notes(imported)
    warm = []
    for path in getattr(args, "warm_start", None) or ():
        if _is_timeloop(path):
            from .mapping import translate as translate_mapping
            from .yamlio import read_timeloop_yaml
            data = read_timeloop_yaml(Path(path))
            where = Where(str(path))
            ctx = imported.arch_ctx if imported else None
            entries = translate_mapping(data["mapping"], where, arch, workload, ctx, [])
            warm.append(mapping_from_checked_dict(entries, arch, workload, where))
        else:
            warm.append(load_warm_start(path, arch, workload))
    return arch, workload, constraints, tuple(warm), imported


def _mapper_only(path, arch, workload) -> Imported:
    from .design import Imported, mapper_objective, read_parts
    parts = read_parts([path])
    if parts.mapper is None:
        raise SpecError(str(path), "mapper", "expected Timeloop's `mapper:` settings")
    notes: list[str] = []
    objective = mapper_objective(*parts.mapper, notes)
    return Imported(None, None, None, None, arch, workload, None, notes, objective)


def reference_lines(args, arch, workload, result) -> str:
    """The search's result beside the energy of each warm-start mapping (e.g. Timeloop's own)."""
    from ..cost import evaluate
    warm = args.warm_mappings
    ev = result.evaluation
    lines = [f"search result: {ev.energy_pj:,.1f} pJ, {ev.cycles:,.0f} cycles, EDP {ev.edp:.4g}"]
    for path, mapping in zip(args.warm_start, warm):
        ref = evaluate(arch, workload, mapping)
        lines.append(f"reference {path}: {ref.energy_pj:,.1f} pJ, {ref.cycles:,.0f} cycles, EDP {ref.edp:.4g}"
                     f" (search: energy x{ev.energy_pj / ref.energy_pj:.3f}, EDP x{ev.edp / ref.edp:.3f})")
    return "\n".join(lines)

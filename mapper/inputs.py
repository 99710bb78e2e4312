"""What a command reads, through one door: this project's specs and presets, or Timeloop's files.

Each command's inputs enter here, as plain arguments (file paths or preset names, and the
options that change how they are read), and leave as one frozen value: `SearchInputs` for a
search (and the mapspace it runs on), `EvaluationInputs` for pricing one mapping. Any of the
arch, workload, mapping, `mapspace`, `timeloop_mapper` and warm-start files of a search or an
evaluation may be a Timeloop file, recognised by its top-level keys; the others are this
project's own YAML (`load`). What the translation had to approximate or could not read comes
back as `notes`, one line each, for the caller to show; nothing here prints.

The Timeloop readers are imported only when a Timeloop file is read: a search of this
project's own specs or presets never needs them (their import costs start-up; docs/RESULTS.md).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from . import depths
from .bind import check_fits, kernel_arch, paired_for
from .constraints import Constraints
from .errors import SpecError
from .load import (constraints_from_dict, kernel_kind, load_arch, load_constraints, load_mapping, load_workload,
                   mapping_data, mapping_from_checked_dict, mapping_from_dict, read_yaml, resolve)
from .mapping import Mapping
from .rescale import rescale
from .spec import Arch, Workload
from .units import Where

if TYPE_CHECKING:
    from .timeloop.design import Imported


@dataclass(frozen=True)
class SearchInputs:
    """The specs a search runs on. `imported` is what came from Timeloop files (None when all
    were this project's), kept for writing a Timeloop mapping back with its level names;
    `objective_name` is the objective a Timeloop mapper file asks for (an explicit objective
    wins); `warm_starts` are mappings of this arch and workload to start the search from."""

    arch: Arch
    workload: Workload
    constraints: Constraints
    imported: Imported | None = None
    objective_name: str | None = None
    notes: tuple[str, ...] = ()
    warm_starts: tuple[Mapping, ...] = ()


@dataclass(frozen=True)
class EvaluationInputs:
    """One mapping to price, checked against its arch and workload (capacity included)."""

    arch: Arch
    workload: Workload
    mapping: Mapping
    imported: Imported | None = None
    notes: tuple[str, ...] = ()


# ----------------------------------------------------------------------------- searches

def search_inputs(arch: str, workload: str, mapspace: str | None = None, *, ert: str | None = None,
                  timeloop_rules: bool = False, timeloop_mapper: str | None = None) -> SearchInputs:
    """A search's arch, workload and mapspace constraints (no warm starts: `with_warm_starts`).

    With a Timeloop architecture and no `mapspace` of this project's format, the mapspace is
    Timeloop's constraints (inline v0.4 ones and any constraints file given as `mapspace`).
    `ert`: Accelergy's energy table for a Timeloop architecture (default: one beside it);
    `timeloop_rules`: count with Timeloop's rules where they differ; `timeloop_mapper`:
    Timeloop's mapper settings, whose optimization-metrics name the objective."""
    imported = _timeloop_import(arch, workload, None, ert, extra=[mapspace, timeloop_mapper],
                                timeloop_rules=timeloop_rules)
    if imported is None:
        arch_spec, workload_spec = load_arch(arch), load_workload(workload)
        if timeloop_rules:
            from .timeloop.design import with_timeloop_rules
            arch_spec = with_timeloop_rules(arch_spec)
        constraints = load_constraints(mapspace)
        if timeloop_mapper:       # Timeloop's mapper settings beside this project's own specs
            imported = _mapper_settings(timeloop_mapper, arch_spec, workload_spec)
    else:
        arch_spec, workload_spec = imported.arch, imported.workload
        if imported.arch_ctx is not None and (mapspace is None or _is_timeloop(mapspace)):
            constraints = imported_constraints(imported)      # its notes join the import's
        else:
            constraints = load_constraints(mapspace)
    return SearchInputs(kernel_arch(arch_spec, constraints).for_workload(workload_spec), workload_spec, constraints,
                        imported,
                        objective_name=imported.objective if imported else None,
                        notes=tuple(imported.notes) if imported else ())


def native_search_inputs(arch: str, workload: str, mapspace: str | None = None) -> SearchInputs:
    """A mapspace of this project's own arch, workload and mapspace files (or presets)."""
    workload_spec = load_workload(workload)
    constraints = load_constraints(mapspace)
    return SearchInputs(kernel_arch(load_arch(arch), constraints).for_workload(workload_spec), workload_spec,
                        constraints)


def with_warm_starts(found: SearchInputs, paths) -> SearchInputs:
    """`found` with the mappings of `paths` (files or presets) to start from, each a mapping of
    this project's format (of this shape, or of another shape it carries to: `load_warm_start`)
    or a Timeloop mapping file. Read after `search_inputs` returned, so that a caller can show
    its notes before a warm start is refused."""
    warm = []
    for path in paths:
        if _is_timeloop(path):
            warm.append(_timeloop_mapping(path, found))
        else:       # on the levels the search reports (`depths`: sub-levels where the mapspace asks)
            warm.append(load_warm_start(path, depths.searched_arch(found.arch, found.workload, found.constraints),
                                        found.workload))
        _require_clusters_allowed(warm[-1], found.arch, found.constraints, Where(str(path)))
    return replace(found, warm_starts=tuple(warm))


def _require_clusters_allowed(mapping: Mapping, arch: Arch, constraints: Constraints, where: Where) -> None:
    """A mapping that splits a fanout over a thread-block cluster's CTAs (mesh y of a level with
    `block_clusters`) starts only a search whose mapspace has clusters (`clusters: true`)."""
    if constraints.clusters:
        return
    for level, lm in zip(arch.levels, mapping.levels):
        if level.clusters is not None and any(axis == 1 for _, _, axis in lm.spatial):
            raise where.error(f"this mapping splits {level.name}'s fanout over a thread-block cluster "
                              f"(spatial axis y), which mapspace '{constraints.name}' leaves out: "
                              "use --mapspace clusters")


def load_warm_start(name_or_path, arch: Arch, workload: Workload) -> Mapping:
    """A mapping file to start a search from: of this workload, or of another shape of the same
    einsum (a neighbouring shape's optimum), then carried to this one (`rescale.rescale`:
    the outermost loops grow or shrink by each dim's ratio)."""
    path = resolve("mappings", name_or_path)
    data = read_yaml(path)
    shape = _mapping_shape(data, workload)
    if shape is None or shape == tuple(workload.sizes):
        return mapping_from_checked_dict(data, arch, workload, Where(str(path)))
    source = replace(workload, sizes=shape)
    carried = rescale(mapping_from_dict(data, arch, source, Where(str(path))), source, workload)
    if carried is None:
        sizes = ", ".join(f"{d}={a}->{b}" for d, a, b in zip(workload.dims, shape, workload.sizes) if a != b)
        raise Where(str(path)).error(f"this mapping is of another shape ({sizes}) and does not carry over: "
                                     "each size must be a whole multiple or divisor of the other, "
                                     "absorbed by the outermost loops")
    check_fits(carried, arch, workload, Where(str(path)))
    return carried


def _mapping_shape(data, workload: Workload) -> tuple[int, ...] | None:
    """Per dim, the product of a mapping file's loop bounds; None when the file is not plain
    enough to read that way (the full reader then says what is wrong)."""
    try:
        product = dict.fromkeys(workload.dims, 1)
        for level in data["mapping"]:
            for loop in list(level.get("loops") or []) + list(level.get("spatial") or []):
                bound = loop["bound"]
                if loop["dim"] not in product or not isinstance(bound, int) or bound < 1:
                    return None
                product[loop["dim"]] *= bound
        return tuple(product[d] for d in workload.dims)
    except (KeyError, TypeError, AttributeError):
        return None


def _timeloop_mapping(path, found: SearchInputs) -> Mapping:
    """A Timeloop mapping file read against the search's arch (with the import's level names,
    when the arch came from Timeloop) and workload; its translation notes are not shown."""
    from .timeloop.mapping import translate as translate_mapping
    from .timeloop.yamlio import read_timeloop_yaml
    data = read_timeloop_yaml(Path(path))
    where = Where(str(path))
    ctx = found.imported.arch_ctx if found.imported else None
    entries = translate_mapping(data["mapping"], where, found.arch, found.workload, ctx, [])
    return mapping_from_checked_dict(entries, found.arch, found.workload, where)


# ----------------------------------------------------------------------------- evaluations

def evaluation_inputs(arch: str, workload: str, mapping: str, *, ert: str | None = None,
                      timeloop_rules: bool = False) -> EvaluationInputs:
    """The arch, workload and mapping of `evaluate`, any of them Timeloop files (`ert` and
    `timeloop_rules` as for `search_inputs`)."""
    imported = _timeloop_import(arch, workload, mapping, ert, timeloop_rules=timeloop_rules)
    if imported is not None:
        return EvaluationInputs(imported.arch, imported.workload, imported.mapping, imported,
                                tuple(imported.notes))
    found = native_evaluation_inputs(arch, workload, mapping)
    if timeloop_rules:
        from .timeloop.design import with_timeloop_rules
        found = replace(found, arch=with_timeloop_rules(found.arch))
    return found


def native_evaluation_inputs(arch: str, workload: str, mapping: str) -> EvaluationInputs:
    """A mapping of this project's format, with its arch and workload (files or presets), priced
    as its `kernel` key says it runs (`kernel_kind`: swap-AB, CTA pairs), as its search priced it."""
    workload_spec, arch_spec = load_workload(workload), load_arch(arch)
    data, name = mapping_data(mapping)
    kind = kernel_kind(data, Where(name))
    if kind.swap_ab:
        workload_spec = replace(workload_spec, operands_swapped=True)
    if kind.cta_pair:
        arch_spec = paired_for(arch_spec, Where(name) / "kernel" / "cta_pair", "evaluate it on the arch it was found on")
    arch_spec = arch_spec.for_workload(workload_spec)     # its MAC rate for these dtypes
    # a level whose tensors it holds at their own depths (`tensor_depths`) as its sub-levels
    arch_spec = depths.named_in(arch_spec, workload_spec, data, name)
    return EvaluationInputs(arch_spec, workload_spec, mapping_from_checked_dict(data, arch_spec, workload_spec,
                                                                               Where(name)))


# ----------------------------------------------------------------------------- Timeloop files

def _is_timeloop(arg) -> bool:
    path = Path(str(arg))
    if not path.is_file():
        return False
    from .timeloop.design import timeloop_keys
    from .timeloop.yamlio import read_timeloop_yaml
    try:
        return bool(timeloop_keys(read_timeloop_yaml(path)))
    except SpecError:
        return False


def _timeloop_import(arch_arg, workload_arg, mapping_arg=None, ert=None, extra=(),
                     timeloop_rules: bool = False) -> Imported | None:
    """Specs from arguments any of which may be Timeloop files; None if none is. The Timeloop
    files are translated together and this project's own files (a preset arch, say) are used
    beside them. `extra`: further files that join the Timeloop set if they are Timeloop files
    (constraints, mapper settings)."""
    args = [a for a in (arch_arg, workload_arg, mapping_arg) if a is not None]
    timeloop = [a for a in args if _is_timeloop(a)]
    if timeloop:
        timeloop += [a for a in extra if a is not None and _is_timeloop(a)]
    if not timeloop:
        return None
    from .timeloop.design import build, read_parts
    parts = read_parts(list(dict.fromkeys(timeloop)) + ([ert] if ert else []))
    arch = None if parts.architecture is not None else load_arch(arch_arg)
    workload = None if parts.problem is not None else load_workload(workload_arg)
    imported = build(parts, arch=arch, workload=workload, timeloop_rules=timeloop_rules)
    if mapping_arg is not None and parts.mapping is None:
        imported = replace(imported, mapping=load_mapping(mapping_arg, imported.arch, imported.workload))
    if mapping_arg is not None and imported.mapping is None:
        raise SpecError(str(mapping_arg), "", "no mapping in this file")
    return imported


def _mapper_settings(path, arch: Arch, workload: Workload) -> Imported:
    """Timeloop's mapper settings read beside this project's own arch and workload."""
    from .timeloop.design import Imported, mapper_objective, read_parts
    parts = read_parts([path])
    if parts.mapper is None:
        raise SpecError(str(path), "mapper", "expected Timeloop's `mapper:` settings")
    notes: list[str] = []
    objective = mapper_objective(*parts.mapper, notes)
    return Imported(None, None, None, None, arch, workload, None, notes, objective)


def imported_constraints(imported: Imported, name: str = "timeloop") -> Constraints:
    """The mapspace of Timeloop's constraints (inline v0.4 ones and any constraints file read);
    what the translation notes is appended to `imported.notes`."""
    from .timeloop import constraints as tl_constraints
    data = tl_constraints.translate(imported.arch_ctx, imported.arch, imported.workload,
                                    imported.notes, name)
    return constraints_from_dict(data, Where(f"{name} (translated Timeloop constraints)"))

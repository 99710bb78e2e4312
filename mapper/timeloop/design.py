"""Group Timeloop files by what they hold and build this project's specs from them.

A Timeloop input file is recognised by its top-level keys: `architecture` (v0.3 tree or v0.4
nodes), `problem`, `mapping` (a list of directives with `target`), `architecture_constraints` /
`constraints` / `mapspace_constraints`, `ERT` / `ERT_summary`. One file may hold several (Timeloop's
front end dumps them all into one). The translation goes through this project's YAML dicts and
the normal loader, so there is one validation path.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from ..errors import SpecError
from ..units import Where
from . import arch as tl_arch
from . import ert as tl_ert
from . import mapping as tl_mapping
from . import problem as tl_problem
from .yamlio import read_timeloop_yaml

CONSTRAINT_KEYS = ("architecture_constraints", "constraints", "mapspace_constraints")
IGNORED_KEYS = ("compound_components", "components", "variables", "globals", "model",
                "dumped_by_timeloop_front_end", "ART", "ART_summary", "mapspace", "version")
GENERIC_STEMS = ("arch", "architecture", "problem", "prob", "map", "mapping", "input", "ERT",
                 "ERT_summary", "constraints")


@dataclass
class Parts:
    """The pieces found in a set of files, each with where it came from."""

    architecture: tuple | None = None
    problem: tuple | None = None
    mapping: tuple | None = None
    ert: tuple | None = None
    constraints: list = field(default_factory=list)
    mapper: tuple | None = None          # Timeloop's mapper settings (its objective is read)
    arch_path: Path | None = None
    problem_path: Path | None = None
    notes: list[str] = field(default_factory=list)


def timeloop_keys(data) -> list[str]:
    """Which Timeloop parts a file's top level holds (empty: not a Timeloop file)."""
    if not isinstance(data, dict):
        return []
    found = []
    if tl_arch.is_arch(data):
        found.append("architecture")
    if tl_problem.is_problem(data):
        found.append("problem")
    if tl_mapping.is_mapping(data):
        found.append("mapping")
    if tl_ert.is_ert(data):
        found.append("ert")
    if any(k in data for k in CONSTRAINT_KEYS):
        found.append("constraints")
    if isinstance(data.get("mapper"), dict):
        found.append("mapper")
    return found


def read_parts(paths, parts: Parts | None = None) -> Parts:
    parts = parts or Parts()
    for path in paths:
        path = Path(path)
        data = read_timeloop_yaml(path)
        where = Where(str(path))
        keys = timeloop_keys(data)
        if not keys:
            raise where.error("not a Timeloop file: expected a top-level `architecture`, `problem`, "
                              "`mapping` (with `target`s), `architecture_constraints`, `mapper` or `ERT`")
        for key in data:
            if key in ("architecture", "problem", "mapping", "ERT", "ERT_summary", "mapper") + CONSTRAINT_KEYS:
                continue
            if key == "sparse_optimizations" and data[key]:
                raise (where / key).error("unsupported: sparse optimizations are not modelled")
            if key not in IGNORED_KEYS:
                raise (where / key).error("unsupported top-level key in a Timeloop file (read: "
                                          "architecture, problem, mapping, architecture_constraints, mapper, ERT)")
        if "architecture" in keys:
            _once(parts, "architecture", (data["architecture"], where), where)
            parts.arch_path = path
        if "problem" in keys:
            _once(parts, "problem", (data["problem"], where / "problem"), where)
            parts.problem_path = path
        if "mapping" in keys:
            _once(parts, "mapping", (data["mapping"], where), where)
        if "ert" in keys:
            _once(parts, "ert", (data, where), where)
        if "mapper" in keys:
            _once(parts, "mapper", (data["mapper"], where / "mapper"), where)
        for key in CONSTRAINT_KEYS:
            if key in data:
                parts.constraints.append((data[key], where / key))
    return parts


def _once(parts: Parts, name: str, value, where: Where):
    if getattr(parts, name) is not None:
        raise where.error(f"a second Timeloop {name} (the first came from {getattr(parts, name)[1].file})")
    setattr(parts, name, value)


def find_ert_beside(arch_path: Path) -> Path | None:
    """An ERT next to the architecture file (ERT.yaml / *ERT.yaml, else the summary)."""
    folder = arch_path.parent
    for pattern in ("ERT.yaml", "*ERT.yaml", "ERT_summary.yaml", "*ERT_summary.yaml"):
        found = sorted(folder.glob(pattern))
        if found:
            return found[0]
    return None


def constraint_targets(parts: Parts) -> list[dict]:
    out = []
    for body, where in parts.constraints:
        targets = body.get("targets") if isinstance(body, dict) else body
        if not isinstance(targets, list):
            raise (where / "targets").error("expected a list of constraints {target, type, ...}")
        for i, t in enumerate(targets):
            if not isinstance(t, dict) or "target" not in t or "type" not in t:
                raise (where / "targets" / i).error("expected {target: LEVEL, type: KIND, ...}")
            out.append({**t, "_where": where / "targets" / i})
    return out


def design_name(path: Path | None, fallback: str) -> str:
    if path is None:
        return fallback
    stem = path.stem
    if stem in GENERIC_STEMS or stem.startswith(("timeloop-", "parsed-")):
        return f"{path.resolve().parent.name}"
    return stem


@dataclass
class Imported:
    """Everything translated: this project's YAML dicts, the validated specs, the notes."""

    arch_dict: dict | None
    workload_dict: dict | None
    mapping_dict: dict | None
    arch_ctx: tl_arch.ArchImport | None
    arch: object = None
    workload: object = None
    mapping: object = None
    notes: list[str] = field(default_factory=list)
    objective: str | None = None        # from Timeloop's mapper `optimization-metrics`


# arch YAML `model:` keys and values of Timeloop's rules, and the Arch fields they set
TIMELOOP_RULES = MappingProxyType({"multicast": "per_fanout", "leakage": "utilized", "cycles": "timeloop"})
MODEL_FIELDS = MappingProxyType({"multicast": "multicast", "leakage": "leakage", "cycles": "cycle_rule"})


def with_timeloop_rules(arch):
    """`arch` counting with Timeloop's rules where they differ from this project's."""
    return dataclasses.replace(arch, **{MODEL_FIELDS[k]: v for k, v in TIMELOOP_RULES.items()})


def build(parts: Parts, arch=None, workload=None, check_mapping: bool = True,
          timeloop_rules: bool = False) -> Imported:
    """Translate the parts found; `arch` / `workload` are this project's, when not from Timeloop.
    `timeloop_rules`: count with Timeloop's rules where they differ (arch `model:`)."""
    from ..load import arch_from_dict, mapping_from_checked_dict, workload_from_dict
    notes = parts.notes
    ert = None
    if parts.ert is None and parts.arch_path is not None:
        beside = find_ert_beside(parts.arch_path)
        if beside is not None:
            read_parts([beside], parts)
            notes.append(f"energies from {beside} (found beside the architecture)")
    if parts.ert is not None:
        ert = tl_ert.read_ert(parts.ert[0], parts.ert[1], notes)
    word_bits = None
    ctx = None
    arch_dict = workload_dict = mapping_dict = None
    tensors = None
    if parts.problem is not None:
        problem_raw, pw = parts.problem
        # word size comes from the architecture; read it before translating the problem
        if parts.architecture is not None:
            comps, _ = tl_arch.flatten(parts.architecture[0], parts.architecture[1])
            if comps:
                word_bits = tl_arch._word_bits(comps[0].attributes, comps[0].where, None)
        if word_bits is None:
            word_bits = 8
            notes.append(f"{pw.file}: Timeloop problems have no element type; words taken as 8 bits")
        workload_dict = tl_problem.translate(problem_raw, pw, word_bits, notes,
                                             design_name(parts.problem_path, "timeloop-problem"))
        workload = workload_from_dict(workload_dict, Where(pw.file))
    if workload is None:
        raise SpecError("timeloop import", "", "no problem given (a Timeloop problem file or a workload)")
    tensors = [t.name for t in workload.tensors]
    if parts.architecture is not None:
        raw, aw = parts.architecture
        ctx = tl_arch.translate(raw, aw, ert, tensors, constraint_targets(parts), notes,
                                design_name(parts.arch_path, "timeloop-arch"))
        if parts.ert is not None:
            tl_ert.check_matches(parts.ert[0], parts.ert[1], ctx.components)
        arch_dict = ctx.data
        if timeloop_rules:
            arch_dict["model"] = {**arch_dict.get("model", {}), **TIMELOOP_RULES}
        arch = arch_from_dict(arch_dict, Where(aw.file))
    elif arch is not None and timeloop_rules:
        arch = with_timeloop_rules(arch)
    if arch is None:
        raise SpecError("timeloop import", "", "no architecture given")
    mapping = None
    if parts.mapping is not None:
        entries, mw = parts.mapping
        mapping_dict = tl_mapping.translate(entries, mw, arch, workload, ctx, notes)
        if check_mapping:
            mapping = mapping_from_checked_dict(mapping_dict, arch, workload, mw)
    objective = None if parts.mapper is None else mapper_objective(*parts.mapper, notes)
    return Imported(arch_dict, workload_dict, mapping_dict, ctx, arch, workload, mapping, notes, objective)


# Timeloop mapper `optimization-metrics` (a priority list) -> this tool's objective
METRICS = MappingProxyType({("delay", "energy"): "delay,energy", ("edp",): "edp", ("energy",): "energy",
                            ("delay",): "cycles"})


def mapper_objective(body, where: Where, notes: list[str]) -> str | None:
    """The objective Timeloop's mapper settings ask for; the search settings (algorithm,
    timeout, threads, ...) are this tool's own and are noted as not read."""
    # every spelling Timeloop's files use (exercise 05's mapper file: `optimization_metric`):
    # one not recognised would be noted as not read while the user believes it was honoured
    spellings = [k for k in ("optimization-metrics", "optimization_metrics", "optimization-metric",
                             "optimization_metric") if k in body]
    if len(spellings) > 1:
        raise (where / spellings[1]).error(f"given twice (also as {spellings[0]}): keep one")
    key = spellings[0] if spellings else None
    others = sorted(str(k) for k in body if k != key)
    if others:
        notes.append(f"{where.file}: mapper settings not read (this tool's search has its own): "
                     + ", ".join(others))
    if key is None:
        return None
    metrics = body[key]
    metrics = tuple(metrics) if isinstance(metrics, list) else (metrics,)
    objective = METRICS.get(tuple(str(m) for m in metrics))
    if objective is None:
        raise (where / key).error(f"unsupported metrics {list(metrics)}: this tool minimises "
                                  "[delay, energy] (lexicographic), [edp], [energy] or [delay]")
    notes.append(f"{where.file}: objective {objective} from Timeloop's optimization-metrics "
                 "(an explicit --objective wins)")
    return objective

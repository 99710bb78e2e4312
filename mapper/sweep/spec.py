"""The sweep file (and the flags that stand in for one): what to search, over what.

```yaml
name: gemm-grid                  # optional
archs: [h100, a100]              # presets or files, or a grid of one:
                                 #   {base: tpu-v4i, vary: {GlobalBuffer.capacity: "8MiB..256MiB:x2"}}
mapspaces: [default]             # optional, presets or files
strategies: [greedy, joint]
objectives: [edp]                # optional
time_limit: 120                  # seconds per point at most (optional; a proven point ends sooner)
workloads:
  - workload: gemm-4096          # a preset or a file
  - einsum: "Z[m,n] += A[m,k] * B[k,n]"        # a template over a grid of sizes
    sizes: {m: "512..8192:x2", n: 4096, k: [1024, 4096]}
    dtype: bf16
    dtypes: {Z: fp32}
  - model: llama-7b              # the layers of a model preset
    phase: prefill
    seq: 2048                    # the model's inputs: a value, a list or a range
fuse: false                      # optional: also each model's chains, fused and unfused (`--fuse`)
```

Validated like every other spec: an error names the file and the key path. Files named in a
sweep file are looked for beside it first.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .. import validate
from ..constraints import Constraints
from ..flags import MAX_FLAG
from ..errors import shown
from ..load import (arch_from_dict, fields, load_arch, load_constraints, opgraph_from_dict, read_yaml, text,
                    workload_from_dict)
from ..load.files import spec_data
from ..model_import.cache import importable, imported_model
from ..search import STRATEGIES
from ..spec import Arch, Workload
from ..units import Where
from .arch_grid import Vary, derived_archs, vary_entry
from .grid import combinations, parse_dim_grid, size_values
from .chains import ChainGroup
from .models import expand, load_model, with_dtype

# Seconds per point at most: a point ends once it is proven, so only a point out of a proof's
# reach costs all of it; enough to prove every layer of the bundled models (docs/RESULTS.md).
DEFAULT_TIME_LIMIT = 120.0
GEMM_EINSUM = "Z[m,n] += A[m,k] * B[k,n]"


@dataclass(frozen=True)
class Settings:
    """Search settings shared by the sweep's points (each strategy hashes the ones it uses)."""
    time_limit: float = DEFAULT_TIME_LIMIT
    seed: int = 0
    samples: int = 200_000
    cpsat_seconds: float = 2.0
    max_evaluations: int = 0     # an evaluation budget per point (0: none): deterministic results

    def used_by(self, strategy: str) -> dict:
        """The settings `strategy` takes: `time_limit` (its context's), an evaluation budget
        when set (only then: the points of stores made before keep their keys) and its own
        options."""
        used = {"time_limit": self.time_limit}
        if self.max_evaluations:
            used.update(max_evaluations=self.max_evaluations)
        if strategy == "random":
            used.update(seed=self.seed, samples=self.samples)
        if strategy == "joint":
            used.update(cpsat_seconds=self.cpsat_seconds)
            if self.seed:       # only when set: the points of stores made before keep their keys
                used.update(seed=self.seed)
        return used


@dataclass(frozen=True)
class LayerOf:
    """Where a workload came from when it is a group of a model's layers."""
    model: str
    phase: str
    inputs: tuple[tuple[str, int], ...]
    label: str                   # the expansion: model, phase and inputs
    layers: tuple[str, ...]
    count: int
    position: int                # dataflow order within the expansion
    groups: int = 0              # layer groups of the expansion: a model total is whole with all of them


@dataclass(frozen=True)
class Subject:
    workload: Workload
    layer: LayerOf | None = None


@dataclass(frozen=True)
class ChainSubject:
    """An op graph studied by fusion: a model chain of one expansion (`--fuse`), counted
    `layer.count` times, or an op-graph workload (`layer` None)."""
    chain: ChainGroup
    layer: LayerOf | None = None


@dataclass(frozen=True)
class SweepSpec:
    name: str
    archs: tuple[Arch, ...]
    mapspaces: tuple[Constraints, ...]
    strategies: tuple[str, ...]
    objectives: tuple[str, ...]
    subjects: tuple[Subject, ...]
    settings: Settings = field(default_factory=Settings)
    warm_start: bool = True
    chains: tuple[ChainSubject, ...] = ()         # `fuse: true`: every model entry's chains


def _names(raw, where: Where, default=None) -> list:
    if raw is None and default is not None:
        return list(default)
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not raw or not all(isinstance(v, str) for v in raw):
        raise where.error(f"expected a name or a non-empty list of names, got {raw!r}")
    return raw


def _beside(base: Path | None, name: str) -> str:
    """A file named relative to the sweep file, when it exists there."""
    try:
        if base is not None and (base / name).is_file():
            return str(base / name)
    except (OSError, ValueError):       # a name too long for the file system: `resolve` says so
        pass
    return name


def _number(raw, where: Where, what: str, integer: bool = False):
    """A setting: the bounds of its command-line flag (`flags`), under the one number rule."""
    if integer:
        return validate.integer(raw, where, what, low=0, high=MAX_FLAG)
    return validate.finite_number(raw, where, what, low=0.0, high=MAX_FLAG)


def _strategies(raw, where: Where) -> tuple[str, ...]:
    names = _names(raw, where)
    for i, name in enumerate(names):
        if name not in STRATEGIES:
            raise (where / i).error(f"expected one of {', '.join(STRATEGIES)}, got {name!r}")
    return tuple(dict.fromkeys(names))


def objectives(raw, archs, where: Where) -> tuple[str, ...]:
    """Objective names, each checked against every architecture (bytes:LEVEL needs the level)."""
    from ..errors import SpecError
    from ..search import parse_objective
    names = _names(raw, where, ["edp"])
    for i, name in enumerate(names):
        for arch in archs:
            try:
                parse_objective(name, arch)
            except SpecError as exc:
                raise (where / i).error(f"{exc.expected} (architecture {arch.name})") from None
    return tuple(dict.fromkeys(names))


def load_sweep(path_str: str) -> SweepSpec:
    path = Path(path_str)
    if not path.is_file():
        from ..errors import SpecError
        raise SpecError(path_str, "", "no such sweep file")
    return sweep_from_dict(read_yaml(path), Where(str(path)), path.parent)


def sweep_from_dict(data, where: Where, base: Path | None = None) -> SweepSpec:
    fields(data, where, ("archs", "workloads"), ("name", "description", "mapspaces", "strategies",
                                                 "objectives", "time_limit", "seed", "samples",
                                                 "cpsat_seconds", "warm_start", "fuse", "max_evaluations"))
    archs = arch_entries(data["archs"], where / "archs", base)
    mapspaces = tuple(_load(load_constraints, _beside(base, n), where / "mapspaces" / i)
                      for i, n in enumerate(_names(data.get("mapspaces"), where / "mapspaces", ["default"])))
    settings = Settings(
        time_limit=float(_number(data.get("time_limit", DEFAULT_TIME_LIMIT), where / "time_limit", "seconds >= 0")),
        seed=_number(data.get("seed", 0), where / "seed", "a non-negative integer", integer=True),
        samples=_number(data.get("samples", 200_000), where / "samples", "a non-negative integer", integer=True),
        cpsat_seconds=float(_number(data.get("cpsat_seconds", 2.0), where / "cpsat_seconds", "seconds >= 0")),
        max_evaluations=_number(data.get("max_evaluations", 0), where / "max_evaluations",
                                "a non-negative integer (0: no budget)", integer=True))
    warm = data.get("warm_start", True)
    if not isinstance(warm, bool):
        raise (where / "warm_start").error(f"expected true or false, got {warm!r}")
    raw = data["workloads"]
    if not isinstance(raw, list) or not raw:
        raise (where / "workloads").error("expected a non-empty list of workload entries")
    found = [s for i, entry in enumerate(raw) for s in workload_entry(entry, where / "workloads" / i, base)]
    subjects = [s for s in found if isinstance(s, Subject)]
    chains = [s for s in found if isinstance(s, ChainSubject)]          # op-graph workloads
    fuse = data.get("fuse", False)
    if not isinstance(fuse, bool):
        raise (where / "fuse").error(f"expected true or false, got {fuse!r}")
    if fuse:
        of_models = [c for i, entry in enumerate(raw) if "model" in entry
                     for c in model_chains(entry, where / "workloads" / i, base)]
        if not of_models:
            raise (where / "fuse").error("no model entry with chains to fuse (`fuse` applies to `model:` entries)")
        chains += of_models
    return SweepSpec(name=text(data.get("name", Path(where.file).stem), where / "name"),
                     archs=archs, mapspaces=mapspaces,
                     strategies=_strategies(data.get("strategies", ["greedy", "joint"]), where / "strategies"),
                     objectives=objectives(data.get("objectives"), archs, where / "objectives"),
                     subjects=tuple(subjects), settings=settings, warm_start=warm, chains=tuple(chains))


def arch_entries(raw, where: Where, base: Path | None = None) -> tuple[Arch, ...]:
    """`archs:`: presets or files, and `{base: NAME, vary: {PATH: VALUES}}` grids (`arch_grid`)."""
    entries = [raw] if isinstance(raw, (str, dict)) else raw
    if not isinstance(entries, list) or not entries:
        raise where.error("expected a name, {base: NAME, vary: {LEVEL.FIELD: VALUES}} or a non-empty list of them")
    out = []
    for i, entry in enumerate(entries):
        if isinstance(entry, dict):
            fields(entry, where / i, ("base", "vary"))
            name = _beside(base, text(entry["base"], where / i / "base"))
            out += varied_archs(name, vary_entry(entry["vary"], where / i / "vary"), where / i / "base",
                                where / i / "vary")
        elif isinstance(entry, str):
            out.append(_load(load_arch, _beside(base, entry), where / i))
        else:
            raise (where / i).error(f"expected a name or {{base: NAME, vary: {{...}}}}, got {shown(entry)}")
    return tuple(out)


def varied_archs(name: str, varies: tuple[Vary, ...], base_where: Where, where: Where) -> tuple[Arch, ...]:
    """The architectures `varies` derive from the preset or file `name` (itself loaded as a file
    is, its errors said at `base_where`); `where`: the flag or key of the whole grid."""
    def arch_and_data(spec):
        data, shown_name = spec_data("archs", spec)
        return arch_from_dict(data, Where(shown_name)), data
    arch, data = _load(arch_and_data, name, base_where)
    return derived_archs(data, arch, varies, where)


def _load(loader, name: str, where: Where):
    """A preset or file; its own errors already name it, a missing one is reported at `where`."""
    from ..errors import SpecError
    try:
        return loader(name)
    except SpecError as exc:
        given = _is_file(name)
        if exc.where == name and not exc.path and not given:      # no such file or preset
            raise where.error(f"{name!r}: {exc.expected}") from None
        if exc.where != name and not given:
            # a bundled preset is valid alone: what is wrong is its use here (an op graph where
            # one einsum goes), said at the key that names it
            raise where.error(f"preset {name!r}: {exc.expected}") from None
        raise


def _is_file(name: str) -> bool:
    try:
        return Path(name).is_file()
    except (OSError, ValueError):       # a name too long for the file system
        return False


def workload_entry(entry, where: Where, base: Path | None = None) -> list:
    """One item of `workloads:` -> its subjects (one workload, a grid, or a model's groups), or
    for an op graph (a preset or file with `ops:`) its ChainSubject, a fusion study."""
    if not isinstance(entry, dict):
        raise where.error("expected a mapping with `workload`, `einsum` or `model`")
    if "workload" in entry:
        fields(entry, where, ("workload",))
        return [_load(workload_or_graph, _beside(base, text(entry["workload"], where / "workload")),
                      where / "workload")]
    if "einsum" in entry:
        fields(entry, where, ("einsum", "sizes"), ("name", "dtype", "dtypes", "description", "source"))
        sizes = entry["sizes"]
        if not isinstance(sizes, dict) or not sizes:
            raise (where / "sizes").error("expected a mapping of dim -> size, list or range")
        grid = {text(dim, where / "sizes"): size_values(v, where / "sizes" / dim) for dim, v in sizes.items()}
        return template_subjects(entry, grid, where)
    if "model" in entry:
        return model_subjects(entry, where, base)
    raise where.error("expected one of the keys `workload` (a preset or file), `einsum` (a template "
                      "with sizes) or `model` (a model preset)")


def workload_or_graph(name: str) -> Subject | ChainSubject:
    """A workload preset or file: one einsum (a point per strategy), or an op graph (`ops:`),
    studied by fusion as a model chain is under `--fuse`."""
    data, shown_name = spec_data("workloads", name)
    if isinstance(data, dict) and "ops" in data and "einsum" not in data:
        graph = opgraph_from_dict(data, Where(shown_name))
        return ChainSubject(ChainGroup(graph.name, graph, (), 1))
    return Subject(workload_from_dict(data, Where(shown_name)))


def template_subjects(entry: dict, grid: dict[str, tuple[int, ...]], where: Where) -> list[Subject]:
    prefix = text(entry.get("name", "einsum"), where / "name")
    out = []
    for combo in combinations(grid):
        spec = {k: v for k, v in entry.items() if k in ("einsum", "dtype", "dtypes", "description", "source")}
        spec.update(name=prefix + "-" + "-".join(f"{d}{v}" for d, v in combo.items()), sizes=combo)
        out.append(Subject(workload_from_dict(spec, where)))
    return out


def _expansions(entry: dict, where: Where, base: Path | None = None):
    """A model entry's expansions (each phase at each combination of its inputs' values)."""
    if not isinstance(entry.get("model"), str):
        raise (where / "model").error("expected the name of a model preset or a file")
    name = _beside(base, entry["model"])
    model = _imported(name, entry, where) if importable(name) else _load(load_model, name, where / "model")
    fields(entry, where, ("model",), ("phase", "dtype") + tuple(k for k, _ in model.inputs))
    if entry.get("dtype") is not None:
        model = with_dtype(model, entry["dtype"], where / "dtype")
    phases = _names(entry.get("phase"), where / "phase", model.phase_names[:1])
    grid = {k: size_values(entry[k], where / k) for k, _ in model.inputs if k in entry}
    return [(model, expand(model, phase, combo, where)) for phase in phases for combo in combinations(grid)]


def _imported(name: str, entry: dict, where: Where):
    """An ONNX file, torch.export program or Hugging Face configuration, imported on the fly
    (`model_import`), its symbols bound to the entry's first sequence length and batch."""
    values = {k: size_values(entry[k], where / k)[0] for k in ("seq", "batch") if k in entry}
    return imported_model(name, values.get("seq"), values.get("batch"))


def model_subjects(entry: dict, where: Where, base: Path | None = None) -> list[Subject]:
    out = []
    for model, expansion in _expansions(entry, where, base):
        for position, group in enumerate(expansion.groups):
            out.append(Subject(group.workload, LayerOf(
                model.name, expansion.phase, expansion.inputs, expansion.label, group.layers, group.count, position,
                len(expansion.groups))))
    return out


def model_chains(entry: dict, where: Where, base: Path | None = None) -> list[ChainSubject]:
    """The chains of a model entry's expansions (`--fuse`); a model without chains has none."""
    out = []
    for model, expansion in _expansions(entry, where, base):
        for position, chain in enumerate(expansion.chains):
            out.append(ChainSubject(chain, LayerOf(model.name, expansion.phase, expansion.inputs, expansion.label,
                                                   chain.layers, chain.count, position, len(expansion.groups))))
    return out


def gemm_subjects(text_grid: str) -> list[Subject]:
    """`--gemm "m=512..8192:x2 n=4096 k=1024,4096"`: bf16 operands, fp32 output."""
    where = Where("--gemm")
    grid = parse_dim_grid(text_grid, where)
    unknown = [d for d in grid if d not in ("m", "n", "k")]
    if unknown:
        raise where.error(f"dim {unknown[0]!r}: a GEMM has dims m, n and k")
    missing = [d for d in ("m", "n", "k") if d not in grid]
    if missing:
        raise where.error(f"give values for every dim of the GEMM (missing: {', '.join(missing)})")
    entry = {"einsum": GEMM_EINSUM, "name": "gemm", "dtype": "bf16", "dtypes": {"Z": "fp32"}}
    return template_subjects(entry, {d: grid[d] for d in ("m", "n", "k")}, where)

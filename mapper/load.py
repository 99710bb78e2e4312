"""The only module that reads YAML: files or preset names -> validated spec objects.

Every check names the file and the key path (`levels[2].capacity`) and says what was expected,
so a user can fix the input without reading code.
"""
from __future__ import annotations

import math
from pathlib import Path

import yaml

from .einsum import parse_einsum
from .errors import SpecError
from .spec import Arch, Compute, GpuFacts, Level, Tensor, Workload
from .units import (Where, parse_bandwidth, parse_bytes, parse_dtype_bits, parse_energy,
                    parse_frequency)

PRESET_KINDS = ("archs", "workloads", "mapspace", "mappings", "models")


def preset_dirs(kind: str) -> list[Path]:
    """Where presets of a kind live: the checkout's top-level folder, or the installed copy."""
    here = Path(__file__).resolve().parent
    return [d for d in (here.parent / kind, here / "presets" / kind) if d.is_dir()]


def preset_names(kind: str) -> list[str]:
    return sorted({p.stem for d in preset_dirs(kind) for p in d.glob("*.yaml")})


def resolve(kind: str, name_or_path: str | Path) -> Path:
    """A path to an existing file, or the name of a bundled preset of this kind."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    for directory in preset_dirs(kind):
        candidate = directory / f"{name_or_path}.yaml"
        if candidate.is_file():
            return candidate
    known = ", ".join(preset_names(kind)) or "none"
    raise SpecError(str(name_or_path), "", f"no such file, and no {kind[:-1]} preset of that name "
                    f"(presets: {known})")


def read_yaml(path: Path):
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError(str(path), "", f"cannot read file ({exc.strerror})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}" if mark else ""
        raise SpecError(str(path), line, f"invalid YAML ({getattr(exc, 'problem', exc)})") from None


def fields(data, where: Where, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
    """Check that `data` is a mapping with all `required` keys and nothing unknown."""
    if not isinstance(data, dict):
        raise where.error(f"expected a mapping with keys {', '.join(required + optional)}, "
                          f"got {type(data).__name__}")
    unknown = [k for k in data if k not in required + optional]
    if unknown:
        raise (where / unknown[0]).error(
            f"unknown key; expected one of {', '.join(required + optional)}")
    missing = [k for k in required if k not in data]
    if missing:
        raise (where / missing[0]).error("required key is missing")
    return data


def positive_int(value, where: Where, what: str = "a positive integer") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise where.error(f"expected {what}, got {value!r}")
    return value


def text(value, where: Where) -> str:
    if not isinstance(value, str):
        raise where.error(f"expected a string, got {value!r}")
    return value


def name_list(value, where: Where) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise where.error(f"expected a list of names, got {value!r}")
    return value


# ----------------------------------------------------------------------------- workloads

def load_workload(name_or_path) -> Workload:
    path = resolve("workloads", name_or_path)
    return workload_from_dict(read_yaml(path), Where(str(path)))


def workload_from_dict(data, where: Where) -> Workload:
    fields(data, where, ("name", "einsum", "sizes"), ("description", "source", "dtype", "dtypes"))
    parsed = parse_einsum(data["einsum"], where / "einsum")
    sizes_raw = data["sizes"]
    if not isinstance(sizes_raw, dict) or not sizes_raw:
        raise (where / "sizes").error("expected a mapping of dim -> positive integer size")
    dims = tuple(sizes_raw)
    sizes = tuple(positive_int(sizes_raw[d], where / "sizes" / d, "a positive integer size")
                  for d in dims)
    used = {d for _, axes, _ in parsed for axis in axes for d in axis}
    for d in sorted(used - set(dims)):
        raise (where / "einsum").error(f"dim {d!r} has no size in `sizes` (sizes: {', '.join(dims)})")
    for d in dims:
        if d not in used:
            raise (where / "sizes" / d).error("dim is not used by the einsum")
    n_outputs = sum(is_out for _, _, is_out in parsed)
    default = data.get("dtype")
    per_tensor = data.get("dtypes") or {}
    if not isinstance(per_tensor, dict):
        raise (where / "dtypes").error("expected a mapping of tensor -> dtype")
    names = [name for name, _, _ in parsed]
    for name in per_tensor:
        if name not in names:
            raise (where / "dtypes" / name).error(f"no tensor of that name (tensors: {', '.join(names)})")
    tensors = []
    for name, axes, is_output in parsed:
        raw = per_tensor.get(name, default)
        if raw is None:
            raise (where / "dtypes").error(f"tensor {name} has no dtype (give `dtype` or `dtypes.{name}`)")
        key = where / "dtypes" / name if name in per_tensor else where / "dtype"
        bits = parse_dtype_bits(raw, key)
        exprs = tuple(tuple((dims.index(d), c) for d, c in axis.items()) for axis in axes)
        tensors.append(Tensor(name, exprs, is_output, bits))
    assert n_outputs == 1
    return Workload(name=text(data["name"], where / "name"), einsum=data["einsum"], dims=dims,
                    sizes=sizes, tensors=tuple(tensors),
                    description=text(data.get("description", ""), where / "description"),
                    source=text(data.get("source", ""), where / "source"))


# ----------------------------------------------------------------------------- architectures

def load_arch(name_or_path) -> Arch:
    path = resolve("archs", name_or_path)
    return arch_from_dict(read_yaml(path), Where(str(path)))


def _mesh(data, where: Where) -> tuple[int, int]:
    instances = positive_int(data.get("instances", 1), where / "instances")
    if "mesh" not in data:
        return instances, 1
    mesh = data["mesh"]
    if (not isinstance(mesh, list) or len(mesh) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in mesh)):
        raise (where / "mesh").error(f"expected [x, y] with positive integers, got {mesh!r}")
    if "instances" in data and mesh[0] * mesh[1] != instances:
        raise (where / "mesh").error(f"mesh {mesh[0]} x {mesh[1]} does not equal instances {instances}")
    return mesh[0], mesh[1]


def _energies(data, where: Where) -> tuple[float, float, float]:
    if data is None:
        return 0.0, 0.0, 0.0
    fields(data, where, (), ("read", "write", "update"))
    return tuple(parse_energy(data.get(k, 0), where / k) for k in ("read", "write", "update"))


LEVEL_KEYS = ("name", "capacity", "bandwidth", "block_size", "energy", "energy_per_byte", "leak",
              "keeps", "max_stages", "instances", "mesh", "multicast", "spatial_reduction", "description")


def _level(data, where: Where, clock_hz: float) -> Level:
    fields(data, where, ("name",), LEVEL_KEYS[1:])
    e_read, e_write, e_update = _energies(data.get("energy"), where / "energy")
    b_read, b_write, b_update = _energies(data.get("energy_per_byte"), where / "energy_per_byte")
    keeps = data.get("keeps")
    return Level(
        name=text(data["name"], where / "name"),
        capacity=parse_bytes(data.get("capacity", "unlimited"), where / "capacity"),
        bandwidth=parse_bandwidth(data.get("bandwidth", "unlimited"), where / "bandwidth", clock_hz),
        block_size=positive_int(data.get("block_size", 1), where / "block_size"),
        energy_read=e_read, energy_write=e_write, energy_update=e_update,
        byte_energy_read=b_read, byte_energy_write=b_write, byte_energy_update=b_update,
        leak=parse_energy(data.get("leak", 0), where / "leak"),
        keeps=None if keeps is None else frozenset(name_list(keeps, where / "keeps")),
        max_stages=positive_int(data.get("max_stages", 1), where / "max_stages"),
        mesh=_mesh(data, where),
        multicast=_flag(data, "multicast", where),
        reduction=_flag(data, "spatial_reduction", where),
    )


def _flag(data, key: str, where: Where) -> bool:
    value = data.get(key, True)
    if not isinstance(value, bool):
        raise (where / key).error(f"expected true or false, got {value!r}")
    return value


def arch_from_dict(data, where: Where) -> Arch:
    fields(data, where, ("name", "clock", "levels", "compute"), ("description", "gpu"))
    clock = parse_frequency(data["clock"], where / "clock")
    raw_levels = data["levels"]
    if not isinstance(raw_levels, list) or not raw_levels:
        raise (where / "levels").error("expected a non-empty list of levels, outermost first")
    levels = tuple(_level(lv, where / "levels" / i, clock) for i, lv in enumerate(raw_levels))
    names = [lv.name for lv in levels]
    for i, name in enumerate(names):
        if names.index(name) != i:
            raise (where / "levels" / i / "name").error(f"level name {name!r} is used twice")
    if levels[0].keeps is not None:
        raise (where / "levels" / 0 / "keeps").error("the outermost level must keep every tensor; "
                                                     "omit `keeps` there")
    comp = data["compute"]
    cw = where / "compute"
    fields(comp, cw, (), ("name", "instances", "mesh", "macs_per_cycle", "energy", "native_shape",
                          "description"))
    if "instances" not in comp and "mesh" not in comp:
        comp = {**comp, "mesh": list(levels[-1].mesh)}
    native = comp.get("native_shape") or {}
    if not isinstance(native, dict):
        raise (cw / "native_shape").error("expected a mapping of dim -> size, e.g. {m: 16, n: 8, k: 16}")
    compute = Compute(
        name=text(comp.get("name", "MAC"), cw / "name"),
        mesh=_mesh(comp, cw),
        macs_per_cycle=positive_int(comp.get("macs_per_cycle", 1), cw / "macs_per_cycle"),
        energy_per_mac=parse_energy(comp.get("energy", 0), cw / "energy"),
        native_shape=tuple((text(k, cw / "native_shape"), positive_int(v, cw / "native_shape" / k))
                           for k, v in native.items()),
    )
    meshes = [lv.mesh for lv in levels] + [compute.mesh]
    for i in range(len(meshes) - 1):
        (ax, ay), (bx, by) = meshes[i], meshes[i + 1]
        if bx % ax or by % ay:
            key = where / "levels" / (i + 1) if i + 1 < len(levels) else cw
            raise (key / "mesh").error(f"mesh {bx} x {by} is not a multiple of the mesh above it "
                                       f"({ax} x {ay}): each instance above must fan out to a "
                                       "whole number of instances below")
    gpu = None
    if data.get("gpu") is not None:
        gw = where / "gpu"
        g = fields(data["gpu"], gw, ("sms", "smem_per_sm", "registers_per_sm"),
                   ("max_blocks_per_sm", "max_threads_per_sm"))
        gpu = GpuFacts(sms=positive_int(g["sms"], gw / "sms"),
                       smem_per_sm=parse_bytes(g["smem_per_sm"], gw / "smem_per_sm", False),
                       registers_per_sm=positive_int(g["registers_per_sm"], gw / "registers_per_sm"),
                       max_blocks_per_sm=positive_int(g.get("max_blocks_per_sm", 32), gw / "max_blocks_per_sm"),
                       max_threads_per_sm=positive_int(g.get("max_threads_per_sm", 2048), gw / "max_threads_per_sm"))
    return Arch(name=text(data["name"], where / "name"), clock_hz=clock, levels=levels,
                compute=compute, gpu=gpu,
                description=text(data.get("description", ""), where / "description"))



# ----------------------------------------------------------------------------- mappings

def load_mapping(name_or_path, arch: Arch, workload: Workload):
    """Read a mapping file and check it against the arch and workload, capacity included."""
    path = resolve("mappings", name_or_path)
    return mapping_from_checked_dict(read_yaml(path), arch, workload, Where(str(path)))


def mapping_from_checked_dict(data, arch: Arch, workload: Workload, where: Where):
    from .cost import footprint_bytes
    from .mapping import mapping_from_dict, to_table

    mapping = mapping_from_dict(data, arch, workload, where)
    table = to_table([mapping], len(workload.dims), len(workload.tensors))
    used = footprint_bytes(arch, workload, table)[0]
    for lv, level in enumerate(arch.levels):
        if used[lv] > level.capacity:
            kept = [workload.tensors[t].name for t in sorted(mapping.levels[lv].keep)]
            raise (where / level.name).error(
                f"the kept tiles ({', '.join(kept)}) x {mapping.levels[lv].stages} stage(s) take "
                f"{used[lv]:.0f} B, above the level's capacity of {level.capacity:.0f} B")
    return mapping


# ----------------------------------------------------------------------------- mapspace constraints

def load_constraints(name_or_path=None):
    """A mapspace preset (or file); None gives the default constraints."""
    from .constraints import Constraints
    if name_or_path is None:
        return Constraints()
    path = resolve("mapspace", name_or_path)
    return constraints_from_dict(read_yaml(path), Where(str(path)))


def _range(value, where: Where):
    from .constraints import Range
    if isinstance(value, int) and not isinstance(value, bool):
        positive_int(value, where)
        return Range(value, value)
    fields(value, where, (), ("min", "max", "multiple_of"))
    low = positive_int(value.get("min", 1), where / "min")
    high = value.get("max")
    if high is not None and positive_int(high, where / "max") < low:
        raise (where / "max").error(f"max {high} is below min {low}")
    return Range(low, high, positive_int(value.get("multiple_of", 1), where / "multiple_of"))


def _ranges(value, where: Where):
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise where.error("expected a mapping of dim -> value or {min, max, multiple_of}")
    return tuple((text(k, where), _range(v, where / k)) for k, v in value.items())


def constraints_from_dict(data, where: Where):
    from .constraints import ROLES, Constraints, LevelConstraints
    fields(data, where, ("name",), ("description", "factors", "max_padding", "align_to_native",
                                    "min_utilization", "min_occupancy", "levels"))
    factors = data.get("factors", "perfect")
    if factors not in ("perfect", "imperfect"):
        raise (where / "factors").error(f"expected 'perfect' or 'imperfect', got {factors!r}")
    levels = []
    raw_levels = data.get("levels") or {}
    if not isinstance(raw_levels, dict):
        raise (where / "levels").error("expected a mapping of level name (or innermost/outermost) -> constraints")
    for key, lv in raw_levels.items():
        w = where / "levels" / key
        fields(lv, w, (), ("temporal", "spatial", "tile", "order", "stationary", "forbid", "stages",
                           "keep", "bypass"))
        forbid = lv.get("forbid") or []
        if not isinstance(forbid, list):
            raise (w / "forbid").error("expected a list of loop orders, each a list of dims, outermost first")
        stationary = lv.get("stationary")
        if stationary is not None and not isinstance(stationary, str):
            raise (w / "stationary").error(f"expected one of {', '.join(ROLES)} or a tensor name")
        stages = lv.get("stages")
        if stages is not None:
            if isinstance(stages, int):
                stages = [stages]
            if not isinstance(stages, list) or not stages:
                raise (w / "stages").error("expected a stage count or a list of them")
            stages = tuple(positive_int(s, w / "stages") for s in stages)
        bypass = lv.get("bypass", False)
        if not isinstance(bypass, bool):
            raise (w / "bypass").error("expected true (enumerate keep/bypass choices) or false")
        levels.append((text(key, where / "levels"), LevelConstraints(
            temporal=_ranges(lv.get("temporal"), w / "temporal"),
            spatial=_ranges(lv.get("spatial"), w / "spatial"),
            tile=_ranges(lv.get("tile"), w / "tile"),
            order=tuple(name_list(lv["order"], w / "order")) if "order" in lv else None,
            stationary=stationary, stages=stages,
            forbid=tuple(tuple(name_list(o, w / "forbid" / i)) for i, o in enumerate(forbid)),
            keep=tuple(name_list(lv["keep"], w / "keep")) if "keep" in lv else None,
            bypass=bypass)))
    min_util = data.get("min_utilization", 0.0)
    if isinstance(min_util, bool) or not isinstance(min_util, (int, float)) or not 0 <= min_util <= 1:
        raise (where / "min_utilization").error(f"expected a fraction between 0 and 1, got {min_util!r}")
    max_padding = data.get("max_padding", 0.125)
    if isinstance(max_padding, bool) or not isinstance(max_padding, (int, float)) or not 0 <= max_padding <= 1:
        raise (where / "max_padding").error(f"expected a fraction between 0 and 1, got {max_padding!r}")
    align = data.get("align_to_native", True)
    if not isinstance(align, bool):
        raise (where / "align_to_native").error("expected true or false")
    return Constraints(name=text(data["name"], where / "name"),
                       description=text(data.get("description", ""), where / "description"),
                       imperfect=factors == "imperfect", max_padding=float(max_padding),
                       align_to_native=align, min_utilization=float(min_util),
                       min_occupancy=positive_int(data.get("min_occupancy", 1), where / "min_occupancy"),
                       levels=tuple(levels))

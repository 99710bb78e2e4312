"""The only module that reads YAML: files or preset names -> validated spec objects.

Data flows one way: YAML (here) -> validated specs (`spec`) -> mappings (`mapping`) -> cost.
The shape checks this module and `mapping` share live in `validate`, so `mapping` never
imports the loader (no import circle).

Every check names the file and the key path (`levels[2].capacity`) and says what was expected,
so a user can fix the input without reading code.
"""
from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

import yaml

from . import tiles
from .bind import check_fits, check_keeps
from .einsum import parse_einsum
from .errors import SpecError, shown
from .limits import (MAX_COEFFICIENT, MAX_DIMS, MAX_FILE_BYTES, MAX_INSTANCES, MAX_LEVELS, MAX_MACS,
                     MAX_STAGES, MAX_TENSORS, MAX_YAML_DEPTH, MAX_YAML_NODES)
from .mapping import mapping_from_dict
from .spec import Arch, Compute, GpuFacts, Level, Tensor, Workload
from .units import (Where, parse_bandwidth, parse_bytes, parse_dtype_bits, parse_energy,
                    parse_frequency, parse_latency)
from .validate import fields, name_list, name_text, positive_int, text

PRESET_KINDS = ("archs", "workloads", "mapspace", "mappings", "models")


def preset_dirs(kind: str) -> list[Path]:
    """Where presets of a kind live: the checkout's top-level folder (a source tree), and the
    package data `mapper/presets/<kind>` of an installed wheel, found through importlib.resources."""
    checkout = Path(__file__).resolve().parent.parent / kind
    dirs = [checkout] if (checkout.parent / "pyproject.toml").is_file() and checkout.is_dir() else []
    installed = resources.files("mapper").joinpath("presets", kind)     # wheels unpack as files
    return dirs + ([Path(str(installed))] if installed.is_dir() else [])


def preset_names(kind: str) -> list[str]:
    return sorted({p.stem for d in preset_dirs(kind) for p in d.glob("*.yaml")})


def resolve(kind: str, name_or_path: str | Path) -> Path:
    """A path to an existing file, or the name of a bundled preset of this kind."""
    try:
        path = Path(name_or_path)
        if path.is_file():
            return path
        for directory in preset_dirs(kind):
            candidate = directory / f"{name_or_path}.yaml"
            if candidate.is_file():
                return candidate
    except (OSError, ValueError) as exc:        # a name too long for the file system, a NUL byte
        raise SpecError(str(name_or_path), "", "not a usable file name "
                        f"({getattr(exc, 'strerror', None) or exc})") from None
    known = ", ".join(preset_names(kind)) or "none"
    raise SpecError(str(name_or_path), "", f"no such file, and no {kind[:-1]} preset of that name "
                    f"(presets: {known})")


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader (no python tags) that refuses a key given twice in one mapping,
    where plain YAML keeps the last one silently."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:           # an unhashable key: the base class explains it
                break
            if duplicate:
                raise _DuplicateKey(key, key_node.start_mark)
        return super().construct_mapping(node, deep)

    def construct_yaml_int(self, node):
        try:
            return super().construct_yaml_int(node)
        except ValueError:              # Python refuses to convert more than 4300 digits
            raise yaml.constructor.ConstructorError(None, None, "an integer with too many digits",
                                                    node.start_mark) from None


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)


class _DuplicateKey(Exception):
    def __init__(self, key, mark):
        self.key, self.mark = key, mark


def _check_shape(text: str, path: Path) -> None:
    """Nesting depth and expanded size from the parser's events (no recursion, nothing built),
    so deep nesting and alias bombs are refused before the composer sees them."""
    depth, stack, anchors = 0, [], {}
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise SpecError(str(path), f"line {event.start_mark.line + 1}",
                                f"YAML nested deeper than {MAX_YAML_DEPTH} levels (the limit)")
            stack.append((event.anchor, 1))
            continue
        if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
            anchor, size = stack.pop()
        elif isinstance(event, yaml.ScalarEvent):
            anchor, size = event.anchor, 1
        elif isinstance(event, yaml.AliasEvent):
            anchor, size = None, anchors.get(event.anchor, 1)
        else:
            continue
        if anchor is not None:
            anchors[anchor] = size
        if stack:
            stack[-1] = (stack[-1][0], stack[-1][1] + size)
        total = size if not stack else sum(s for _, s in stack)
        if total > MAX_YAML_NODES:
            raise SpecError(str(path), f"line {event.start_mark.line + 1}",
                            f"YAML expands to more than {MAX_YAML_NODES:,} values once aliases are "
                            "followed (the limit)")


def read_yaml(path: Path):
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise SpecError(str(path), "", f"file larger than {MAX_FILE_BYTES:,} bytes (the limit "
                            "for a spec)")
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise SpecError(str(path), "", f"cannot read file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise SpecError(str(path), "", f"not a UTF-8 text file (byte {exc.start})") from None
    try:
        _check_shape(text, path)
        return yaml.load(text, Loader=_StrictLoader)
    except _DuplicateKey as exc:
        raise SpecError(str(path), f"line {exc.mark.line + 1}",
                        f"key {shown(exc.key)} appears twice in one mapping (YAML would keep the "
                        "last silently)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}" if mark else ""
        raise SpecError(str(path), line, f"invalid YAML ({getattr(exc, 'problem', None) or exc})") from None


# ----------------------------------------------------------------------------- workloads

def load_workload(name_or_path) -> Workload:
    path = resolve("workloads", name_or_path)
    return workload_from_dict(read_yaml(path), Where(str(path)))


def workload_from_dict(data, where: Where) -> Workload:
    fields(data, where, ("name", "einsum", "sizes"), ("description", "source", "dtype", "dtypes"))
    parsed = parse_einsum(text(data["einsum"], where / "einsum"), where / "einsum")
    sizes_raw = data["sizes"]
    if not isinstance(sizes_raw, dict) or not sizes_raw:
        raise (where / "sizes").error("expected a mapping of dim -> positive integer size")
    dims = tuple(name_text(d, where / "sizes") for d in sizes_raw)
    if len(dims) > MAX_DIMS:
        raise (where / "sizes").error(f"{len(dims)} dims, above the limit of {MAX_DIMS} this tool "
                                      "handles (loop orders are permutations of the dims)")
    sizes = tuple(positive_int(sizes_raw[d], where / "sizes" / d, "a positive integer size")
                  for d in dims)
    used = {d for _, axes, _ in parsed for axis in axes for d in axis}
    for d in sorted(used - set(dims)):
        raise (where / "einsum").error(f"dim {shown(d)} has no size in `sizes` (sizes: {', '.join(dims)})")
    for d in dims:
        if d not in used:
            raise (where / "sizes" / d).error("dim is not used by the einsum")
    if len(parsed) > MAX_TENSORS:
        raise (where / "einsum").error(f"{len(parsed)} tensors, above the limit of {MAX_TENSORS} "
                                       "this tool handles (keep sets are subsets of them)")
    for tensor, axes, _ in parsed:
        for axis in axes:
            for d, c in axis.items():
                if c > MAX_COEFFICIENT:
                    raise (where / "einsum").error(f"coefficient {c:,} of {d} in {tensor} is above "
                                                   f"the limit of {MAX_COEFFICIENT:,}")
    if math.prod(sizes) > MAX_MACS:
        raise (where / "sizes").error(f"the sizes multiply to {math.prod(sizes):,} MACs, above the "
                                      f"limit of {MAX_MACS:,} (2^53) this tool handles")
    n_outputs = sum(is_out for _, _, is_out in parsed)
    default = data.get("dtype")
    per_tensor = data.get("dtypes") or {}
    if not isinstance(per_tensor, dict):
        raise (where / "dtypes").error("expected a mapping of tensor -> dtype")
    names = [tensor for tensor, _, _ in parsed]
    for tensor in per_tensor:
        if tensor not in names:
            raise (where / "dtypes" / tensor).error(f"no tensor of that name (tensors: {', '.join(names)})")
    tensors = []
    for tensor, axes, is_output in parsed:
        raw = per_tensor.get(tensor, default)
        if raw is None:
            raise (where / "dtypes").error(f"tensor {tensor} has no dtype (give `dtype` or `dtypes.{tensor}`)")
        key = where / "dtypes" / tensor if tensor in per_tensor else where / "dtype"
        bits = parse_dtype_bits(raw, key)
        exprs = tuple(tuple((dims.index(d), c) for d, c in axis.items()) for axis in axes)
        words = tiles.box_words(exprs, sizes)
        if words * bits > MAX_MACS:
            raise (where / "einsum").error(f"tensor {tensor} spans {words:,} words of {bits} bits, above "
                                           f"the limit of {MAX_MACS:,} (2^53) bits this tool handles")
        tensors.append(Tensor(tensor, exprs, is_output, bits))
    assert n_outputs == 1
    return Workload(name=name_text(data["name"], where / "name"), einsum=data["einsum"], dims=dims,
                    sizes=sizes, tensors=tuple(tensors),
                    description=text(data.get("description", ""), where / "description"),
                    source=text(data.get("source", ""), where / "source"), file=where.file)


# ----------------------------------------------------------------------------- architectures

def load_arch(name_or_path) -> Arch:
    path = resolve("archs", name_or_path)
    return arch_from_dict(read_yaml(path), Where(str(path)))


def _mesh(data, where: Where) -> tuple[int, int]:
    instances = positive_int(data.get("instances", 1), where / "instances", limit=MAX_INSTANCES)
    if "mesh" not in data:
        return instances, 1
    mesh = data["mesh"]
    if (not isinstance(mesh, list) or len(mesh) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in mesh)):
        raise (where / "mesh").error(f"expected [x, y] with positive integers, got {shown(mesh)}")
    if mesh[0] * mesh[1] > MAX_INSTANCES:
        raise (where / "mesh").error(f"{mesh[0]:,} x {mesh[1]:,} instances, above the limit of "
                                     f"{MAX_INSTANCES:,} this tool handles")
    if "instances" in data and mesh[0] * mesh[1] != instances:
        raise (where / "mesh").error(f"mesh {mesh[0]} x {mesh[1]} does not equal instances {instances}")
    return mesh[0], mesh[1]


def _energies(data, where: Where) -> tuple[float, float, float]:
    if data is None:
        return 0.0, 0.0, 0.0
    fields(data, where, (), ("read", "write", "update"))
    return tuple(parse_energy(data.get(k, 0), where / k) for k in ("read", "write", "update"))


LEVEL_KEYS = ("name", "capacity", "bandwidth", "read_bandwidth", "write_bandwidth", "block_size", "energy",
              "energy_per_byte", "leak", "keeps", "max_stages", "instances", "mesh", "multicast",
              "spatial_reduction", "latency", "word_bits", "cluster_size", "description")


def _level(data, where: Where, clock_hz: float) -> Level:
    fields(data, where, ("name",), LEVEL_KEYS[1:])
    e_read, e_write, e_update = _energies(data.get("energy"), where / "energy")
    b_read, b_write, b_update = _energies(data.get("energy_per_byte"), where / "energy_per_byte")
    keeps = data.get("keeps")
    return Level(
        name=name_text(data["name"], where / "name"),
        capacity=parse_bytes(data.get("capacity", "unlimited"), where / "capacity"),
        bandwidth=parse_bandwidth(data.get("bandwidth", "unlimited"), where / "bandwidth", clock_hz),
        read_bandwidth=parse_bandwidth(data.get("read_bandwidth", "unlimited"), where / "read_bandwidth", clock_hz),
        write_bandwidth=parse_bandwidth(data.get("write_bandwidth", "unlimited"), where / "write_bandwidth",
                                        clock_hz),
        block_size=positive_int(data.get("block_size", 1), where / "block_size"),
        energy_read=e_read, energy_write=e_write, energy_update=e_update,
        byte_energy_read=b_read, byte_energy_write=b_write, byte_energy_update=b_update,
        leak=parse_energy(data.get("leak", 0), where / "leak"),
        keeps=None if keeps is None else frozenset(name_list(keeps, where / "keeps")),
        max_stages=positive_int(data.get("max_stages", 1), where / "max_stages", limit=MAX_STAGES),
        mesh=_mesh(data, where),
        multicast=_flag(data, "multicast", where),
        reduction=_flag(data, "spatial_reduction", where),
        latency=parse_latency(data.get("latency", 0), where / "latency", clock_hz),
        word_bits=None if data.get("word_bits") is None else
        positive_int(data["word_bits"], where / "word_bits", limit=1024),
        cluster_size=positive_int(data.get("cluster_size", 1), where / "cluster_size", limit=1 << 20),
    )


def _flag(data, key: str, where: Where) -> bool:
    value = data.get(key, True)
    if not isinstance(value, bool):
        raise (where / key).error(f"expected true or false, got {shown(value)}")
    return value


def arch_from_dict(data, where: Where) -> Arch:
    fields(data, where, ("name", "clock", "levels", "compute"), ("description", "gpu", "model"))
    clock = parse_frequency(data["clock"], where / "clock")
    raw_levels = data["levels"]
    if not isinstance(raw_levels, list) or not raw_levels:
        raise (where / "levels").error("expected a non-empty list of levels, outermost first")
    if len(raw_levels) > MAX_LEVELS:
        raise (where / "levels").error(f"{len(raw_levels)} levels, above the limit of {MAX_LEVELS} "
                                       "this tool handles")
    levels = tuple(_level(lv, where / "levels" / i, clock) for i, lv in enumerate(raw_levels))
    names = [lv.name for lv in levels]
    for i, name in enumerate(names):
        if names.index(name) != i:
            raise (where / "levels" / i / "name").error(f"level name {shown(name)} is used twice")
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
        name=name_text(comp.get("name", "MAC"), cw / "name"),
        mesh=_mesh(comp, cw),
        macs_per_cycle=positive_int(comp.get("macs_per_cycle", 1), cw / "macs_per_cycle", limit=MAX_INSTANCES),
        energy_per_mac=parse_energy(comp.get("energy", 0), cw / "energy"),
        native_shape=tuple((name_text(k, cw / "native_shape"), positive_int(v, cw / "native_shape" / k))
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
    model = data.get("model") or {}
    fields(model, where / "model", (), ("multicast", "leakage", "cycles"))
    rules = {"multicast": ("pooled", "per_fanout"), "leakage": ("all", "utilized"),
             "cycles": ("stage_aware", "timeloop")}
    for key, allowed in rules.items():
        if model.get(key, allowed[0]) not in allowed:
            raise (where / "model" / key).error(f"expected {' or '.join(allowed)}, got {shown(model[key])}")
    return Arch(name=name_text(data["name"], where / "name"), clock_hz=clock, levels=levels,
                compute=compute, gpu=gpu,
                description=text(data.get("description", ""), where / "description"), file=where.file,
                multicast=model.get("multicast", "pooled"), leakage=model.get("leakage", "all"),
                cycle_rule=model.get("cycles", "stage_aware"))



# ----------------------------------------------------------------------------- mappings

def load_mapping(name_or_path, arch: Arch, workload: Workload):
    """Read a mapping file and check it against the arch and workload, capacity included."""
    path = resolve("mappings", name_or_path)
    return mapping_from_checked_dict(read_yaml(path), arch, workload, Where(str(path)))


def load_warm_start(name_or_path, arch: Arch, workload: Workload):
    """A mapping file to start a search from: of this workload, or of another shape of the same
    einsum (a neighbouring shape's optimum), then carried to this one (`rescale.rescale`:
    the outermost loops grow or shrink by each dim's ratio)."""
    from dataclasses import replace
    from .rescale import rescale
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


def mapping_from_checked_dict(data, arch: Arch, workload: Workload, where: Where):
    check_keeps(arch, workload)
    mapping = mapping_from_dict(data, arch, workload, where)
    check_fits(mapping, arch, workload, where)
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
    if value is None or isinstance(value, (str, float, list)):
        raise where.error(f"expected a positive integer or {{min, max, multiple_of}}, got {shown(value)}")
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
    return tuple((name_text(k, where), _range(v, where / k)) for k, v in value.items())


def constraints_from_dict(data, where: Where):
    from .constraints import ROLES, Constraints, LevelConstraints
    fields(data, where, ("name",), ("description", "factors", "max_padding", "align_to_native",
                                    "min_utilization", "min_occupancy", "levels"))
    factors = data.get("factors", "perfect")
    if not isinstance(factors, str) or factors not in ("perfect", "imperfect"):
        raise (where / "factors").error(f"expected 'perfect' or 'imperfect', got {shown(factors)}")
    levels = []
    raw_levels = data.get("levels") or {}
    if not isinstance(raw_levels, dict):
        raise (where / "levels").error("expected a mapping of level name (or innermost/outermost) -> constraints")
    for key, lv in raw_levels.items():
        w = where / "levels" / key
        fields(lv, w, (), ("temporal", "spatial", "tile", "order", "innermost_order", "stationary", "forbid", "stages",
                           "keep", "bypass", "spatial_x", "spatial_y"))
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
        levels.append((name_text(key, where / "levels"), LevelConstraints(
            temporal=_ranges(lv.get("temporal"), w / "temporal"),
            spatial=_ranges(lv.get("spatial"), w / "spatial"),
            tile=_ranges(lv.get("tile"), w / "tile"),
            order=tuple(name_list(lv["order"], w / "order")) if "order" in lv else None,
            innermost_order=(tuple(name_list(lv["innermost_order"], w / "innermost_order"))
                             if "innermost_order" in lv else None),
            stationary=stationary, stages=stages,
            forbid=tuple(tuple(name_list(o, w / "forbid" / i)) for i, o in enumerate(forbid)),
            keep=tuple(name_list(lv["keep"], w / "keep")) if "keep" in lv else None,
            bypass=bypass,
            spatial_x=_ranges(lv.get("spatial_x"), w / "spatial_x"),
            spatial_y=_ranges(lv.get("spatial_y"), w / "spatial_y"))))
    min_util = data.get("min_utilization", 0.0)
    if isinstance(min_util, bool) or not isinstance(min_util, (int, float)) or not 0 <= min_util <= 1:
        raise (where / "min_utilization").error(f"expected a fraction between 0 and 1, got {shown(min_util)}")
    max_padding = data.get("max_padding", 0.125)
    if isinstance(max_padding, bool) or not isinstance(max_padding, (int, float)) or not 0 <= max_padding <= 1:
        raise (where / "max_padding").error(f"expected a fraction between 0 and 1, got {shown(max_padding)}")
    align = data.get("align_to_native", True)
    if not isinstance(align, bool):
        raise (where / "align_to_native").error("expected true or false")
    return Constraints(name=name_text(data["name"], where / "name"), file=where.file,
                       description=text(data.get("description", ""), where / "description"),
                       imperfect=factors == "imperfect", max_padding=float(max_padding),
                       align_to_native=align, min_utilization=float(min_util),
                       min_occupancy=positive_int(data.get("min_occupancy", 1), where / "min_occupancy"),
                       levels=tuple(levels))

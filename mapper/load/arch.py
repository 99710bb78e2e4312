"""Architecture files: levels from outermost to innermost, then the compute unit, and a GPU's
occupancy facts.

Quantities are parsed with their units (`units`); each level's mesh must divide the next one's
(every instance fans out to a whole number below); the outermost level keeps every tensor.
"""
from __future__ import annotations

import dataclasses
import math

from ..constraints import ROLES
from ..cta_pair import pair_problem
from ..errors import shown
from ..limits import MAX_INSTANCES, MAX_LEVELS, MAX_STAGES, MAX_WARPS
from ..dtypes import canonical, family, known_names
from ..spec import Arch, BlockClusters, Compute, DtypeRate, Dsmem, GpuFacts, Level, Technology
from ..units import (Where, parse_bandwidth, parse_bytes, parse_energy, parse_frequency,
                     parse_latency)
from ..validate import fields, flag, name_list, name_text, positive_int, text
from .technology import compute_area, energy_per_byte_auto, level_area, mac_energy_auto, technology
from .files import spec_data


def load_arch(spec) -> Arch:
    """An architecture from a preset name, a YAML file's path or the dict such a file holds
    (`files.spec_data`); an Arch is returned as it is."""
    if isinstance(spec, Arch):
        return spec
    data, name = spec_data("archs", spec)
    return arch_from_dict(data, Where(name))


def _mesh(data, where: Where) -> tuple[int, int]:
    instances = positive_int(data.get("instances", 1), where / "instances", limit=MAX_INSTANCES)
    if "mesh" not in data:
        return instances, 1
    mesh = data["mesh"]
    if not isinstance(mesh, list) or len(mesh) != 2:
        raise (where / "mesh").error(f"expected [x, y] with positive integers, got {shown(mesh)}")
    mesh = [positive_int(v, where / "mesh" / i, "a positive integer", limit=MAX_INSTANCES) for i, v in enumerate(mesh)]
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


def _level_energies(data, capacity: float, where: Where, tech: Technology) -> tuple[tuple, tuple, str]:
    """(pJ per access, pJ per byte, the source where `auto` gave them): `energy_per_byte: auto`
    prices every byte, `energy: auto` an access of `block_size` words of `word_bits`, from the
    component model (`technology.energy_per_byte_auto`); otherwise the file's figures."""
    per_access, per_byte = data.get("energy"), data.get("energy_per_byte")
    if per_access == "auto" and per_byte == "auto":
        raise (where / "energy").error("give `energy: auto` (per access) or `energy_per_byte: auto`, not both")
    if per_byte == "auto":
        read, write, source = energy_per_byte_auto(capacity, where / "energy_per_byte", tech)
        return _energies(per_access, where / "energy"), (read, write, write), source
    if per_access == "auto":
        if data.get("word_bits") is None:
            raise (where / "energy").error("`auto` per access needs the level's word: add `word_bits` (or say "
                                           "`energy_per_byte: auto`: each tensor's words at their own width)")
        words = positive_int(data.get("block_size", 1), where / "block_size")
        bits = positive_int(data["word_bits"], where / "word_bits", limit=1024)
        read, write, source = energy_per_byte_auto(capacity, where / "energy", tech)
        per_word = words * bits / 8
        return (read * per_word, write * per_word, write * per_word), _energies(per_byte, where / "energy_per_byte"), source
    return _energies(per_access, where / "energy"), _energies(per_byte, where / "energy_per_byte"), ""


LEVEL_KEYS = ("name", "capacity", "bandwidth", "read_bandwidth", "write_bandwidth", "block_size", "energy",
              "energy_per_byte", "leak", "keeps", "max_stages", "instances", "mesh", "multicast",
              "spatial_reduction", "latency", "word_bits", "cluster_size", "area", "area_per_byte",
              "block_clusters", "description")


def _level(data, where: Where, clock_hz: float, tech: Technology) -> Level:
    fields(data, where, ("name",), LEVEL_KEYS[1:])
    capacity = parse_bytes(data.get("capacity", "unlimited"), where / "capacity")
    area, area_source = level_area(data, capacity, where, tech)
    (e_read, e_write, e_update), (b_read, b_write, b_update), energy_source = _level_energies(
        data, capacity, where, tech)
    keeps = data.get("keeps")
    # tensor names, or roles (`[output]`) that each workload resolves (`Level.for_workload`)
    words = () if keeps is None else tuple(name_list(keeps, where / "keeps"))
    return Level(
        name=name_text(data["name"], where / "name"),
        capacity=capacity,
        bandwidth=parse_bandwidth(data.get("bandwidth", "unlimited"), where / "bandwidth", clock_hz),
        read_bandwidth=parse_bandwidth(data.get("read_bandwidth", "unlimited"), where / "read_bandwidth", clock_hz),
        write_bandwidth=parse_bandwidth(data.get("write_bandwidth", "unlimited"), where / "write_bandwidth",
                                        clock_hz),
        block_size=positive_int(data.get("block_size", 1), where / "block_size"),
        energy_read=e_read, energy_write=e_write, energy_update=e_update,
        byte_energy_read=b_read, byte_energy_write=b_write, byte_energy_update=b_update,
        leak=parse_energy(data.get("leak", 0), where / "leak"),
        keeps=None if keeps is None else frozenset(w for w in words if w not in ROLES),
        keep_roles=tuple(words) if any(w in ROLES for w in words) else (),
        max_stages=positive_int(data.get("max_stages", 1), where / "max_stages", limit=MAX_STAGES),
        mesh=_mesh(data, where),
        multicast=flag(data.get("multicast", True), where / "multicast"),
        reduction=flag(data.get("spatial_reduction", True), where / "spatial_reduction"),
        latency=parse_latency(data.get("latency", 0), where / "latency", clock_hz),
        word_bits=None if data.get("word_bits") is None else
        positive_int(data["word_bits"], where / "word_bits", limit=1024),
        cluster_size=positive_int(data.get("cluster_size", 1), where / "cluster_size", limit=1 << 20),
        area=area, area_source=area_source, energy_source=energy_source,
        clusters=None if data.get("block_clusters") is None else _clusters(data["block_clusters"],
                                                                           where / "block_clusters", clock_hz),
    )


def _clusters(data, where: Where, clock_hz: float) -> BlockClusters:
    """`block_clusters: {max_ctas: 16, gpc_sms: [18, 18, 16, ...], dsmem: {...}}` (checked
    against the fanout it sits on by `_check_clusters`, once the meshes are known)."""
    fields(data, where, ("max_ctas", "gpc_sms"), ("dsmem",))
    sms = data["gpc_sms"]
    if not isinstance(sms, list) or not sms:
        raise (where / "gpc_sms").error(f"expected a list of SMs per GPC, e.g. [18, 16, 16], got {shown(sms)}")
    return BlockClusters(max_ctas=positive_int(data["max_ctas"], where / "max_ctas", limit=MAX_INSTANCES),
                         gpc_sms=tuple(positive_int(v, where / "gpc_sms" / i, limit=MAX_INSTANCES)
                                       for i, v in enumerate(sms)),
                         dsmem=None if data.get("dsmem") is None else _dsmem(data["dsmem"], where / "dsmem", clock_hz))


def _dsmem(data, where: Where, clock_hz: float) -> Dsmem:
    """`dsmem: {bandwidth: 14 B/cycle, latency: 180 cycles, energy_per_byte: 0.5 pJ}`: per SM."""
    fields(data, where, ("bandwidth", "latency", "energy_per_byte"))
    bandwidth = parse_bandwidth(data["bandwidth"], where / "bandwidth", clock_hz)
    if math.isinf(bandwidth):
        raise (where / "bandwidth").error("expected a finite bandwidth per SM, e.g. 14 B/cycle")
    return Dsmem(bandwidth=bandwidth, latency=parse_latency(data["latency"], where / "latency", clock_hz),
                 energy_per_byte=parse_energy(data["energy_per_byte"], where / "energy_per_byte"))


def _check_clusters(arch: Arch, where: Where) -> None:
    """Block clusters sit on a fanout along mesh axis x (their CTAs are axis y of a mapping's
    split), above another level, and their GPCs hold exactly the children of that fanout."""
    for i, level in enumerate(arch.levels):
        if level.clusters is None:
            continue
        key = where / "levels" / i / "block_clusters"
        below = arch.levels[i + 1].mesh if i + 1 < len(arch.levels) else None
        if below is None or below[1] != level.mesh[1]:
            raise key.error("block clusters need a level below this one, fanning out along mesh x only")
        children = below[0] // level.mesh[0]
        if sum(level.clusters.gpc_sms) != children:
            raise (key / "gpc_sms").error(f"the GPCs hold {sum(level.clusters.gpc_sms)} SMs, but this level fans "
                                          f"out to {children}: they must be the same (with another SM count, "
                                          "list its GPCs, or leave block_clusters out)")


def _per_dtype(value, where: Where, parse) -> dict[str, object]:
    """A compute figure given per dtype (`{bf16: 512, fp8: 1024}`: family -> parsed value, the
    first family first) or once (`512`: {"": parsed})."""
    if not isinstance(value, dict):
        return {"": parse(value, where)}
    if not value:
        raise where.error("expected a value, or a mapping of dtype -> value such as {bf16: 512, fp8: 1024}")
    out: dict[str, object] = {}
    for key, raw in value.items():
        name = canonical(key) if isinstance(key, str) else None
        if name is None:
            raise (where / str(key)).error(f"expected a dtype as the key ({', '.join(known_names())})")
        if family(name) in out:
            raise (where / str(key)).error(f"dtype family {family(name)} given twice")
        out[family(name)] = parse(raw, where / key)
    return out


def _shape(value, where: Where) -> tuple[tuple[str, int], ...]:
    if not isinstance(value, dict):
        raise where.error("expected a mapping of dim -> size, e.g. {m: 16, n: 8, k: 16}")
    return tuple((name_text(k, where), positive_int(v, where / k)) for k, v in value.items())


def _compute(comp, cw: Where, tech: Technology) -> Compute:
    """The compute unit; `macs_per_cycle`, `energy` and `native_shape` may each be given per
    dtype (the first family's figure is the default for a dtype not listed)."""
    rates = _per_dtype(comp.get("macs_per_cycle", 1), cw / "macs_per_cycle",
                       lambda v, w: positive_int(v, w, limit=MAX_INSTANCES))
    native = comp.get("native_shape") or {}
    per_dtype_shape = isinstance(native, dict) and native and all(isinstance(v, dict) for v in native.values())
    shapes = _per_dtype(native, cw / "native_shape", _shape) if per_dtype_shape else {"": _shape(native, cw / "native_shape")}
    if comp.get("energy") == "auto":
        auto, energy_source = mac_energy_auto(cw / "energy", tech)
        energies = {"": auto}
    else:
        energies, energy_source = _per_dtype(comp.get("energy", 0), cw / "energy", parse_energy), ""
    families = list(dict.fromkeys(f for table in (rates, shapes, energies) for f in table if f))
    for table, key in ((rates, "macs_per_cycle"), (shapes, "native_shape"), (energies, "energy")):
        if "" not in table and families and next(iter(table)) != families[0]:
            raise (cw / key).error(f"list the default dtype {families[0]} first, as `macs_per_cycle` does "
                                   "(a dtype not listed runs at the first one's figures)")
    macs_per_cycle = _first(rates)
    # `area: auto` prices the MACs of technology.mac_dtype: its own rate where one is listed
    mac_family = family(canonical(tech.mac_dtype) or "") if tech.mac_dtype else ""
    unit_area, unit_area_source = compute_area(comp, rates.get(mac_family, macs_per_cycle), cw, tech)
    # the first family's figures are the unit's own fields: stored once, there
    per_dtype = tuple(DtypeRate(f, None, None, None) if i == 0 else
                      DtypeRate(f, rates.get(f), shapes.get(f), energies.get(f)) for i, f in enumerate(families))
    return Compute(name=name_text(comp.get("name", "MAC"), cw / "name"), mesh=_mesh(comp, cw),
                   macs_per_cycle=macs_per_cycle, area=unit_area, area_source=unit_area_source,
                   energy_per_mac=_first(energies), energy_source=energy_source,
                   native_shape=_first(shapes), per_dtype=per_dtype,
                   max_shape=_max_shape(comp.get("max_shape"), cw / "max_shape", shapes),
                   operand_reads=_operand_reads(comp.get("operand_reads", "per_mac"), cw / "operand_reads"),
                   warps=positive_int(comp.get("warps", 1), cw / "warps", limit=MAX_WARPS),
                   cta_pair=flag(comp.get("cta_pair", False), cw / "cta_pair"))


OPERAND_READS = ("per_mac", "per_instruction")


def _operand_reads(value, where: Where) -> str:
    if value not in OPERAND_READS:
        raise where.error(f"expected {' or '.join(OPERAND_READS)}, got {shown(value)}")
    return value


def _max_shape(value, where: Where, shapes: dict) -> tuple[tuple[str, int], ...]:
    """The largest instruction per role (`max_shape: {n: 256}`): each a role of the native
    shape and a multiple of its native size under every dtype (the instruction grows by it)."""
    if value is None:
        return ()
    most = _shape(value, where)
    for name, size in most:
        for dtype, shape in shapes.items():
            grain = dict(shape).get(name)
            if grain is None or size % grain:
                of = f" of {dtype}" if dtype else ""
                raise (where / name).error(f"expected a multiple of the native shape{of}'s {name} "
                                           f"({grain if grain is not None else 'not given'}), got {size}")
    return most


def _first(table: dict):
    """The default of a per-dtype figure: its first family's."""
    return next(iter(table.values()))


def arch_from_dict(data, where: Where) -> Arch:
    fields(data, where, ("name", "clock", "levels", "compute"), ("description", "gpu", "model", "technology"))
    tech = technology(data.get("technology"), where / "technology")
    clock = parse_frequency(data["clock"], where / "clock")
    raw_levels = data["levels"]
    if not isinstance(raw_levels, list) or not raw_levels:
        raise (where / "levels").error("expected a non-empty list of levels, outermost first")
    if len(raw_levels) > MAX_LEVELS:
        raise (where / "levels").error(f"{len(raw_levels)} levels, above the limit of {MAX_LEVELS} "
                                       "this tool handles")
    levels = tuple(_level(lv, where / "levels" / i, clock, tech) for i, lv in enumerate(raw_levels))
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
                          "max_shape", "operand_reads", "warps", "area", "cta_pair", "description"))
    if "instances" not in comp and "mesh" not in comp:
        comp = {**comp, "mesh": list(levels[-1].mesh)}
    compute = _compute(comp, cw, tech)
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
    fields(model, where / "model", (), ("multicast", "leakage", "cycles", "tails"))
    arch = Arch(name=name_text(data["name"], where / "name"), clock_hz=clock, levels=levels,
                compute=compute, gpu=gpu, technology=tech,
                description=text(data.get("description", ""), where / "description"), file=where.file)
    # masked tails (the default where they apply) need the per-SM level: the loads they mask
    rules = {"multicast": ("pooled", "per_fanout"), "leakage": ("all", "utilized"),
             "cycles": ("stage_aware", "timeloop"),
             "tails": ("masked", "padded") if arch.per_sm_levels() else ("padded",)}
    for key, allowed in rules.items():
        if model.get(key, allowed[0]) not in allowed:
            why = (" (masked tails need a `gpu:` section and a level with one instance per SM "
                   "above another: the global-memory loads they mask)") if key == "tails" else ""
            raise (where / "model" / key).error(f"expected {' or '.join(allowed)}, got {shown(model[key])}{why}")
    chosen = {key: model.get(key, allowed[0]) for key, allowed in rules.items()}
    _check_clusters(arch, where)
    if arch.compute.cta_pair and (problem := pair_problem(arch)) is not None:
        raise (cw / "cta_pair").error(problem)
    return dataclasses.replace(arch, multicast=chosen["multicast"], leakage=chosen["leakage"],
                               cycle_rule=chosen["cycles"], tails=chosen["tails"])

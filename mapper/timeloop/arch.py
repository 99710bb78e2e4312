"""Timeloop architectures (v0.3 `subtree`/`local` tree, v0.4 `nodes` list) -> this project's arch dict.

Flattening gives Timeloop's chain of components, outermost first, each with its total instance
count and mesh, its attributes (inherited from enclosing containers) and the constraints written
on it. Translation rules (docs/TIMELOOP.md has the full concept map):
- a storage component becomes a level: capacity = words x word bytes, where words =
  depth x block and the word is its own `datawidth` (`word_bits` where it differs from the
  outermost level's, which is the problem's element size);
  block_size = width / datawidth; energies per vector access and leakage from the ERT;
- a v0.4 container with `spatial: {meshX, meshY}` becomes Timeloop's dummy fanout level
  `inter_<container>_spatial`, as Timeloop's front end makes it;
- a dummy level with the same mesh as the level above it only spreads that level's fanout: it
  is folded into that level (its spatial loops become that level's); one with a larger mesh
  stays as a level that keeps nothing and costs nothing;
- the last component is the compute unit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import shown
from ..limits import MAX_BITS, MAX_CLOCK, MAX_INSTANCES, MAX_STAGES, MIN_CLOCK
from ..units import Where
from ..validate import finite_number, name_list
from .yamlio import TAG_KEY, integer, number, split_range

COMPUTE_HINTS = ("mac", "compute", "multiplier", "adder", "alu", "fma")
NETWORK_HINTS = ("noc", "network", "multicast", "router")

# Attributes that only feed Accelergy's energy/area estimates (the ERT carries their effect).
ESTIMATION_ONLY = frozenset({
    "technology", "type", "n_banks", "num-banks", "nbanks", "nports", "num_ports", "num-ports",
    "n_rdwr_ports", "n_rd_ports", "n_wr_ports", "has_power_gating", "power_gated_at", "latency",
    "update_fifo_depth", "global_cycle_seconds", "multiplier_width", "adder_width", "version",
    "action_latency_cycles", "cycle_seconds", "vdd", "resolution", "memory_technology",
    "datawidth", "word-bits", "word_bits", "width", "memory_width", "depth", "memory_depth",
    "block_size", "block-size", "entries", "size", "sizeKB", "cluster_size", "cluster-size", "multiple_buffering",
    "meshX", "meshY", "instances", "min_utilization", "allow_overbooking", "reduction_supported",
    "read_bandwidth", "write_bandwidth", "shared_bandwidth", "bandwidth", "n_words", "name",
})


@dataclass
class Component:
    name: str
    cls: str
    instances: int
    mesh: tuple[int, int]
    attributes: dict
    constraints: list[dict]
    where: Where
    kind: str = "storage"                 # storage | dummy | compute


@dataclass
class ArchImport:
    """The translated arch dict, and what the mapping and constraint readers need about it."""

    data: dict                            # this project's arch YAML dict
    components: list[Component]
    fold: dict[str, str]                  # Timeloop storage/dummy name -> this project's level name
    folded: set[str]                      # dummy levels folded into the level above
    spatial_target: dict[str, str]        # our level -> Timeloop target of its spatial loops
    stages: dict[str, int]                # our level -> Timeloop's multiple_buffering
    word_bits: int
    constraints: list[dict] = field(default_factory=list)   # per-component constraints, as targets
    containers: dict[str, str | None] = field(default_factory=dict)  # v0.4 container -> its fanout's dummy (None: none)

    def target(self, name, where: Where) -> str:
        """The Timeloop storage or dummy level a directive's or constraint's `target` names. A v0.4
        container names its fanout's dummy level (`inter_<container>_spatial`), as Timeloop's
        front end reads it; a container without a fanout has no level of its own: refused."""
        if not isinstance(name, str):
            raise where.error(f"expected the name of a storage level, got {shown(name)}")
        if name in self.fold:
            return name
        if name in self.containers:
            dummy = self.containers[name]
            if dummy is None:
                raise where.error(f"{name!r} is a container without a spatial fanout, not a level: "
                                  f"target a storage level (levels: {', '.join(self.fold)})")
            return dummy
        raise where.error(f"no storage level {name!r} in the architecture (levels: {', '.join(self.fold)})")


def is_arch(data) -> bool:
    return isinstance(data, dict) and isinstance(data.get("architecture"), dict)


# ----------------------------------------------------------------------------- flattening

def flatten(arch, where: Where, containers: dict | None = None) -> tuple[list[Component], dict]:
    """Timeloop's components outermost first, and the top-level attributes; `containers`, when
    given, gets each v0.4 container's name -> its fanout's dummy level (None: no fanout)."""
    containers = {} if containers is None else containers
    if not isinstance(arch, dict):
        raise where.error("expected a mapping with `nodes` (v0.4) or `subtree` (v0.3)")
    if "nodes" in arch:
        out: list[Component] = []
        top: dict = {}
        _walk_nodes(arch["nodes"], where / "nodes", {}, [1, 1], out, top, containers)
        return out, top
    if "subtree" in arch:
        out = []
        top = {}
        for i, node in enumerate(_list(arch["subtree"], where / "subtree")):
            _walk_tree(node, where / "subtree" / i, {}, 1, out, top)
        return out, top
    raise where.error("expected `nodes` (Timeloop v0.4) or `subtree` (Timeloop v0.3)")


def _list(value, where: Where) -> list:
    if not isinstance(value, list):
        raise where.error(f"expected a list, got {value!r}")
    return value


def _attrs(node: dict, where: Where) -> dict:
    attrs = node.get("attributes") or {}
    if not isinstance(attrs, dict):
        raise (where / "attributes").error("expected a mapping of attribute -> value")
    for key in attrs:
        if not isinstance(key, str):
            raise (where / "attributes").error(f"attribute names are strings, got {shown(key)}")
    return attrs


def _class(node: dict, where: Where) -> str:
    cls = node.get("class", "")
    if not isinstance(cls, str):
        raise (where / "class").error(f"expected a component class such as 'SRAM', got {shown(cls)}")
    return cls


def _spatial(node: dict, where: Where) -> tuple[int, int]:
    sp = node.get("spatial") or {}
    if not isinstance(sp, dict):
        raise (where / "spatial").error("expected {meshX: N, meshY: M}")
    for key in sp:
        if key not in ("meshX", "meshY"):
            raise (where / "spatial" / key).error("unsupported: only meshX and meshY are read")
    return (integer(sp.get("meshX", 1), where / "spatial" / "meshX", high=MAX_INSTANCES),
            integer(sp.get("meshY", 1), where / "spatial" / "meshY", high=MAX_INSTANCES))


def _node_constraints(node: dict, name: str, where: Where) -> list[dict]:
    """A v0.4 node's `constraints` as Timeloop constraint targets."""
    raw = node.get("constraints") or {}
    if not isinstance(raw, dict):
        raise (where / "constraints").error("expected {dataspace: ..., temporal: ..., spatial: ...}")
    out = []
    for kind, body in raw.items():
        if kind not in ("dataspace", "temporal", "spatial"):
            raise (where / "constraints" / kind).error(
                "unsupported constraint kind (read: dataspace, temporal, spatial)")
        if not isinstance(body, dict):
            raise (where / "constraints" / kind).error("expected a mapping")
        out.append({"target": name, "type": kind, **body, "_where": where / "constraints" / kind})
    return out


def _walk_nodes(nodes, where: Where, inherited: dict, mesh: list[int], out: list, top: dict,
                containers: dict):
    for i, node in enumerate(_list(nodes, where)):
        w = where / i
        if not isinstance(node, dict):
            raise w.error("expected a !Container, !Component or !Parallel node")
        tag = node.get(TAG_KEY)
        if tag == "Nothing":
            continue
        if tag in ("Parallel", "Hierarchical"):
            inner = node.get("nodes", [])
            state = list(mesh) if tag == "Parallel" else mesh
            _walk_nodes(inner, w / "nodes", dict(inherited), state, out, top, containers)
            continue
        if tag not in ("Container", "Component"):
            raise w.error(f"unsupported node tag {tag!r} (read: !Container, !Component, !Parallel, "
                          "!Hierarchical, !Nothing)")
        attrs = {**inherited, **_attrs(node, w)}
        name = node.get("name")
        if not isinstance(name, str):
            raise (w / "name").error("expected a name")
        if node.get("enabled", True) is False:
            continue
        sx, sy = _spatial(node, w)
        if tag == "Container":
            if not out and not top:
                top.update(attrs)
            inherited.clear()
            inherited.update(attrs)
            containers[name] = f"inter_{name}_spatial" if sx * sy > 1 else None
            if sx * sy > 1:
                # Timeloop's front end turns a container's fanout into a dummy storage level.
                dummy = f"inter_{name}_spatial"
                out.append(Component(dummy, "dummy_storage", mesh[0] * mesh[1], (mesh[0], mesh[1]),
                                     {}, _node_constraints(node, dummy, w), w, "dummy"))
                mesh[0] *= sx
                mesh[1] *= sy
            elif node.get("constraints"):
                raise (w / "constraints").error("unsupported: constraints on a container without "
                                                "a spatial fanout")
            continue
        mesh[0] *= sx
        mesh[1] *= sy
        cls = _class(node, w)
        out.append(Component(name, cls, mesh[0] * mesh[1], (mesh[0], mesh[1]), attrs,
                             _node_constraints(node, name, w), w))


def _walk_tree(node, where: Where, inherited: dict, multiplier: int, out: list, top: dict):
    if not isinstance(node, dict) or not isinstance(node.get("name"), str):
        raise where.error("expected a subtree node {name, attributes, local, subtree}")
    _, count = split_range(node["name"], where / "name")
    attrs = {**inherited, **_attrs(node, where)}
    if not out and not top:
        top.update(attrs)
    total = multiplier * count
    for j, comp in enumerate(_list(node.get("local") or [], where / "local")):
        cw = where / "local" / j
        if not isinstance(comp, dict) or not isinstance(comp.get("name"), str):
            raise cw.error("expected a component {name, class, attributes}")
        if comp.get("enabled", True) is False:
            continue
        name, own = split_range(comp["name"], cw / "name")
        cattrs = {**attrs, **_attrs(comp, cw)}
        instances = total * own
        if "instances" in cattrs:
            instances = integer(cattrs["instances"], cw / "attributes" / "instances", high=MAX_INSTANCES)
        mesh = _tree_mesh(cattrs, instances, cw)
        out.append(Component(name, _class(comp, cw), instances, mesh, cattrs,
                             _node_constraints(comp, name, cw), cw))
    for j, child in enumerate(_list(node.get("subtree") or [], where / "subtree")):
        _walk_tree(child, where / "subtree" / j, attrs, total, out, top)


def _tree_mesh(attrs: dict, instances: int, where: Where) -> tuple[int, int]:
    aw = where / "attributes"
    if "meshX" in attrs:
        mx = integer(attrs["meshX"], aw / "meshX", high=MAX_INSTANCES)
        if instances % mx:
            raise (aw / "meshX").error(f"meshX {mx} does not divide the {instances} instances")
        return mx, instances // mx
    if "meshY" in attrs:
        my = integer(attrs["meshY"], aw / "meshY", high=MAX_INSTANCES)
        if instances % my:
            raise (aw / "meshY").error(f"meshY {my} does not divide the {instances} instances")
        return instances // my, my
    return instances, 1


# ----------------------------------------------------------------------------- translation

def _classify(components: list[Component], where: Where) -> None:
    if not components:
        raise where.error("the architecture has no components")
    for i, comp in enumerate(components):
        cls = comp.cls.lower()
        if comp.kind == "dummy" or cls == "dummy_storage":
            comp.kind = "dummy"
        elif any(h in cls for h in NETWORK_HINTS):
            raise comp.where.error(f"unsupported: network component {comp.name!r} (class {comp.cls}); "
                                   "networks are priced by the levels' access energies here")
        elif any(h in cls for h in COMPUTE_HINTS) and "buffer" not in cls:
            comp.kind = "compute"
            if i != len(components) - 1:
                raise comp.where.error(f"unsupported: compute component {comp.name!r} is not the "
                                       "innermost component")
    if components[-1].kind != "compute":
        raise components[-1].where.error("the innermost component must be the compute unit "
                                         "(class intmac, fpmac, mac, ...)")
    if components[0].kind != "storage":
        raise components[0].where.error("the outermost component must be a storage level")


def _word_bits(attrs: dict, where: Where, default: int | None) -> int | None:
    for key in ("datawidth", "word-bits", "word_bits"):
        if key in attrs:
            return integer(attrs[key], where / "attributes" / key, "a positive number of bits", high=MAX_BITS)
    return default


def _dataspace_keeps(targets: list[dict], name: str, tensors: list[str] | None, where: Where):
    """The tensors a level may hold under its dataspace constraints (None: any)."""
    keeps = None
    for t in targets:
        if t.get("target") != name or t.get("type") not in ("dataspace", "bypass", "datatype"):
            continue
        tw = t.get("_where", where)
        keep = name_list(t.get("keep") or [], tw / "keep")
        bypass = name_list(t.get("bypass") or [], tw / "bypass")
        if tensors is None:
            if bypass:
                raise where.error(f"dataspace constraint on {name} bypasses tensors: read the problem "
                                  "with the architecture to know the others")
            keeps = keep
            continue
        for n in keep + bypass:
            if n not in tensors:
                raise where.error(f"dataspace constraint on {name} names {n!r}, not a data space "
                                  f"(data spaces: {', '.join(tensors)})")
        # Timeloop's front end bypasses what a keep-only constraint leaves unnamed
        keeps = [n for n in tensors if n not in bypass and (n in keep or bypass)]
    return keeps


def translate(arch_data: dict, where: Where, ert: dict | None, tensors: list[str] | None,
              extra_constraints: list[dict], notes: list[str], name: str) -> ArchImport:
    """Build this project's arch dict from a Timeloop `architecture` section; what is assumed
    or not read is appended to `notes` (clock, word size, energies, Accelergy-only attributes,
    the cycle rule bandwidths imply), in that order."""
    containers: dict[str, str | None] = {}
    components, top = flatten(arch_data, where, containers)
    _classify(components, where)
    targets = [c for comp in components for c in comp.constraints] + list(extra_constraints)
    ert = ert or {}
    clock = _clock(top, components, where, notes)
    word_bits = _word_bits(components[0].attributes, components[0].where, None)
    if word_bits is None:
        word_bits = 8
        notes.append(f"{where.file}: {components[0].name} gives no datawidth; words taken as 8 bits")
    ignored: set[str] = set()          # attributes only Accelergy reads, noted once for all
    chain = _chain(components[:-1], ert, word_bits, targets, tensors, notes, ignored)
    levels = chain.levels
    if levels[0].get("keeps") is not None:
        if tensors is not None and sorted(levels[0]["keeps"]) != sorted(tensors):
            raise components[0].where.error("unsupported: the outermost level must keep every data space")
        levels[0].pop("keeps")
    compute = components[-1]
    energy = _compute_energy(compute, ert, where, notes)
    ignored.update(set(compute.attributes) - ESTIMATION_ONLY)
    if not ert:
        notes.append(f"{where.file}: no ERT given: every access and MAC costs 0 pJ (pass ERT.yaml)")
    if ignored:
        notes.append(f"{where.file}: attributes read by Accelergy only, not by the cost model: "
                     f"{', '.join(sorted(ignored))}")
    data = {"name": name, "description": f"imported from Timeloop ({where.file}, v{shown(arch_data.get('version'))})",
            "clock": f"{clock:.6g} Hz", "levels": levels,
            "compute": {"name": compute.name, "instances": compute.instances,
                        "mesh": list(compute.mesh), "macs_per_cycle": 1, "energy": float(energy)}}
    limited = [lv["name"] for lv in levels
               if any(k in lv for k in ("bandwidth", "read_bandwidth", "write_bandwidth"))]
    if limited:
        # Timeloop's bandwidths come with Timeloop's cycle rule: traffic always overlaps compute
        # (this project's stage-aware rule would stall unbuffered levels on their own traffic)
        data["model"] = {"cycles": "timeloop"}
        notes.append(f"{where.file}: bandwidths of {', '.join(limited)} applied with Timeloop's cycle rule "
                     "(model: {cycles: timeloop}: traffic overlapped with compute)")
    return ArchImport(data, components, chain.fold, chain.folded, chain.spatial_target, chain.stages,
                      word_bits, targets, containers)


def _clock(top: dict, components: list[Component], where: Where, notes: list[str]) -> float:
    """Hz from `global_cycle_seconds` (the top level's, else the first component's that gives
    it); 1 GHz, noted, when none does."""
    seconds = top.get("global_cycle_seconds")
    if seconds is None:
        seconds = next((c.attributes["global_cycle_seconds"] for c in components
                        if "global_cycle_seconds" in c.attributes), None)
    if seconds is None:
        notes.append(f"{where.file}: no global_cycle_seconds; clock taken as 1 GHz (only seconds depend on it)")
        return 1e9
    # a period whose clock lies outside what the arch loader takes is refused here, where the
    # file says it (a zero period would divide by zero)
    return 1.0 / finite_number(seconds, where / "global_cycle_seconds", "a clock period in seconds",
                               low=1 / MAX_CLOCK, high=1 / MIN_CLOCK, spelled=True)


@dataclass(frozen=True)
class _Chain:
    """The storage chain translated: this project's level dicts, outermost first, and how
    Timeloop's names map onto them (the fields of `ArchImport` of the same names)."""

    levels: list[dict]
    fold: dict[str, str]
    folded: set[str]
    spatial_target: dict[str, str]
    stages: dict[str, int]


def _chain(storage: list[Component], ert: dict, word_bits: int, targets, tensors,
           notes: list[str], ignored: set[str]) -> _Chain:
    """Each storage component a level; a dummy fanout level with the mesh of the level above
    is folded into it (its spatial loops become that level's), any other stays a level that
    keeps nothing and costs nothing."""
    chain = _Chain([], {}, set(), {}, {})
    levels = chain.levels
    for comp in storage:
        if comp.kind == "dummy":
            if levels and tuple(levels[-1]["mesh"]) == comp.mesh:
                chain.fold[comp.name] = levels[-1]["name"]
                chain.folded.add(comp.name)
                chain.spatial_target[levels[-1]["name"]] = comp.name
                continue
            levels.append({"name": comp.name, "capacity": "1 B", "keeps": [],
                           "instances": comp.instances, "mesh": list(comp.mesh),
                           "description": "Timeloop dummy fanout level: holds nothing, costs nothing"})
            chain.fold[comp.name] = comp.name
            chain.stages[comp.name] = 1
            continue
        levels.append(_storage_level(comp, ert, word_bits, targets, tensors, notes, ignored))
        chain.fold[comp.name] = comp.name
        chain.stages[comp.name] = levels[-1].get("max_stages", 1)
    for lv in levels:
        chain.spatial_target.setdefault(lv["name"], lv["name"])
    return chain


def _compute_energy(compute: Component, ert: dict, where: Where, notes: list[str]) -> float:
    """pJ per MAC from the ERT's `compute` action (else mac_random / mac_reused, noted); 0
    without an ERT (an ERT without one is refused by ert.check_matches)."""
    cert = ert.get(compute.name, {})
    energy = cert.get("compute")
    if energy is None:
        energy = next((cert[k] for k in ("mac_random", "mac_reused") if k in cert), None)
        if energy is not None:
            notes.append(f"{where.file}: {compute.name}: no `compute` action in the ERT; took mac_random")
    if energy is None:
        energy = 0.0                  # no ERT given (an ERT lacking it is refused: ert.check_matches)
    return energy


def _storage_level(comp: Component, ert: dict, word_bits: int, targets, tensors,
                   notes: list[str], ignored: set[str]) -> dict:
    a, aw = comp.attributes, comp.where / "attributes"
    own_bits = _word_bits(a, comp.where, word_bits)
    cluster_key = "cluster-size" if "cluster-size" in a else "cluster_size"    # Timeloop's C++ spelling, the front end's
    cluster = integer(a.get(cluster_key, 1), aw / cluster_key, high=MAX_INSTANCES)
    width = a.get("width", a.get("memory_width"))
    if "block_size" in a or "block-size" in a:
        key = "block_size" if "block_size" in a else "block-size"
        block = integer(a[key], aw / key)
    elif width is not None:
        per_instance = number(width, aw / "width") / cluster
        # words per access, bounded as any count (a width of 1e308 bits is no vector)
        block = integer(max(1, int(per_instance // own_bits)), aw / "width", "a width of whole words")
    else:
        block = 1
    if "depth" in a or "memory_depth" in a:
        key = "depth" if "depth" in a else "memory_depth"
        words = number(a[key], aw / key) * block
    elif "entries" in a or "size" in a:
        key = "entries" if "entries" in a else "size"
        words = number(a[key], aw / key)
    elif "sizeKB" in a:
        words = number(a["sizeKB"], aw / "sizeKB") * 1024 * 8 / own_bits
    else:
        words = math.inf
    if a.get("allow_overbooking") is True:
        raise (aw / "allow_overbooking").error("unsupported: overbooked buffers are not modelled")
    if a.get("reduction_supported") is False:
        raise (aw / "reduction_supported").error("unsupported: every level here may take updates")
    stages = integer(a.get("multiple_buffering", 1), aw / "multiple_buffering",
                     "a whole multiple_buffering of at least 1 (fractional ones are unsupported)", high=MAX_STAGES)
    # a level whose words differ from the problem's (a 16-bit psum scratchpad under 8-bit
    # operands) keeps its own word: its capacity, traffic and bandwidths are counted in it
    own_bytes = own_bits / 8
    level = {"name": comp.name,
             "capacity": "unlimited" if math.isinf(words) else f"{words * own_bytes:g} B",
             "block_size": block, "instances": comp.instances, "mesh": list(comp.mesh)}
    if int(stages) > 1:
        level["max_stages"] = int(stages)
    energies = ert.get(comp.name)
    if energies is None:
        energies = {}                 # no ERT given (an ERT lacking it is refused: ert.check_matches)
    read = energies.get("read", 0.0)
    write = energies.get("write", 0.0)
    update = energies.get("update", write)
    leak = energies.get("leak", 0.0)
    if cluster > 1:
        # the ERT prices one access of the whole cluster; here energies are one instance's
        # share and `cluster_size` charges whole accesses per utilized cluster, as Timeloop does
        read, write, update = read / cluster, write / cluster, update / cluster
        level["cluster_size"] = cluster
    level["energy"] = {"read": read, "write": write, "update": update}
    if leak:
        level["leak"] = leak
    keeps = _dataspace_keeps(targets, comp.name, tensors, comp.where)
    if keeps is not None:
        level["keeps"] = keeps
    if own_bits != word_bits:
        level["word_bits"] = own_bits
    # Timeloop's bandwidths are words per cycle per instance; here bytes, in the level's words
    # (as capacities are counted)
    # (the deprecated `bandwidth` is, as Timeloop reads it, half for reads and half for writes)
    for key, ours, share in (("bandwidth", "read_bandwidth", 0.5), ("bandwidth", "write_bandwidth", 0.5),
                             ("read_bandwidth", "read_bandwidth", 1), ("write_bandwidth", "write_bandwidth", 1),
                             ("shared_bandwidth", "bandwidth", 1)):
        if key in a:
            words = number(a[key], aw / key)
            if words <= 0:
                raise (aw / key).error("expected a positive number of words per cycle")
            level[ours] = f"{words * share * own_bytes:g} B/cycle"
    for key in a:
        if key not in ESTIMATION_ONLY:
            ignored.add(key)
    return level

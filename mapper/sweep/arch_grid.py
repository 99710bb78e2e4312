"""Architecture grids: `mapper sweep ARCH --vary "PATH=GRID"` and a sweep file's
`{base: NAME, vary: {PATH: GRID, ...}}` derive architectures from a base's file, one per
combination of the values (the last path varying fastest).

A PATH names a numeric field of the base: `LEVEL.FIELD`, LEVEL a level's name or the compute
unit's (`compute`, or its own name such as `MAC`); `LEVEL.energy.read` (and `.write`,
`.update`; `LEVEL.energy` sets all three alike, as does `energy_per_byte`); `clock`;
`gpu.FIELD`; `technology.node_nm` (every `auto` area and energy follows it). A field the base leaves out (a bandwidth, a latency) may be varied too. GRID is
the sweep's grammar in the field's units (`arch_values`).

Each combination is written into a copy of the base's YAML dict and read by the loader
(`arch_from_dict`): a derived architecture is checked exactly as a file is, and the loader's
refusal is said at the flag or the sweep file's key of the change it follows from. It is named
by its changes, `toy[GlobalBuffer.capacity=32KiB]`; names are left out of a point's key
(`points`), so one identical to another, or to its base, is searched once.

Instances and mesh say one thing: a varied mesh sets the instances (its product), varied
instances set a one-row mesh ([n, 1]); varying both, or the instances of a 2-D mesh, they must
agree, as in a file.

Tied fields: a PATH of several paths joined by `+` (or `,`), `Register.mesh+MAC.mesh`, sets
each of them to the same value at once (a PE array whose registers and MACs grow together); the
paths must be of one kind. The derived architecture is named `tpu-v4i[Register.mesh+MAC.mesh=1024x256]`
(`changes_of` reads a name back into its changes).
"""
from __future__ import annotations

import copy
import dataclasses
import itertools
import math
import re
from dataclasses import dataclass
from types import MappingProxyType

from ..errors import SpecError, shown
from ..load import arch_from_dict
from ..spec import Arch
from ..units import Where
from ..validate import text
from .arch_values import field_values

MAX_ARCHS = 1_000        # derived architectures of one base: each is a sweep of its own
MAX_PATH = 300           # characters of a path
TIE = "+"                # joins tied paths (one value sets them all): `Register.mesh+MAC.mesh`
ENERGY_PARTS = ("read", "write", "update")
# the numeric keys of each part of an architecture file (load/arch.py) and their kinds
# (`arch_values`); "energies": a mapping of read, write and update energies
LEVEL_FIELDS = MappingProxyType({
    "capacity": "size", "bandwidth": "bandwidth", "read_bandwidth": "bandwidth", "write_bandwidth": "bandwidth",
    "block_size": "count", "energy": "energies", "energy_per_byte": "energies", "leak": "energy",
    "max_stages": "count", "instances": "count", "mesh": "mesh", "latency": "latency", "word_bits": "count",
    "cluster_size": "count", "area": "area"})
COMPUTE_FIELDS = MappingProxyType({"instances": "count", "mesh": "mesh", "macs_per_cycle": "count",
                                   "energy": "energy", "area": "area"})
# the node: `area: auto` and `energy: auto` then price every part at it (load/technology.py)
TECHNOLOGY_FIELDS = MappingProxyType({"node_nm": "count"})
GPU_FIELDS = MappingProxyType({"sms": "count", "smem_per_sm": "size", "registers_per_sm": "count",
                               "max_blocks_per_sm": "count", "max_threads_per_sm": "count"})


@dataclass(frozen=True)
class Vary:
    """One varied field as the user gave it: its path, its values unparsed, where it was given."""
    path: str
    grid: object
    where: Where


@dataclass(frozen=True)
class Field:
    """Where a path lands in an architecture's YAML dict: key paths (`energy`: three) and kind."""
    places: tuple[tuple, ...]
    kind: str


def vary_flags(flags: list[str], where: Where) -> tuple[Vary, ...]:
    """`--vary "GlobalBuffer.capacity=8MiB..256MiB:x2"`, repeatable, each path once."""
    out = []
    for flag in flags:
        path, eq, grid = flag.partition("=")
        if not eq or not path.strip() or not grid.strip():
            raise where.error(f"expected LEVEL.FIELD=VALUES, e.g. 'GlobalBuffer.capacity=8MiB..256MiB:x2', "
                              f"got {shown(flag)}")
        path = TIE.join(p.strip() for p in re.split(r"[+,]", path))       # tied paths: one spelling
        out.append(Vary(text(path, where, MAX_PATH), grid, where / path))
    return _once(out)


def vary_entry(raw, where: Where) -> tuple[Vary, ...]:
    """A sweep file's `vary:` mapping of PATH -> values."""
    if not isinstance(raw, dict) or not raw:
        raise where.error("expected a mapping of LEVEL.FIELD -> values, "
                          "e.g. {GlobalBuffer.capacity: '8MiB..256MiB:x2'}")
    return _once([Vary(TIE.join(p.strip() for p in re.split(r"[+,]", text(path, where, MAX_PATH))), grid, where / path)
                  for path, grid in raw.items()])


def _once(varies: list[Vary]) -> tuple[Vary, ...]:
    paths = [v.path for v in varies]
    for i, path in enumerate(paths):
        if paths.index(path) != i:
            raise varies[i].where.error("this path is varied twice")
    return tuple(varies)


def derived_archs(data: dict, base: Arch, varies: tuple[Vary, ...], where: Where) -> tuple[Arch, ...]:
    """The architectures `varies` derive from `base` (read from `data`, its file's dict); `where`
    names the whole grid (the flag, or the sweep file's `vary` key) for errors about it all."""
    fields = [_field(data, base.name, vary) for vary in varies]
    for i, field in enumerate(fields):
        other = next((varies[j] for j in range(i) if set(fields[j].places) & set(field.places)), None)
        if other is not None:
            raise varies[i].where.error(f"sets the same field as {other.path!r}")
    grids = [field_values(f.kind, v.grid, v.where, base.clock_hz) for f, v in zip(fields, varies)]
    count = math.prod(len(g) for g in grids)
    if count > MAX_ARCHS:
        raise where.error(f"the grid derives {count:,} architectures from {base.name} "
                          f"({' x '.join(str(len(g)) for g in grids)}), above the limit of {MAX_ARCHS:,}")
    out = []
    for combo in itertools.product(*grids):
        name = f"{base.name}[{','.join(f'{v.path}={label}' for v, (label, _) in zip(varies, combo))}]"
        changed = _changed(data, fields, [value for _, value in combo])
        try:
            arch = arch_from_dict(changed, Where(name))
        except SpecError as exc:
            raise _blamed(exc, name, fields, varies, where) from None
        out.append(dataclasses.replace(arch, name=name))
    return tuple(out)


def _field(data: dict, base: str, vary: Vary) -> Field:
    """The places of `vary.path` in the base's dict: one field, or tied fields of one kind."""
    paths = vary.path.split(TIE)
    fields = [_one_field(data, base, path, vary) for path in paths]
    kinds = {f.kind for f in fields}
    if len(kinds) > 1:
        raise vary.where.error(f"tied paths set one value, so they must be of one kind: "
                               f"{', '.join(f'{p} ({f.kind})' for p, f in zip(paths, fields))}")
    if len(set(paths)) != len(paths):
        raise vary.where.error("a tied path names the same field twice")
    return Field(tuple(place for f in fields for place in f.places), fields[0].kind)


def _one_field(data: dict, base: str, path: str, vary: Vary) -> Field:
    """The place of one path in the base's dict (levels by name, longest name first, since a
    level's name may hold a dot)."""
    if path == "clock":
        return Field((("clock",),), "frequency")
    levels = [(lv["name"], ("levels", i)) for i, lv in enumerate(data["levels"])]
    compute = data["compute"].get("name", "MAC")
    owners = levels + [("compute", ("compute",)), (compute, ("compute",))]
    owners += [("gpu", ("gpu",))] if data.get("gpu") is not None else []
    owners += [("technology", ("technology",))]
    tables = {"levels": LEVEL_FIELDS, "compute": COMPUTE_FIELDS, "gpu": GPU_FIELDS, "technology": TECHNOLOGY_FIELDS}
    for owner, prefix in sorted(owners, key=lambda o: -len(o[0])):
        if path.startswith(owner + "."):
            return _owned(prefix, path[len(owner) + 1:], tables[prefix[0]], owner, vary, path)
    if path.startswith("gpu."):
        raise vary.where.error(f"{_which(path, vary)}{base} has no `gpu:` section to vary")
    gpu = ", gpu.FIELD" if data.get("gpu") is not None else ""
    raise vary.where.error(f"{_which(path, vary)}no level of {base} named here: a path is LEVEL.FIELD, LEVEL one of "
                           f"{', '.join(n for n, _ in levels)} or the compute unit ({compute}, or compute); "
                           f"or clock{gpu}, technology.node_nm")


def _which(path: str, vary: Vary) -> str:
    """Which of tied paths an error is about (a lone path is said by the error's key already)."""
    return f"{path}: " if TIE in vary.path else ""


def _owned(prefix: tuple, rest: str, table, owner: str, vary: Vary, path: str) -> Field:
    head, _, part = rest.partition(".")
    kind = table.get(head)
    if kind is None or (part and kind != "energies"):
        raise vary.where.error(f"{_which(path, vary)}{owner} has no field {rest!r} to vary; its numeric fields: "
                               f"{', '.join(table)}")
    if kind != "energies":
        return Field((prefix + (head,),), kind)
    if part and part not in ENERGY_PARTS:
        raise vary.where.error(f"{_which(path, vary)}expected {owner}.{head}.read, .write or .update (or {owner}.{head}: all three)")
    return Field(tuple(prefix + (head, p) for p in ((part,) if part else ENERGY_PARTS)), "energy")


def _changed(data: dict, fields: list[Field], values: list) -> dict:
    """A copy of `data` with each field's places set to its value (the base is left as it is)."""
    out = copy.deepcopy(data)
    varied = {place for field in fields for place in field.places}
    for field, value in zip(fields, values):
        for place in field.places:
            node = out
            for key in place[:-1]:
                if isinstance(key, str) and node.get(key) is None:
                    node[key] = {}                  # an energy mapping the base leaves out
                node = node[key]
            node[place[-1]] = copy.deepcopy(value)
            _follow(node, place, varied)
    return out


def _follow(node: dict, place: tuple, varied: set) -> None:
    """Instances and mesh of one level (or the compute unit): the one varied alone carries the
    other, since the loader requires them to agree."""
    owner, key = place[:-1], place[-1]
    if key == "mesh" and owner + ("instances",) not in varied:
        node.pop("instances", None)
    mesh = node.get("mesh")
    one_row = isinstance(mesh, list) and len(mesh) == 2 and mesh[1] == 1
    if key == "instances" and owner + ("mesh",) not in varied and one_row:
        node.pop("mesh")


def _blamed(exc: SpecError, name: str, fields: list[Field], varies: tuple[Vary, ...], where: Where) -> SpecError:
    """The loader's refusal of a derived architecture, said at the change it follows from: the
    varied field itself, else a change to the same level, else the one change, else the whole
    grid."""
    if exc.where != name:
        return exc

    def within(prefix: tuple) -> bool:
        path = _loader_path(prefix)
        return bool(path) and (exc.path == path or exc.path.startswith((path + ".", path + "[")))

    exact = [v for f, v in zip(fields, varies) if any(within(p) for p in f.places)]
    owner = [v for f, v in zip(fields, varies) if any(within(p[:-1]) for p in f.places)]
    if exact:
        return exact[0].where.error(f"{name}: {exc.expected}")
    blamed = owner[0].where if owner else varies[0].where if len(varies) == 1 else where
    return blamed.error(f"{name}: {exc.path}: {exc.expected}")


def _loader_path(place: tuple) -> str:
    """A key path as the loader's errors write it (`levels[1].capacity`)."""
    where = Where("")
    for key in place:
        where = where / key
    return where.path


def changes_of(name: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """A derived architecture's name read back: its base and its (path, label) changes, in the
    grid's order; a name that is no derived one is its own base, without changes."""
    match = re.fullmatch(r"(.+?)\[(.+)\]", name)
    if not match:
        return name, ()
    parts = [part.rpartition("=") for part in match.group(2).split(",")]
    if not all(eq and path for path, eq, _ in parts):
        return name, ()
    return match.group(1), tuple((path, label) for path, _, label in parts)

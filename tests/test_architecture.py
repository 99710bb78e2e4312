"""The house rules of the package, read off its source: the layering (no import from a lower
layer to a higher one, no import circle, imports for annotations included), no module-level
mutable state, no file over 500 lines, no class over 250 and no function over 80 (docs/SEARCH.md,
"Layers")."""
from __future__ import annotations

import ast
import dataclasses
import enum
import importlib
import inspect
import pathlib
import re
import types

import networkx as nx
import numpy as np

import mapper

PACKAGE = pathlib.Path(mapper.__file__).parent

# lowest first; a module may import from its own layer or those before it (and, inside a layer,
# the graph of imports has no circle). A module belongs to the longest prefix naming it.
LAYERS = [
    ["mapper.errors", "mapper.limits", "mapper.dtypes", "mapper.memory", "mapper.units", "mapper.validate", "mapper.factors", "mapper.tiles",
     "mapper.flags", "mapper.lifetime", "mapper.rows",
     "mapper.components"],
    ["mapper.einsum", "mapper.spec", "mapper.constraints", "mapper.orders", "mapper.roles"],
    ["mapper.opgraph", "mapper.cta_pair"],
    ["mapper.tails", "mapper.mma"],
    ["mapper.mapping", "mapper.rescale", "mapper.random_mappings"],
    ["mapper.bind", "mapper.load", "mapper.timeloop", "mapper.depths"],
    ["mapper.cost"],
    ["mapper.emit.common"], ["mapper.emit.triton_forms", "mapper.emit.triton", "mapper.emit.cutlass", "mapper.emit.mlir", "mapper.emit.chain"],
    ["mapper.emit.from_config"],
    ["mapper.mapspace"],
    # the search, in the order of search/__init__.py's docstring
    ["mapper.search.context"], ["mapper.search.objective"], ["mapper.search.events"], ["mapper.search.result"],
    ["mapper.search.factor_rows"], ["mapper.search.tree"], ["mapper.search.fitting_children"], ["mapper.search.warm"],
    ["mapper.search.bounds.energy"], ["mapper.search.bounds.refetch"], ["mapper.search.bounds.operand"],
    ["mapper.search.bounds.window"], ["mapper.search.bounds.cells"], ["mapper.search.bounds.cell_prices"],
    ["mapper.search.bounds.candidates"], ["mapper.search.bounds.innermost"], ["mapper.search.bounds.latency"], ["mapper.search.bounds.grid"],
    ["mapper.search.bounds.spread"], ["mapper.search.bounds.split_floor"], ["mapper.search.bounds.split_chain"],
    ["mapper.search.bounds.link"],
    ["mapper.search.bounds.node"], ["mapper.search.bounds"],
    ["mapper.search.exhaustive", "mapper.search.random_search", "mapper.search.greedy"],
    ["mapper.search.joint.settings"], ["mapper.search.joint.parallel"], ["mapper.search.joint.synced"],
    ["mapper.search.joint.neighbourhood"], ["mapper.search.joint.view"], ["mapper.search.joint.pacing"], ["mapper.search.joint.deferred"],
    ["mapper.search.joint.parts"], ["mapper.search.joint.order_free"], ["mapper.search.joint.copies_cut"], ["mapper.search.joint.cell_cut"], ["mapper.search.joint.cut"],
    ["mapper.search.joint.polish"], ["mapper.search.joint.pricing"], ["mapper.search.joint.images"], ["mapper.search.joint.across"], ["mapper.search.joint.walk"], ["mapper.search.joint.workers"],
    ["mapper.search.joint.dives"], ["mapper.search.joint.coarse"], ["mapper.search.joint.cpsat"],
    ["mapper.search.joint.incumbents"], ["mapper.search.joint.strategy"], ["mapper.search.joint"],
    ["mapper.search"],
    ["mapper.report", "mapper.compare", "mapper.explain", "mapper.area"],
    ["mapper.fusion"],
    ["mapper.inputs"],
    ["mapper.emit.command", "mapper.emit.chain_command", "mapper.emit"],
    # the model format (under sweep: sweeps expand models), then the importer that writes it
    ["mapper.sweep.expr"], ["mapper.sweep.chains"], ["mapper.sweep.models"],
    ["mapper.model_import.onnx_graph", "mapper.model_import.atoms"], ["mapper.model_import.ops"],
    ["mapper.model_import.einsums"], ["mapper.model_import.lowered"],
    ["mapper.model_import.contractions", "mapper.model_import.reductions"], ["mapper.model_import.lower"],
    ["mapper.model_import.patterns"], ["mapper.model_import.chains"], ["mapper.model_import.structure"],
    ["mapper.model_import.model_file"], ["mapper.model_import.summary"], ["mapper.model_import.torch_source"],
    ["mapper.model_import.api"], ["mapper.model_import.cache"], ["mapper.model_import.command"],
    ["mapper.model_import"],
    # the size grammar, then the arch grid's values and the architectures it derives
    ["mapper.sweep.grid"], ["mapper.sweep.arch_values"], ["mapper.sweep.arch_grid"], ["mapper.sweep.pareto"],
    ["mapper.sweep"],
    ["mapper.api", "mapper.cli", "mapper.__main__", "mapper"],
]
MAX_FILE_LINES, MAX_CLASS_LINES, MAX_FUNCTION_LINES = 500, 250, 80


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ("mapper",) + path.relative_to(PACKAGE).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def _layer(module: str) -> int:
    best, layer = -1, None
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, layer = len(prefix), i
    assert layer is not None, f"{module} is in no layer of {__file__}"
    return layer


def _imports(module: str, path: pathlib.Path) -> set[str]:
    """The package's modules `module` imports, anywhere in it (functions included, and those
    under `if TYPE_CHECKING:`: an annotation naming a class of a higher layer is a hand-off
    that reaches up as much as a call does)."""
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            # `from X import y`: the module X.y where there is one, else X itself
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        else:
            continue
        out |= {name for name in names if name in MODULES and name != module}
    return out


def test_every_import_goes_down_the_layers_and_none_closes_a_circle():
    graph = nx.DiGraph()
    upward = []
    for module, path in MODULES.items():
        graph.add_node(module)
        for target in _imports(module, path):
            graph.add_edge(module, target)
            if _layer(target) > _layer(module):
                upward.append(f"{module} -> {target}")
    assert not upward, "imports from a lower layer to a higher one:\n" + "\n".join(upward)
    circles = list(nx.simple_cycles(graph))
    assert not circles, f"import circles: {circles[:5]}"


def test_an_import_only_for_annotations_counts(tmp_path):
    # planted: the cuts typing the whole walk, as they once did (a circle through cut -> walk)
    planted = tmp_path / "cut.py"
    planted.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .walk import Walk\n")
    imported = _imports("mapper.search.joint.cut", planted)
    assert imported == {"mapper.search.joint.walk"}
    assert _layer("mapper.search.joint.walk") > _layer("mapper.search.joint.cut")     # an arrow up


def test_the_layering_reaches_every_module():
    # the check above means something only if the layers were not read off the imports
    assert len(MODULES) > 80
    assert {_layer(m) for m in MODULES} == set(range(len(LAYERS)))


def test_no_file_or_function_is_too_long():
    long_files, long_functions = [], []
    for module, path in MODULES.items():
        text = path.read_text()
        if len(text.splitlines()) > MAX_FILE_LINES:
            long_files.append(f"{path.relative_to(PACKAGE)}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_functions.append(f"{path.relative_to(PACKAGE)}: {node.name} ({length} lines)")
    assert not long_files and not long_functions, long_files + long_functions


def _long_classes(source: str, name: str) -> list[str]:
    """Each class of `source` (nested ones included) over MAX_CLASS_LINES lines, from its
    `class` line to its last."""
    return [f"{name}: {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES]


def test_no_class_is_too_long():
    """A class past 250 lines holds more than one job: it is split along its jobs (the innermost
    bound's cells, prices and candidates; the walk's polish, pricing and order across parts)."""
    found = [line for path in MODULES.values() for line in _long_classes(path.read_text(), str(path.relative_to(PACKAGE)))]
    assert not found, found
    # planted: a class of 251 lines, flagged, and one of 250 inside a function, not
    assert _long_classes("class Planted:\n" + "    x = 1\n" * 250, "planted.py") == ["planted.py: Planted (251 lines)"]
    assert not _long_classes("def f():\n    class Fits:\n" + "        x = 1\n" * 249, "fits.py")
    assert _long_classes("def f():\n    class Nested:\n" + "        x = 1\n" * 250, "nested.py")


CAPACITY = re.compile(r"\bcapacity(_bytes)?\b")      # a level's capacity, not a traffic bound's name
# comparisons of a capacity with something other than a used size, with why
NOT_A_FIT = {"fusion/capacity_report.py": "two capacities: where a grouping was chosen from, against the curve's first"}


def _capacity_comparisons(source: str, name: str) -> list[str]:
    """Each `<`, `<=`, `>`, `>=` in `source` with a capacity on one side and, on the other,
    neither a constant (a validation) nor another capacity."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in node.ops):
            sides = [node.left, *node.comparators]
            named = [bool(CAPACITY.search(ast.unparse(side))) for side in sides]
            if sum(named) == 1 and not any(isinstance(side, ast.Constant) for side in sides):
                out.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    return out


def test_capacity_is_compared_in_tiles_alone():
    """Whether bytes fit a level is one rule (`tiles.within`), so that a change to it (a
    cluster's shared memory, a reserve) is made once."""
    found = []
    for module, path in MODULES.items():
        name = str(path.relative_to(PACKAGE))
        if module != "mapper.tiles" and name not in NOT_A_FIT:
            found += _capacity_comparisons(path.read_text(), name)
    assert not found, found
    # planted: the check a pruning step once made itself
    assert _capacity_comparisons("ok &= used * stages <= level.capacity\n", "planted.py")


PRICES = re.compile(r"\.(byte_)?energy_(read|write|update)\b")
# where a level's prices per access may be read: the rule itself, where they are made, and the
# area report, which prints them
PRICED_IN = {"mapper.cost.energy", "mapper.spec", "mapper.area"}


def test_access_energy_is_one_function():
    """The cost model, its bounds, CP-SAT's weights and fusion price an access through
    `cost.energy.access_energy` (block rounding, per-byte energy): nobody else reads a level's
    prices per access."""
    readers = sorted(module for module, path in MODULES.items()
                     if module not in PRICED_IN and not module.startswith("mapper.load")
                     and PRICES.search(path.read_text()))
    assert not readers, readers
    assert PRICES.search("blocks * level.energy_read + count * level.byte_energy_read")    # what it finds


# read-only or immutable values a module may hold; anything else at module level is state
IMMUTABLE = (type(None), bool, int, float, complex, str, bytes, tuple, frozenset, range,
             types.MappingProxyType, re.Pattern, enum.Enum, np.dtype, np.generic)


def _state(value) -> bool:
    """Whether a module-level value is mutable state (functions, classes, modules and frozen
    dataclass instances are not; a process-wide cache on a function is)."""
    if inspect.ismodule(value) or inspect.isclass(value):
        return False
    if hasattr(value, "cache_parameters"):          # functools.lru_cache: a bounded memo of a pure
        return value.cache_parameters()["maxsize"] is None      # function is not state
    if inspect.isfunction(value) or inspect.isbuiltin(value) or isinstance(value, types.MethodType):
        return False
    if isinstance(value, IMMUTABLE):
        return isinstance(value, tuple) and any(_state(item) for item in value)
    if dataclasses.is_dataclass(value):
        return not type(value).__dataclass_params__.frozen
    if type(value).__module__ == "typing" or isinstance(value, types.GenericAlias):    # annotations' aliases
        return False
    return True


def _defined(path: pathlib.Path) -> set[str]:
    """Names a module binds itself at its top level (assignments, functions, classes), not
    those it imports."""
    out = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out |= {n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)}
    return out


def test_no_module_holds_mutable_state():
    held = []
    for name, path in MODULES.items():
        if name == "mapper.__main__":               # importing it runs the command
            continue
        module = importlib.import_module(name)
        for attribute in sorted(_defined(path) - {"__all__"}):
            if _state(getattr(module, attribute)):
                held.append(f"{name}.{attribute}: {type(getattr(module, attribute)).__name__}")
    assert not held, "module-level mutable state:\n" + "\n".join(held)


def _documented_layers() -> list[list[str]]:
    """docs/SEARCH.md's layer table: each row's modules, as full names. A row lists names in
    backticks; `.x` after `a.b.c` is `a.b.x`, `pkg/` is the package `pkg`."""
    text = (PACKAGE.parent / "docs" / "SEARCH.md").read_text()
    table = text.split("| layer | modules |", 1)[1].split("\n\n", 1)[0]
    rows = []
    for line in table.splitlines()[2:]:
        names, last = [], None
        for name in re.findall(r"`([A-Za-z_.][\w./]*)`", line.split("|")[2]):
            if name.startswith(".") and last:
                name = last.rsplit(".", 1)[0] + name
            name = name.rstrip("/").replace("/", ".")
            last = name
            names.append(name if name == "mapper" else "mapper." + name)
        rows.append(names)
    return rows


def test_the_documented_layers_are_the_layers_checked():
    """docs/SEARCH.md's table names every layer prefix of LAYERS, in an order that never goes
    down, and nothing else: the table cannot drift from what this test enforces."""
    documented = _documented_layers()
    names = [name for row in documented for name in row]
    checked = {prefix for prefixes in LAYERS for prefix in prefixes}
    assert set(names) == checked, (sorted(checked - set(names)), sorted(set(names) - checked))
    index = {prefix: i for i, prefixes in enumerate(LAYERS) for prefix in prefixes}
    order = [index[name] for name in names]
    assert order == sorted(order), "the table lists the layers out of order"

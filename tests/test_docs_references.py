"""The docs name modules, classes and functions; each name must still exist in the code.

Three kinds of reference are read from docs/*.md and README.md, all in backticks: a file
(`fusion/run.py`, `tests/brute_force.py`), an attribute of a class of the package
(`Walk.chunk_rows`, `Mapspace.dim_tables`: inherited members and fields count), and a call of a
module's function (`tiles.level_spans(...)`). A rename that leaves the docs behind fails here.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import sys
from pathlib import Path

import mapper

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
FILE = re.compile(r"`((?:[\w.-]+/)*[\w-]+\.py)(?::\w+)?`")
MEMBER = re.compile(r"`([A-Za-z_]\w*)\.([A-Za-z_]\w*)(\(|`)")
OTHER_PROJECTS = {"triton.Config"}      # Triton's own API, named where the emitted kernel uses it


def _modules() -> dict:
    """Every module of the package by its last name (several may share one)."""
    found: dict = {}
    for info in pkgutil.walk_packages(mapper.__path__, "mapper."):
        if info.name.endswith("__main__"):      # importing it runs the command line
            continue
        module = importlib.import_module(info.name)
        found.setdefault(info.name.rsplit(".", 1)[-1], []).append(module)
    return found


def _classes(modules: dict) -> dict:
    """Every class defined in the package, by name."""
    return {cls.__name__: cls for group in modules.values() for module in group
            for cls in vars(module).values()
            if inspect.isclass(cls) and cls.__module__ == module.__name__}


def _stored(cls) -> set:
    """Attributes set on instances (`self.x = ...`) in the class's own and its bases' source."""
    names = set()
    for klass in cls.__mro__:
        if klass.__module__.startswith("mapper"):
            for node in ast.walk(ast.parse(inspect.getsource(klass).lstrip())):
                if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    names.add(node.attr)
    return names


def _references():
    for doc in DOCS:
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            yield doc.relative_to(ROOT), number, line


def test_every_file_the_docs_name_exists():
    files = [p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*.py") if ".git" not in p.parts]
    missing = [f"{doc}:{n}: {m.group(1)}" for doc, n, line in _references() for m in FILE.finditer(line)
               if not any(f == m.group(1) or f.endswith("/" + m.group(1)) for f in files)]
    assert not missing, "the docs name files that do not exist:\n" + "\n".join(missing)


def test_every_class_member_and_function_the_docs_name_exists():
    modules = _modules()
    classes = _classes(modules)
    missing = []
    for doc, number, line in _references():
        for m in MEMBER.finditer(line):
            owner, name, call = m.groups()
            if owner in classes:
                cls = classes[owner]
                fields = getattr(cls, "__dataclass_fields__", {})
                if not (hasattr(cls, name) or name in fields or name in _stored(cls)):
                    missing.append(f"{doc}:{number}: {owner}.{name}")
            elif (owner in modules and call == "(" and f"{owner}.{name}" not in OTHER_PROJECTS
                  and not any(hasattr(mod, name) or any(hasattr(c, name) for c in vars(mod).values()
                                                        if inspect.isclass(c)) for mod in modules[owner])):
                # a module's function, or a method called on an instance of one of its classes
                missing.append(f"{doc}:{number}: {owner}.{name}(")
    assert not missing, "the docs name members that do not exist:\n" + "\n".join(missing)


def test_the_check_fails_on_a_planted_rename(tmp_path, monkeypatch):
    """The checks above can fail: a doc naming a member and a file that are gone is caught."""
    planted = tmp_path / "PLANTED.md"
    planted.write_text("`Mapspace.no_such_member` and `tiles.no_such_rule(...)` in `search/no_such.py`\n")
    monkeypatch.setattr(sys.modules[__name__], "DOCS", [planted])
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    for check in (test_every_file_the_docs_name_exists, test_every_class_member_and_function_the_docs_name_exists):
        try:
            check()
        except AssertionError as exc:
            assert "no_such" in str(exc)
        else:
            raise AssertionError(f"{check.__name__} passed on a planted rename")

"""Reading a spec file safely, and finding the bundled presets.

A spec is untrusted text: `read_yaml` refuses files above MAX_FILE_BYTES, text that is not
UTF-8, YAML nested deeper than MAX_YAML_DEPTH or expanding (aliases followed) to more than
MAX_YAML_NODES values, a key given twice in one mapping, and any python tag; each refusal is a
`SpecError` naming the file (and the line where the parser knows it). The Timeloop reader
(`timeloop.yamlio`) builds on the same loader and shape check.
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml

from ..errors import SpecError, shown
from ..limits import MAX_FILE_BYTES, MAX_INT_LITERAL, MAX_YAML_DEPTH, MAX_YAML_NODES

PRESET_KINDS = ("archs", "workloads", "constraints", "mappings", "models")    # (constraints: --mapspace)


def preset_dirs(kind: str) -> list[Path]:
    """Where presets of a kind live: the checkout's top-level folder (a source tree), and the
    package data `mapper/presets/<kind>` of an installed wheel, found through importlib.resources."""
    checkout = Path(__file__).resolve().parents[2] / kind       # mapper/load/files.py -> the checkout
    dirs = [checkout] if (checkout.parent / "pyproject.toml").is_file() and checkout.is_dir() else []
    installed = resources.files("mapper").joinpath("presets", kind)     # wheels unpack as files
    return dirs + ([Path(str(installed))] if installed.is_dir() else [])


def preset_names(kind: str) -> list[str]:
    return sorted({p.stem for d in preset_dirs(kind) for p in d.glob("*.yaml")})


STDIN = "-"             # a spec given as `-` is read from standard input (`mapper evaluate ARCH WL -`)


def shown_name(path: Path) -> str:
    """How errors name a spec's source: its path, or `<stdin>`."""
    return "<stdin>" if str(path) == STDIN else str(path)


def resolve(kind: str, name_or_path: str | Path) -> Path:
    """A path to an existing file, the name of a bundled preset of this kind, or `-` (standard
    input, which `read_yaml` reads)."""
    if str(name_or_path) == STDIN:
        return Path(STDIN)
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


def spec_data(kind: str, spec) -> tuple[object, str]:
    """What a loader reads for `spec`: a preset name or a file's path (str or Path), read
    safely, or the dict such a file holds (checked as a file is, its errors naming
    `<KIND dict>`). Returns (data, the name errors give it); a TypeError for anything else."""
    if isinstance(spec, dict):
        return spec, f"<{kind[:-1]} dict>"
    if isinstance(spec, (str, Path)):
        path = resolve(kind, spec)
        return read_yaml(path), shown_name(path)
    raise TypeError(f"expected a {kind[:-1]} preset name, a YAML file's path or a dict, got "
                    f"{type(spec).__name__}")


# libyaml's parser where PyYAML was built with it: ten times faster than the pure-Python one
# (a 140 KiB op graph took 2 s to read, past a short time limit, before anything ran)
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class StrictLoader(SAFE_LOADER):
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
                raise DuplicateKey(key, key_node.start_mark)
        return super().construct_mapping(node, deep)

    def construct_yaml_int(self, node):
        # Refused before converting: every limit is far below 100 characters of digits, and a
        # hex, octal or sexagesimal literal, which Python's 4,300-digit limit does not cover,
        # would make an int no message can print (or, sexagesimal, take minutes to build)
        if len(node.value) > MAX_INT_LITERAL:
            raise yaml.constructor.ConstructorError(
                None, None, f"an integer written with {len(node.value):,} characters, above the limit "
                f"of {MAX_INT_LITERAL} this tool reads", node.start_mark)
        return super().construct_yaml_int(node)


StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_yaml_int)


class DuplicateKey(Exception):
    def __init__(self, key, mark):
        self.key, self.mark = key, mark


def check_shape(text: str, path: Path) -> None:
    """Nesting depth and expanded size from the parser's events (no recursion, nothing built),
    so deep nesting and alias bombs are refused before the composer sees them."""
    depth, stack, anchors = 0, [], {}
    for event in yaml.parse(text, Loader=SAFE_LOADER):
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


def _read_bytes(path: Path) -> bytes:
    if str(path) == STDIN:
        import sys
        data = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
    else:
        if path.stat().st_size > MAX_FILE_BYTES:
            data = b"x" * (MAX_FILE_BYTES + 1)
        else:
            data = path.read_bytes()
    if len(data) > MAX_FILE_BYTES:
        raise SpecError(shown_name(path), "", f"file larger than {MAX_FILE_BYTES:,} bytes (the limit for a spec)")
    return data


def read_yaml(path: Path):
    """The YAML document of a spec file, or of standard input for `-`, read safely."""
    name = shown_name(path)
    try:
        text = _read_bytes(path).decode("utf-8")
    except OSError as exc:
        raise SpecError(name, "", f"cannot read file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise SpecError(name, "", f"not a UTF-8 text file (byte {exc.start})") from None
    try:
        check_shape(text, Path(name))
        return yaml.load(text, Loader=StrictLoader)
    except DuplicateKey as exc:
        raise SpecError(name, f"line {exc.mark.line + 1}",
                        f"key {shown(exc.key)} appears twice in one mapping (YAML would keep the "
                        "last silently)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}" if mark else ""
        raise SpecError(name, line, f"invalid YAML ({getattr(exc, 'problem', None) or exc})") from None

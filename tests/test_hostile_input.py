"""Hostile input: every bad spec ends in one line naming the file, exit status 2, in time.

Property-based (hypothesis): valid architecture, workload, mapping and mapspace files are
mutated at a random key path (wrong types, missing and unknown keys, zero, negative, 2^64,
non-finite and non-integer numbers, digits `int()` refuses, unit garbage, unicode and very long
strings, duplicate names), or replaced whole (empty, binary, not a mapping, deep nesting, alias
bombs, python tags, duplicate keys, integers of thousands of hex digits), and einsums are
written from a garbage alphabet. So are the other surfaces' files: op graphs (`fuse`), a GEMM's
mapping emitted by every backend, Triton configs (`evaluate --from-triton`), sweep files naming
a workload and a model beside them, model files (`sweep --model`) and Timeloop's architecture,
problem, mapping and ERT files (`import-timeloop`, `evaluate --ert`). Each is run through the
CLI's entry function in-process (fast) under a time limit. The property: either success (with
--json, strict JSON on stdout: no NaN, no Infinity), or exit status 2 with exactly one stderr
line `mapper: error: FILE: ...` naming one of the input files (or a sweep's exit status 1 with
its points stored with their reasons, none an exception); never a traceback, a Python warning
or a hang.

The default run tries about 190 inputs, the slow run (`-m slow`) about 900; set HOSTILE_EXAMPLES=N
to run N per test (the larger run by hand; scripts/fuzz_cli.py runs thousands through every command).
"""
from __future__ import annotations

import contextlib
import functools
import copy
import itertools
import io
import json
import os
import re
import signal
import sqlite3
import tempfile
import warnings
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck
from hypothesis import strategies as st

from mapper.cli import main
from scaled import quick_and_full
from script_modules import script_module

FUZZ = script_module("fuzz_cases")      # key paths into a document, and writing one (as scripts/fuzz_cli.py)
EXAMPLES = int(os.environ.get("HOSTILE_EXAMPLES", "0"))
TIME_LIMIT_S = 20           # per input: far above what a refusal takes (milliseconds)
TRIED = {"inputs": 0}
# a valid spec may still leave no mapping, a space too large for exhaustive search, or greedy's
# top-down descent at a dead end where other strategies find a mapping (it says so)
NOT_ABOUT_A_FILE = (r"^mapper: error: (op [^:]*: no mapping: )?(no mapping of .* fits|exhaustive search refuses"
                    r"|\w+ search found no valid|the search.s budget|greedy: after fixing .* no choice at level)")


def _scaled(quick: int, full: int, *given_args, **given_kwargs):
    """`quick` inputs in the default run, `full` in the slow run (`tests/scaled.py`);
    HOSTILE_EXAMPLES=N runs N in both, drawn at random instead of derandomized. Every drawn
    input must reach the CLI (`_reaches_the_cli`)."""
    scaled = quick_and_full(EXAMPLES or quick, EXAMPLES or full, *given_args, **given_kwargs,
                            hypothesis_settings={"derandomize": not EXAMPLES,
                                                 "suppress_health_check": list(HealthCheck), "database": None})
    return lambda body: scaled(_reaches_the_cli(body))


def _reaches_the_cli(body):
    """The body, failing where a drawn input never reached `run_cli` (a body that returns
    early would pass without testing anything); counted per input, in the process that runs
    it, so it holds under pytest-xdist too."""
    @functools.wraps(body)
    def counted(*args, **kwargs):
        before = TRIED["inputs"]
        body(*args, **kwargs)
        assert TRIED["inputs"] > before, f"{body.__name__}: a drawn input never reached the CLI"
    return counted


ARCH = {
    "name": "toy", "clock": "1 GHz",
    "levels": [
        {"name": "DRAM", "capacity": "unlimited", "bandwidth": "64 B/cycle", "block_size": 8,
         "energy": {"read": "512 pJ", "write": "512 pJ", "update": "512 pJ"}, "max_stages": 2},
        {"name": "GlobalBuffer", "capacity": "64 KiB", "bandwidth": "64 B/cycle", "block_size": 8,
         "energy": {"read": "16 pJ", "write": "16 pJ", "update": "16 pJ"}, "max_stages": 2,
         "keeps": ["A", "B", "Z"]},
        {"name": "RegisterFile", "capacity": "64 B", "energy": {"read": 0.5, "write": 0.5, "update": 0.5},
         "instances": 256, "mesh": [16, 16]},
    ],
    "compute": {"name": "MAC", "instances": 256, "mesh": [16, 16], "macs_per_cycle": 1, "energy": "1 pJ",
                "native_shape": {"m": 1, "n": 1, "k": 1}},
}
WORKLOAD = {"name": "gemm-32", "einsum": "Z[m,n] += A[m,k] * B[k,n]", "sizes": {"m": 32, "n": 32, "k": 32},
            "dtype": "int8", "dtypes": {"Z": "int32"}}
MAPPING = {"arch": "toy", "workload": "gemm-32", "padded": False, "mapping": [
    {"level": "DRAM", "loops": [{"dim": "m", "bound": 2}]},
    {"level": "GlobalBuffer", "loops": [{"dim": "k", "bound": 4}, {"dim": "n", "bound": 2}],
     "spatial": [{"dim": "m", "bound": 16, "axis": "x"}, {"dim": "n", "bound": 16, "axis": "y"}],
     "keep": ["A", "B", "Z"], "stages": 1},
    {"level": "RegisterFile", "loops": [{"dim": "k", "bound": 8}], "bypass": ["Z"]},
]}
MAPSPACE = {"name": "hostile", "factors": "perfect", "max_padding": 0.125, "align_to_native": True,
            "min_utilization": 0.0, "min_occupancy": 1, "levels": {
                "GlobalBuffer": {"temporal": {"k": {"min": 1, "max": 32, "multiple_of": 1}},
                                 "order": ["m", "n", "k"], "stages": [1, 2], "bypass": True},
                "innermost": {"stationary": "weight", "forbid": [["k", "m", "n"]], "keep": ["A", "B"],
                              "tile": {"k": 8}, "spatial": {"m": {"max": 16}}},
            }}

NASTY_NUMBERS = [0, -1, -2**64, 2**31, 2**63, 2**64, 10**400, 0.5, -0.0, 1e308, 1e-320,
                 float("nan"), float("inf"), float("-inf"), 2**62, 10**30, 2**31 - 1, 999_983]
NASTY_STRINGS = ["", " ", "64 XB", "1e400 KiB", "-5 B", "nan", "inf", "-inf", "64 kb", "64 mB",
                 "10 Gb/s", "10 gb/s", "8 Kib", "3 bits", "64 KiBytes", "½ KiB", "0x40", "1_000",
                 "unlimited", "output", "input", "weight", "ü😀", "x" * 5000, "a" * 129, "\x00",
                 "Z[m,n] += A[m,k]", "GlobalBuffer", "DRAM", "m", "k", "A", "Z", "①", "٣", "²", "1e3", "12",
                 "tokens // 0", "2..8:x2", "1,①", "target"]


def hostile_values():
    scalar = st.one_of(st.none(), st.booleans(), st.sampled_from(NASTY_NUMBERS),
                       st.integers(min_value=-2**70, max_value=2**70),
                       st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(NASTY_STRINGS),
                       st.text(max_size=12))
    return st.one_of(scalar, st.lists(scalar, max_size=3),
                     st.dictionaries(st.one_of(st.text(max_size=6), st.sampled_from(["name", "min", "dim"])),
                                     scalar, max_size=3))


@st.composite
def mutated(draw, base: dict):
    """`base` changed at one or a few key paths: replaced, deleted, an unknown key added, a
    name duplicated."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in FUZZ.paths_in(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent, key = FUZZ.at_path(doc, path[:-1]), path[-1]
        action = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add", "duplicate"]))
        if action == "replace":
            parent[key] = draw(hostile_values())
        elif action == "delete":
            del parent[key]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["colour", "Name", "keep", "levels", "ü", "x" * 300]))] = draw(hostile_values())
        elif action == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))
    return doc


RAW_FILES = [
    "", "\n", "---\n...\n", "42\n", "- 1\n- 2\n", "just a string\n", "null\n", "[[[[]]]]\n",
    "[" * 5000 + "]" * 5000 + "\n", "{a: " * 3000 + "1" + "}" * 3000 + "\n",
    "name: !!python/object/apply:os.system ['echo pwned']\n",
    "name: !!python/name:os.system\n",
    "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
    "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\nname: *g\n",
    "name: x\nname: y\n", "name: [unclosed\n", "\t- tab\n", "key: value\n  bad indent: 1\n",
    "? [a, b]\n: 1\n", "name: x\n---\nname: y\n", "%YAML 9.9\n---\nname: x\n", "\ufeffname: x\n",
    "name: \x07bell\n", "n: " + "9" * 5000 + "\n",
]


HUGE_LITERALS = ["0x" + "f" * 5000, "0o" + "7" * 5000, "0b" + "1" * 20000, ":".join(["1"] * 3000)]


def raw_files():
    return st.one_of(st.sampled_from(RAW_FILES + [f"name: {h}\n" for h in HUGE_LITERALS]), st.binary(max_size=200),
                     st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")))


class _Timeout(BaseException):
    """A BaseException: no `except Exception` of the code under test swallows it."""


def _on_alarm(signum, frame):
    raise _Timeout()


def run_cli(argv: list[str], files: list[Path], db: Path | None = None) -> None:
    """Run the CLI in-process; assert the hostile-input property (`db`: a sweep's store, whose
    points must hold no exception)."""
    TRIED["inputs"] += 1
    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT_S)
    try:
        with warnings.catch_warnings(record=True) as caught, \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            warnings.simplefilter("always")
            status = main(argv)
    except _Timeout:
        pytest.fail(f"no answer within {TIME_LIMIT_S} s: mapper {' '.join(argv)}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert not caught, f"warnings: {[str(w.message) for w in caught]}"
    lines = [line for line in err.getvalue().splitlines() if not line.startswith("mapper: note: ")]
    if db is not None and db.is_file():
        with contextlib.closing(sqlite3.connect(db)) as con:
            failed = con.execute("SELECT reason FROM points WHERE status = 'failed'").fetchall()
        assert not failed, f"a sweep point died of an exception: {failed[0]}"
    if status == 0:
        assert not lines, lines
        if "--json" in argv:
            json.loads(out.getvalue(), parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
        return
    if status == 1 and argv[0] == "sweep":        # points stored with their reasons (checked above)
        assert len(lines) == 1 and re.match(r"^mapper: \d+ sweep point\(s\) found no mapping", lines[0]), lines
        return
    assert status == 2, (status, err.getvalue()[-2000:])
    assert len(lines) == 1, err.getvalue()[-2000:]
    line = lines[0]
    assert line.startswith("mapper: error: ") and "Traceback" not in line, line
    assert len(line) <= 2000, f"{len(line)} characters"
    names_a_file = any(line.startswith(f"mapper: error: {f}") for f in map(str, files))
    # a valid spec may still give an empty space or one too large for exhaustive search:
    # those errors are about the search, not a file
    assert names_a_file or re.search(NOT_ABOUT_A_FILE, line), line


@pytest.fixture(scope="module")
def folder():
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


def _write(folder: Path, name: str, doc) -> Path:
    return FUZZ.write_doc(folder / name, doc)


def _base_files(folder: Path):
    return (_write(folder, "arch.yaml", ARCH), _write(folder, "workload.yaml", WORKLOAD),
            _write(folder, "mapping.yaml", MAPPING), _write(folder, "mapspace.yaml", MAPSPACE))


def test_the_bases_are_valid(folder):
    arch, workload, mapping, mapspace = _base_files(folder)
    for argv in (["evaluate", str(arch), str(workload), str(mapping), "--json"],
                 ["mapspace", str(arch), str(workload), "--mapspace", str(mapspace), "--json"]):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(argv) == 0
        json.loads(out.getvalue())


KINDS = ("arch", "workload", "mapping", "mapspace")
BASES = dict(zip(KINDS, (ARCH, WORKLOAD, MAPPING, MAPSPACE)))


def _argv(kind: str, files: dict[str, Path]) -> list[str]:
    if kind == "mapspace":
        return ["mapspace", str(files["arch"]), str(files["workload"]), "--mapspace", str(files["mapspace"]),
                "--json"]
    return ["evaluate", str(files["arch"]), str(files["workload"]), str(files["mapping"]), "--json"]


@_scaled(15, 100, data=st.data())
@pytest.mark.parametrize("kind", KINDS)
def test_mutated_specs(folder, kind, data):
    files = dict(zip(KINDS, _base_files(folder)))
    files[kind] = _write(folder, f"bad-{kind}.yaml", data.draw(mutated(BASES[kind]), label=kind))
    run_cli(_argv(kind, files), list(files.values()))


@_scaled(12, 40, raw=raw_files())
@pytest.mark.parametrize("kind", KINDS)
def test_broken_files(folder, kind, raw):
    files = dict(zip(KINDS, _base_files(folder)))
    files[kind] = _write(folder, f"raw-{kind}.yaml", raw if isinstance(raw, bytes) else raw.encode())
    run_cli(_argv(kind, files), list(files.values()))


EINSUM_ALPHABET = "ZABmnkpqrs[],+*= 0123456789_-()"


@_scaled(30, 120, einsum=st.one_of(st.text(EINSUM_ALPHABET, max_size=40),
                        st.sampled_from(["Z[m,n] += A[m,k] * B[k,n] * C[n]", "Z[] += A[m]", "Z[m] += Z[m]",
                                         "Z[m] += A[m] * ", "Z[m,m] += A[m,m]", "Z[0*m] += A[m]",
                                         "Z[m+m] += A[m]", "Z[a,b,c,d,e,f,g,h,i] += A[a,b,c,d,e,f,g,h,i]",
                                         "Z[m] += A[" + "m+" * 2000 + "m]", "Z[m]+=A[m]*B[m]*C[m]*D[m]*E[m]"
                                         "*F[m]*G[m]*H[m]*I[m]"])),
       sizes=st.dictionaries(st.sampled_from(list("mnkpqrsabcdefghi")), st.sampled_from([1, 2, 3, 7, 2**31 - 1]),
                             min_size=1, max_size=6))
def test_einsum_garbage(folder, einsum, sizes):
    files = dict(zip(KINDS, _base_files(folder)))
    files["workload"] = _write(folder, "einsum.yaml", {"name": "e", "einsum": einsum, "sizes": sizes,
                                                       "dtype": "int8"})
    run_cli(["mapspace", str(files["arch"]), str(files["workload"]), "--json"], list(files.values()))


@_scaled(10, 25, data=st.data())
def test_mutated_arch_searches(folder, data):
    """A search (not only a load) on a mutated architecture: refused, or a result in time."""
    files = dict(zip(KINDS, _base_files(folder)))
    files["arch"] = _write(folder, "search-arch.yaml", data.draw(mutated(ARCH)))
    strategy = data.draw(st.sampled_from(["greedy", "random", "joint", "exhaustive"]))
    run_cli(["search", str(files["arch"]), str(files["workload"]), "--strategy", strategy,
             "--time-limit", "1", "--json"] + (["--samples", "2000"] if strategy == "random" else []),
            list(files.values()))


GPU_SPACES = ("clusters", "cta-pairs", "swap-ab", "triton-kernel", "wgmma-ss")


@_scaled(8, 60, data=st.data())
def test_mutated_gpu_presets_and_mapspaces(folder, data):
    """Hopper and Blackwell as they are programmed now (wgmma and tcgen05 MMAs, tensor memory,
    block clusters and their distributed shared memory, CTA pairs) under the GPU mapspaces, one
    of them mutated, on a GEMM of a low-precision or block-scaled dtype: a search, an emitted
    kernel or a fused MLP chain, refused naming a file or a result (fuzz_cli's `gpu` surface
    runs thousands)."""
    from mapper.load.files import spec_data
    arch = spec_data("archs", data.draw(st.sampled_from(["h100", "b200"])))[0]
    dtype = data.draw(st.sampled_from(["bf16", "fp8", "nvfp4", "mxfp4"]))
    workload = {"name": "g", "einsum": "Z[m,n] += A[m,k] * B[k,n]", "dtype": dtype, "dtypes": {"Z": "bf16"},
                "sizes": {d: data.draw(st.sampled_from([1, 64, 256]), label=d) for d in "mnk"}}
    command = data.draw(st.sampled_from(["search", "emit", "fuse"]))
    if command == "fuse":           # an MLP whose hidden chunks a cluster may hold (b200's DSMEM)
        workload = spec_data("workloads", "chain-mlp-gelu")[0]
        workload["sizes"] = {d: min(size, 256) for d, size in workload["sizes"].items()}
    # a fusion study takes a mapspace's levels and cta_pairs only
    space = spec_data("constraints", "cta-pairs" if command == "fuse" else data.draw(st.sampled_from(GPU_SPACES)))[0]
    docs = {"arch": arch, "workload": workload, "mapspace": space}
    kind = data.draw(st.sampled_from(list(docs)))
    docs[kind] = data.draw(mutated(docs[kind]), label=kind)
    files = {k: _write(folder, f"gpu-{k}.yaml", doc) for k, doc in docs.items()}
    a, w, m = str(files["arch"]), str(files["workload"]), str(files["mapspace"])
    if command == "emit":
        argv = ["emit", a, w, "--mapspace", m, "--to", data.draw(st.sampled_from(["triton", "cutlass"])),
                "--time-limit", "1"]
    else:
        argv = [command, a, w, "--mapspace", m, "--max-evaluations", "1500", "--json"]
    run_cli(argv, list(files.values()))


@_scaled(6, 40, data=st.data())
def test_mutated_tensor_depths_spaces(folder, data):
    """A level searched at tensor depths (`tensor_depths`), its mapspace or its arch (the
    accelerator of the AccelForge cases) mutated, on a small GEMM: a search or a look at the
    space, refused naming a file, or a result."""
    from mapper.load.files import spec_data
    docs = {"arch": spec_data("archs", "pe-array")[0], "mapspace": spec_data("constraints", "tensor-depths")[0],
            "workload": {"name": "g", "einsum": "Z[m,n] += A[m,k] * B[k,n]", "dtype": "bf16",
                         "sizes": {d: data.draw(st.sampled_from([1, 12, 64]), label=d) for d in "mnk"}}}
    kind = data.draw(st.sampled_from(["arch", "mapspace", "mapspace"]))
    docs[kind] = data.draw(mutated(docs[kind]), label=kind)
    files = {k: _write(folder, f"depths-{k}.yaml", doc) for k, doc in docs.items()}
    a, w, m = str(files["arch"]), str(files["workload"]), str(files["mapspace"])
    command = data.draw(st.sampled_from(["search", "search", "mapspace"]))
    argv = [command, a, w, "--mapspace", m, "--json"] + (["--max-evaluations", "1500"] if command == "search" else [])
    run_cli(argv, list(files.values()))


@st.composite
def mapspaces_leaving_no_option(draw):
    """Mapspaces valid alone whose constraints leave a level of ARCH no option: a bound no
    factor meets (empty choices), a stage list beyond the level's max_stages, every loop order
    of some loops forbidden (at the spatial level, the innermost, or every level), a fixed order
    forbidden, a stationary tensor whose orders are forbidden, tiles too large to keep."""
    dims, sizes = list(WORKLOAD["sizes"]), WORKLOAD["sizes"]
    level = draw(st.sampled_from(["GlobalBuffer", "RegisterFile", "innermost", "every"]))
    kind = draw(st.sampled_from(["empty", "stages", "forbid-all", "order-forbidden", "stationary-forbidden",
                                 "tile-too-big"]))
    if kind == "empty":
        d = draw(st.sampled_from(dims))
        lc = {draw(st.sampled_from(["temporal", "spatial", "tile"])): {d: {"min": sizes[d] + draw(st.integers(1, 9))}}}
    elif kind == "stages":
        lc = {"stages": draw(st.lists(st.integers(3, 8), min_size=1, max_size=3, unique=True))}
    elif kind == "forbid-all":
        chosen = draw(st.lists(st.sampled_from(dims), min_size=1, max_size=3, unique=True))
        lc = {"forbid": [list(p) for p in itertools.permutations(chosen)]}
    elif kind == "order-forbidden":
        order = draw(st.permutations(dims))
        lc = {"order": order, "forbid": [order]}
    elif kind == "stationary-forbidden":
        lc = {"stationary": draw(st.sampled_from(["output", "input", "weight"])),
              "forbid": draw(st.lists(st.permutations(dims), min_size=1, max_size=6))}
    else:
        lc = {"tile": {d: {"min": sizes[d]} for d in dims}, "keep": ["A", "B", "Z"]}
    return {"name": f"no-option-{kind}", "levels": {level: lc}}


@_scaled(2, 60, mapspace=mapspaces_leaving_no_option(), strategy=st.sampled_from(["greedy", "joint", "exhaustive"]))
def test_mapspaces_leaving_a_level_no_option(folder, mapspace, strategy):
    """Refused naming the mapspace file (or why no mapping fits), or searched; never a traceback."""
    files = dict(zip(KINDS, _base_files(folder)))
    files["mapspace"] = _write(folder, "no-option.yaml", mapspace)
    run_cli(["search", str(files["arch"]), str(files["workload"]), "--mapspace", str(files["mapspace"]),
             "--strategy", strategy, "--max-evaluations", "3000", "--json"], list(files.values()))


def test_stages_beyond_max_stages_name_the_mapspace_file(folder, capsys):
    files = dict(zip(KINDS, _base_files(folder)))
    path = _write(folder, "stages.yaml", {"name": "s", "levels": {"GlobalBuffer": {"stages": [3, 4]}}})
    assert main(["mapspace", str(files["arch"]), str(files["workload"]), "--mapspace", str(path)]) == 2
    assert capsys.readouterr().err.startswith(f"mapper: error: {path}: levels.GlobalBuffer.stages: "
                                              "allows 3, 4 stage(s), none within level GlobalBuffer's max_stages 2")


def test_a_level_with_every_order_forbidden_names_the_file_and_key(folder, capsys):
    files = dict(zip(KINDS, _base_files(folder)))
    path = _write(folder, "forbid.yaml", {"name": "f", "levels": {"GlobalBuffer": {
        "forbid": [list(p) for p in itertools.permutations("mnk")]}}})
    assert main(["search", str(files["arch"]), str(files["workload"]), "--mapspace", str(path),
                 "--strategy", "greedy"]) == 2
    assert f"{path}: levels.GlobalBuffer: its order constraints" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the other surfaces

DATA = Path(__file__).resolve().parent / "data"
ROOT = DATA.parent.parent


def _yaml(path: Path):
    return yaml.safe_load(path.read_text())


def _doc(data, base):
    """A drawn file: `base` mutated, or replaced whole by a broken or oversized one."""
    return data.draw(st.one_of(mutated(base), raw_files()), label="file")


OPGRAPH = {"name": "chain", "sizes": {"m": 32, "k": 32, "n": 32}, "dtype": "bf16", "ops": [
    {"name": "norm", "kind": "layernorm", "inputs": ["X[m,k]", "g[k]"], "output": "Y[m,k]", "dim": "k"},
    {"name": "up", "einsum": "Z[m,n] += Y[m,k] * W[k,n]"},
    {"name": "bias", "kind": "bias", "inputs": ["Z[m,n]", "b[n]"], "output": "B[m,n]"},
    {"name": "act", "kind": "gelu", "inputs": ["B[m,n]"], "output": "G[m,n]"}]}


@_scaled(6, 40, data=st.data())
def test_mutated_opgraphs_fused(folder, data):
    """`mapper fuse` on a mutated op graph (under an evaluation budget: the same work whatever
    the machine's load)."""
    files = dict(zip(KINDS, _base_files(folder)))
    graph = _write(folder, "opgraph.yaml", _doc(data, OPGRAPH))
    run_cli(["fuse", str(files["arch"]), str(graph), "--max-evaluations", "400", "--json"], [graph, files["arch"]])


TRITON = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 3, "num_warps": 4, "GROUP_M": 8}


@_scaled(10, 60, data=st.data(), form=st.sampled_from(["yaml", "json"]))
def test_mutated_triton_configs(folder, data, form):
    config = _doc(data, TRITON)
    if form == "json" and isinstance(config, dict):
        config = json.dumps(config, allow_nan=True)
    path = _write(folder, f"config.{form}", config)
    run_cli(["evaluate", "h100", "gemm-4096", "--from-triton", str(path), "--json"], [path])


@_scaled(8, 40, data=st.data(), backend=st.sampled_from(["triton", "cutlass", "mlir"]),
        flags=st.sampled_from([[], ["--top", "3"], ["--kernel"], ["--epilogue", "bias", "--epilogue", "gelu"]]))
def test_emit_of_mutated_mappings_with_every_backend(folder, data, backend, flags):
    """`mapper emit` of a mutated GEMM mapping (or workload) by each backend."""
    kind = data.draw(st.sampled_from(["mapping", "workload"]))
    base = {"mapping": _yaml(ROOT / "mappings/h100-gemm-4096-edp.yaml"), "workload": _yaml(ROOT / "workloads/gemm-4096.yaml")}
    files = {k: _write(folder, f"emit-{k}.yaml", _doc(data, v) if k == kind else v) for k, v in base.items()}
    if backend != "triton" and flags[:1] in (["--top"], ["--kernel"]):
        flags = []
    run_cli(["emit", "h100", str(files["workload"]), str(files["mapping"]), "--to", backend, *flags], list(files.values()))


SWEEP = {"name": "s", "archs": ["arch.yaml"], "strategies": ["greedy"], "time_limit": 1, "workloads": [
    {"workload": "workload.yaml"},
    {"einsum": "Z[m,n] += A[m,k] * B[k,n]", "name": "g", "sizes": {"m": "2..8:x2", "n": 4, "k": [2, 4]}, "dtype": "int8"},
    {"model": "model.yaml", "phase": "prefill", "seq": 4, "batch": [1, 2]}]}


@_scaled(8, 40, data=st.data(), kind=st.sampled_from(["sweep", "sweep", "model"]))
def test_mutated_sweep_files_and_models(tmp_path, data, kind):
    """`mapper sweep FILE` naming an architecture, a workload and a model beside it, the sweep
    file or the model mutated."""
    _write(tmp_path, "arch.yaml", (DATA / "sweep-tiny-arch.yaml").read_text())
    _write(tmp_path, "workload.yaml", {"name": "w", "einsum": "Z[m,n] += A[m,k] * B[k,n]",
                                       "sizes": {"m": 4, "n": 4, "k": 4}, "dtype": "int8"})
    model = _yaml(DATA / "sweep-tiny-model.yaml")
    files = [_write(tmp_path, "model.yaml", _doc(data, model) if kind == "model" else model),
             _write(tmp_path, "sweep.yaml", _doc(data, SWEEP) if kind == "sweep" else SWEEP)]
    db = tmp_path / "r.sqlite"
    run_cli(["sweep", str(files[1]), "--jobs", "1", "--quiet", "--db", str(db), "--time-limit", "0.5"],
            files + [tmp_path / "arch.yaml", tmp_path / "workload.yaml"], db)


TIMELOOP = ("arch.yaml", "problem.yaml", "map_dummy.yaml", "ERT.yaml")


@_scaled(10, 60, data=st.data(), which=st.sampled_from(TIMELOOP),
        command=st.sampled_from(["import-timeloop", "evaluate"]))
def test_mutated_timeloop_files(tmp_path, data, which, command):
    """Timeloop's v0.4 architecture, problem, mapping and ERT (`import-timeloop` and `evaluate
    --ert` on them), one of them mutated."""
    from mapper.timeloop.yamlio import read_timeloop_yaml
    paths = []
    for name in TIMELOOP:
        doc = read_timeloop_yaml(DATA / "timeloop_v04_targets" / name)
        if name == which:
            doc = _doc(data, doc)
        paths.append(_write(tmp_path, name, doc))       # `!Container` dicts written back as tags
    arch, problem, mapping, ert = map(str, paths)
    argv = (["import-timeloop", arch, problem, mapping, "--ert", ert, "-o", str(tmp_path / "out")] if command == "import-timeloop"
            else ["evaluate", arch, problem, mapping, "--ert", ert, "--json"])
    run_cli(argv, paths)

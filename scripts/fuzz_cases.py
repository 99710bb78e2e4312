"""The inputs `fuzz_cli.py` runs: per surface of the command line, valid base files made hostile
and the command that reads them.

A case is the files of one run (a dict, YAML text or raw bytes each, written into the run's
folder) and its argv, whose `{name}` fields are those files' paths. Surfaces, each with the
commands that read it:

- `native`: architecture, workload, mapping and mapspace files (evaluate, mapspace, search with
  each strategy, compare, explain);
- `fuse`: op graphs (`ops:`), mutated, or valid with hostile sizes: a large prime, 2^31 - 1, a
  long elementwise chain, an einsum of one operand (fuse, with a time limit or a budget);
- `emit`: a GPU architecture, a GEMM or an op graph, a mapping (emit with each backend, --top,
  --kernel, epilogues);
- `triton`: Triton configs as YAML, JSON or `triton.Config(...)` text (evaluate --from-triton);
- `sweep`: sweep files naming an architecture, a workload and a model beside them (sweep);
- `model`: model files (sweep --model, with --fuse on one with chains);
- `timeloop`: Timeloop architecture (v0.3 and v0.4), problem, mapping, constraint and ERT files
  (import-timeloop, evaluate, search and explain on them, with --ert);
- `onnx`: ONNX files (import-model, and sweep --model FILE.onnx), `fuzz_onnx_cases.py`.

Hostile: mutated at random key paths (wrong types, missing and unknown keys, zero, negative,
huge, non-finite and fractional numbers, digits `int()` refuses, unit garbage, long strings),
replaced by broken YAML, or valid but large (sizes whose tables or sets would be huge).
Seeded: the same `random.Random` gives the same cases.
"""
from __future__ import annotations

import copy
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"

NASTY_NUMBERS = [0, -1, -2**64, 2**31, 2**63, 2**64, 10**400, 0.5, -0.0, 1e308, 1e-320,
                 float("nan"), float("inf"), float("-inf"), 3, 7, 1000, 2**31 - 1, 999_983, 2**62, 10**30, 1.0]
NASTY_STRINGS = ["", " ", "64 XB", "1e400 KiB", "-5 B", "nan", "inf", "64 kb", "10 Gb/s", "3 bits", "½ KiB",
                 "0x40", "1_000", "unlimited", "output", "input", "weight", "ü😀", "x" * 3000, "\x00",
                 "Z[m,n] += A[m,k]", "GlobalBuffer", "DRAM", "RegisterFile", "m", "n", "k", "A", "B", "Z", "every",
                 "innermost", "outermost", "①", "٣", "²", "12", "1e3", "4..64:x2", "1..5000:+1", "tokens // 0",
                 "batch * seq", "0", "-3", "7,8", "1" * 60, "a" * 129, "SMEM", "RF", "HBM", "relu", "softmax"]
HUGE_LITERALS = ["0x" + "f" * 5000, "0o" + "7" * 5000, "0b" + "1" * 20000, "9" * 5000,
                 ":".join(["1"] * 3000), "0x" + "f" * 90]
RAW_FILES = ["", "\n", "---\n...\n", "42\n", "- 1\n- 2\n", "just a string\n", "null\n", "[[[[]]]]\n",
             "[" * 3000 + "]" * 3000 + "\n", "name: !!python/name:os.system\n", "name: x\nname: y\n",
             "name: [unclosed\n", "\t- tab\n", "key: value\n  bad indent: 1\n", "? [a, b]\n: 1\n",
             "name: x\n---\nname: y\n", "\ufeffname: x\n", "n: " + "9" * 3000 + "\n",
             "a: &a [x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
             "c: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c]\n"]
EINSUM_ALPHABET = "ZABCmnkpqrs[],+*= 0123456789_-()"
GEMM = "Z[m,n] += A[m,k] * B[k,n]"
# sizes that once hung or blew up: a prime (no factor tables to prune), a product of two large
# primes, the largest count, a size far above any real one
LARGE_SIZES = [999_983, 62_773_913, 2**31 - 1, 1_000_003 * 7, 2**20, 65_521]


@dataclass
class Case:
    """One run: the files (name -> dict, YAML text or bytes) and the argv; `{name}` in the argv
    is that file's path, `{dir}` the run's folder."""
    surface: str
    files: dict
    argv: list[str]
    hostile: str                       # which file was made hostile, and how
    tagged: set = field(default_factory=set)     # files written with Timeloop's `!Tag` nodes


def _yaml(path: Path):
    return yaml.safe_load(path.read_text())


class _TimeloopLoader(yaml.SafeLoader):
    """Reads Timeloop's `!Container` nodes as dicts with the tag under `_tag` (and back, `dump`)."""


_TimeloopLoader.add_multi_constructor(
    "!", lambda loader, suffix, node: {"_tag": suffix, **loader.construct_mapping(node, deep=True)}
    if isinstance(node, yaml.MappingNode) else loader.construct_scalar(node))


class _Dumper(yaml.SafeDumper):
    pass


def _represent_dict(dumper, data):
    if isinstance(data.get("_tag"), str):
        rest = {k: v for k, v in data.items() if k != "_tag"}
        return dumper.represent_mapping("!" + data["_tag"], rest)
    return dumper.represent_dict(data)


_Dumper.add_representer(dict, _represent_dict)


def dump(doc) -> str:
    """YAML of a (possibly hostile) document: unicode kept, Timeloop tags written back."""
    text = yaml.dump(doc, Dumper=_Dumper, allow_unicode=True, sort_keys=False, width=10**9)
    return text


def write_doc(path: Path, doc) -> Path:
    """`doc` written to `path`: bytes and text as they are, anything else as YAML (`dump`)."""
    if isinstance(doc, bytes):
        path.write_bytes(doc)
    elif isinstance(doc, str):
        path.write_text(doc)
    else:
        path.write_text(dump(doc))
    return path


def bases() -> dict:
    """Valid documents of every surface, small enough that each command answers within a second
    or two."""
    toy, pe = _yaml(ROOT / "archs/toy.yaml"), _yaml(ROOT / "archs/pe-array.yaml")
    h100 = _yaml(ROOT / "archs/h100.yaml")
    gpus = [h100, _yaml(ROOT / "archs/h200.yaml"), _yaml(ROOT / "archs/b200.yaml")]
    gpu_spaces = [_yaml(ROOT / f"constraints/{n}.yaml")
                  for n in ("gpu", "clusters", "cta-pairs", "swap-ab", "triton-kernel", "wgmma-ss")]
    gemm = _yaml(ROOT / "workloads/gemm-256.yaml")
    gemm["name"], gemm["sizes"] = "gemm-32", {"m": 32, "n": 32, "k": 32}
    conv = _yaml(ROOT / "workloads/conv-alexnet-conv3.yaml")
    conv["sizes"] = {"n": 1, "k": 8, "c": 4, "p": 4, "q": 4, "r": 3, "s": 3}
    mapping = {"arch": "toy", "workload": "gemm-32", "mapping": [       # output-stationary, as the bundled 256 one
        {"level": "DRAM", "loops": [{"dim": "m", "bound": 2}]},
        {"level": "GlobalBuffer", "loops": [{"dim": "k", "bound": 4}, {"dim": "n", "bound": 2}],
         "spatial": [{"dim": "m", "bound": 16, "axis": "x"}, {"dim": "n", "bound": 16, "axis": "y"}]},
        {"level": "RegisterFile", "loops": [{"dim": "k", "bound": 8}]}]}
    spaces = [_yaml(ROOT / f"constraints/{n}.yaml") for n in ("weight-stationary", "bypass", "imperfect", "min-util-50")]
    chains = []
    for name, sizes in (("chain-gemm-bias-relu", {"m": 64, "k": 64, "n": 64}),
                        ("chain-layernorm-gemm-gelu", {"m": 32, "k": 64, "n": 64}),
                        ("chain-swiglu-mlp", None), ("chain-attention", None)):
        doc = _yaml(ROOT / f"workloads/{name}.yaml")
        doc["sizes"] = sizes or {d: min(v, 32) for d, v in doc["sizes"].items()}
        chains.append(doc)
    gemm_4096 = _yaml(ROOT / "workloads/gemm-4096.yaml")
    h100_mapping = _yaml(ROOT / "mappings/h100-gemm-4096-edp.yaml")
    tiny_arch = _yaml(DATA / "sweep-tiny-arch.yaml")
    tiny_model = _yaml(DATA / "sweep-tiny-model.yaml")
    chain_model = _yaml(DATA / "sweep-tiny-chain-model.yaml")
    sweep = {"name": "fuzz", "archs": ["arch.yaml"], "strategies": ["greedy"], "time_limit": 1,
             "workloads": [{"workload": "workload.yaml"},
                           {"einsum": GEMM, "name": "g", "sizes": {"m": "2..8:x2", "n": 4, "k": [2, 4]},
                            "dtype": "int8"},
                           {"model": "model.yaml", "phase": "prefill", "seq": 4, "batch": [1, 2]}]}
    tiny_gemm = {"name": "tiny-gemm", "einsum": GEMM, "sizes": {"m": 4, "n": 4, "k": 4}, "dtype": "int8"}
    triton = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 3, "num_warps": 4, "GROUP_M": 8}
    timeloop = {}
    for design, files in (("v04", ("arch.yaml", "problem.yaml", "map_dummy.yaml", "ERT.yaml")),
                          ("v03", ("arch.yaml", "problem.yaml", "map.yaml", "ERT.yaml", "constraints.yaml"))):
        folder = DATA / ("timeloop_v04_targets" if design == "v04" else "timeloop_format/simple_weight_stationary")
        timeloop[design] = {f.split("_")[0].split(".")[0]: yaml.load((folder / f).read_text(), Loader=_TimeloopLoader)
                            for f in files}
    return {"arch": [toy, pe], "workload": [gemm, conv], "mapping": [mapping], "mapspace": spaces,
            "chains": chains, "gpu": h100, "gemm_4096": gemm_4096, "gpu_mapping": h100_mapping,
            "tiny_arch": tiny_arch, "models": [tiny_model, chain_model], "sweep": sweep, "tiny_gemm": tiny_gemm,
            "triton": triton, "timeloop": timeloop, "gpus": gpus, "gpu_spaces": gpu_spaces}


# ----------------------------------------------------------------------------- mutation

def paths_in(node, prefix=()):
    """Every key path into a document (keys and list indices), its root's `()` first."""
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from paths_in(value, prefix + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from paths_in(value, prefix + (i,))


def at_path(node, path):
    """What a document holds at a key path (`paths_in`)."""
    for key in path:
        node = node[key]
    return node


def hostile_value(rng, depth: int = 0):
    pick = rng.random()
    if pick < 0.3:
        return rng.choice(NASTY_NUMBERS)
    if pick < 0.55:
        return rng.choice(NASTY_STRINGS)
    if pick < 0.65:
        return rng.choice([None, True, False, {}, []])
    if pick < 0.75:
        return rng.randint(-2**70, 2**70)
    if pick < 0.85 and depth < 2:
        return [hostile_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if depth < 2:
        return {rng.choice(["name", "min", "max", "dim", "bound", "m", "k", "ü", 7, "target"]): hostile_value(rng, depth + 1)
                for _ in range(rng.randint(0, 3))}
    return rng.random() * 10 ** rng.randint(-5, 5)


def mutated(rng, base):
    doc = copy.deepcopy(base)
    for _ in range(rng.randint(1, 3)):
        paths = [p for p in paths_in(doc) if p and p[-1] != "_tag"]
        if not paths:
            break
        path = rng.choice(paths)
        parent, key = at_path(doc, path[:-1]), path[-1]
        action = rng.choice(["replace", "replace", "replace", "delete", "add", "duplicate"])
        if action == "replace":
            parent[key] = hostile_value(rng)
        elif action == "delete":
            del parent[key]
        elif action == "add" and isinstance(parent, dict):
            parent[rng.choice(["colour", "Name", "keep", "levels", "stages", "ü", 5, "split", "bypass"])] = hostile_value(rng)
        elif action == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))
    return doc


def with_huge_literal(rng, doc) -> str:
    """`doc`'s YAML with one number replaced by a literal of thousands of digits (hex, octal,
    binary, decimal or sexagesimal: ints Python cannot write back as text)."""
    text = dump(doc)
    numbers = [i for i, line in enumerate(text.splitlines()) if any(c.isdigit() for c in line)]
    lines = text.splitlines()
    if not numbers:
        return text
    i = rng.choice(numbers)
    import re
    lines[i] = re.sub(r"(?<![\w.])\d+(?![\w.])", rng.choice(HUGE_LITERALS), lines[i], count=1)
    return "\n".join(lines) + "\n"


def hostile_doc(rng, base):
    """`base` made hostile one way: mutated, a huge literal, or broken YAML / bytes."""
    pick = rng.random()
    if pick < 0.7:
        return mutated(rng, base), "mutated"
    if pick < 0.85:
        return with_huge_literal(rng, base), "huge literal"
    raw = rng.choice(RAW_FILES).encode() if rng.random() < 0.7 else rng.randbytes(rng.randint(0, 100))
    return raw, "raw"


# ----------------------------------------------------------------------------- native files

def no_option_mapspace(rng, arch: dict, workload: dict) -> dict:
    """A mapspace valid on its own whose constraints leave some level no option."""
    levels = [lv["name"] for lv in arch["levels"]]
    dims = list(workload["sizes"])
    level = rng.choice(levels[1:] + ["innermost", "every"])
    sizes = workload["sizes"]
    kind = rng.choice(["forbid-all", "forbid-all", "stages", "stages", "empty-factor", "order-and-forbid",
                       "stationary-and-forbid", "tile-too-big", "spatial-on-no-fanout", "keep-nothing-known",
                       "innermost-and-forbid"])
    lc: dict = {}
    if kind == "forbid-all":
        chosen = rng.sample(dims, rng.randint(1, min(4, len(dims))))
        lc["forbid"] = [list(p) for p in itertools.permutations(chosen)]
    elif kind == "stages":
        lc["stages"] = sorted(rng.sample(range(2, 9), rng.randint(1, 3)))
    elif kind == "empty-factor":
        d = rng.choice(dims)
        lc[rng.choice(["temporal", "spatial", "tile"])] = {d: {"min": sizes[d] + rng.randint(1, 5)}}
    elif kind == "order-and-forbid":
        order = rng.sample(dims, len(dims))
        lc["order"], lc["forbid"] = order, [order]
    elif kind == "stationary-and-forbid":
        lc["stationary"] = rng.choice(["output", "input", "weight"])
        lc["forbid"] = [list(p) for p in itertools.permutations(rng.sample(dims, min(3, len(dims))))][:rng.randint(1, 6)]
    elif kind == "tile-too-big":
        lc["tile"] = {d: {"min": sizes[d]} for d in dims}
        lc["keep"] = ["output", "input", "weight"]
    elif kind == "spatial-on-no-fanout":
        level = levels[0]
        lc["spatial"] = {rng.choice(dims): {"min": 2}}
    elif kind == "keep-nothing-known":
        lc["keep"] = [rng.choice(["output", "input", "weight"])]
        lc["bypass"] = rng.choice([True, False])
        lc["stages"] = [rng.randint(1, 3)]
    elif kind == "innermost-and-forbid":
        order = rng.sample(dims, len(dims))
        lc["innermost_order"], lc["forbid"] = order[-2:], [order]
    doc = {"name": f"no-option-{kind}", "levels": {level: lc}}
    if rng.random() < 0.3:
        doc["min_utilization"] = rng.choice([0.0, 0.5, 1.0])
    if rng.random() < 0.3:
        doc["factors"] = rng.choice(["perfect", "imperfect", "auto"])
    return doc


def garbage_einsum(rng) -> dict:
    if rng.random() < 0.5:
        einsum = "".join(rng.choice(EINSUM_ALPHABET) for _ in range(rng.randint(0, 40)))
    else:
        einsum = rng.choice(["Z[m,n] += A[m,k] * B[k,n] * C[n]", "Z[] += A[m]", "Z[m] += Z[m]", "Z[m] += A[m] * ",
                             "Z[m,m] += A[m,m]", "Z[0*m] += A[m]", "Z[m+m] += A[m]", "Z[m] += A[m+k] * B[k]",
                             "Z[m] += A[" + "m+" * 500 + "m]", GEMM, "Z[m,n] += A[m,n,k]"])
    sizes = {d: rng.choice([0, 1, 2, 3, 7, 2**31 - 1, -4, 999_983]) for d in rng.sample("mnkpqrs", rng.randint(1, 5))}
    return {"name": "e", "einsum": einsum, "sizes": sizes, "dtype": rng.choice(["int8", "fp16", "int3", 8])}


def large_workload(rng, workload: dict) -> dict:
    """A valid workload with one dim of a size that once hung or blew up."""
    doc = copy.deepcopy(workload)
    doc["sizes"][rng.choice(list(doc["sizes"]))] = rng.choice(LARGE_SIZES)
    return doc


def native_case(rng, pool) -> Case:
    docs = {"arch": copy.deepcopy(rng.choice(pool["arch"])), "workload": copy.deepcopy(rng.choice(pool["workload"])),
            "mapspace": copy.deepcopy(rng.choice(pool["mapspace"]))}
    has_mapping = docs["workload"]["einsum"] == GEMM
    if has_mapping:
        docs["mapping"] = copy.deepcopy(pool["mapping"][0])
    pick = rng.random()
    if pick < 0.45:
        kind = rng.choice(list(docs))
        docs[kind], how = hostile_doc(rng, docs[kind])
    elif pick < 0.55:
        kind, how = "workload", "garbage einsum"
        docs[kind] = garbage_einsum(rng)
        docs.pop("mapping", None)
    elif pick < 0.62:
        kind, how = "workload", "large size"
        docs[kind] = large_workload(rng, docs[kind])
        docs.pop("mapping", None)
    else:
        kind, how = "mapspace", "no option"
        docs[kind] = no_option_mapspace(rng, docs["arch"], docs["workload"])
    files = {f"{k}.yaml": v for k, v in docs.items()}
    a, w, s = "{arch.yaml}", "{workload.yaml}", "{mapspace.yaml}"
    if kind == "mapping" or ("mapping.yaml" in files and rng.random() < 0.15):
        return Case("native", files, ["evaluate", a, w, "{mapping.yaml}", "--json"], f"{kind}: {how}")
    roll = rng.random()
    space = ["--mapspace", s] if kind == "mapspace" or rng.random() < 0.5 else []
    if roll < 0.45:         # counted exactly up to 100,000 factor combinations, else estimated
        argv = ["mapspace", a, w, *space, "--exact-limit", "100000", "--json"]
    else:
        # searches mostly under an evaluation budget (independent of the machine's load), the
        # rest under a time limit, which must hold
        budget = ["--max-evaluations", "1500"] if rng.random() < 0.6 else ["--time-limit", rng.choice(["0.5", "1", "2"])]
        if roll < 0.85:
            strategy = rng.choice(["greedy", "greedy", "joint", "joint", "random", "exhaustive"])
            extra = ["--samples", "500"] if strategy == "random" else []
            argv = ["search", a, w, *space, "--strategy", strategy, *budget, "--json", *extra]
        elif roll < 0.93:
            argv = ["compare", a, w, *space, *budget, "--json"]
        elif roll < 0.97:
            argv = ["explain", a, w, *space, "--time-limit", rng.choice(["0.5", "1"]), "--cpsat-seconds", "0.2", "--json"]
        else:               # the capacity curve: a level (or not one), perhaps hostile capacities
            level = rng.choice(["GlobalBuffer", "RegisterFile", "DRAM", "nope", "innermost"])
            grid = rng.choice([[], ["--capacities", rng.choice(["1KiB..64KiB:x2", "0..8KiB:x2", "64KiB..1KiB:x2",
                                                                 "1B..1TiB:x2", "8 XB", "1KiB,①", "1e400 KiB"])]])
            argv = ["explain", a, w, "--capacity", level, *grid, *budget, "--json"]
    return Case("native", files, argv, f"{kind}: {how}")


# ----------------------------------------------------------------------------- op graphs and fuse

def long_chain(rng) -> dict:
    n = rng.choice([40, 300, 2000, 5000])
    kinds = ["relu", "gelu", "silu", "scale"]
    ops = [{"name": f"op{i}", "kind": rng.choice(kinds), "inputs": [f"T{i}[m,n]"], "output": f"T{i + 1}[m,n]"}
           for i in range(n)]
    return {"name": f"chain-{n}", "sizes": {"m": 64, "n": 64}, "dtype": "bf16", "ops": ops}


def hostile_opgraph(rng, pool) -> tuple[object, str]:
    base = copy.deepcopy(rng.choice(pool["chains"]))
    pick = rng.random()
    if pick < 0.55:
        return hostile_doc(rng, base)
    if pick < 0.75:
        base["sizes"][rng.choice(list(base["sizes"]))] = rng.choice(LARGE_SIZES)
        return base, "large size"
    if pick < 0.85:
        return long_chain(rng), "long chain"
    op = rng.choice([{"name": "one", "einsum": "Z[m,n] += A[m,n,k]"},
                     {"name": "three", "einsum": "Z[m,n] += A[m,k] * B[k,n] * C[n,k]"},
                     {"name": "noreduce", "einsum": "Z[m,n] += A[m,n] * B[m,n]"},
                     {"name": "odd", "einsum": "Z[n,m] += B[k,n] * A[m,k]"}])
    return {"name": "odd", "sizes": {"m": 64, "n": 64, "k": 64}, "dtype": "bf16", "ops": [op]}, "odd einsum"


def fuse_case(rng, pool) -> Case:
    arch = rng.choice(pool["arch"] + [pool["gpu"]])
    graph, how = hostile_opgraph(rng, pool)
    files = {"arch.yaml": copy.deepcopy(arch), "workload.yaml": graph}
    if rng.random() < 0.1:
        files["arch.yaml"], how = hostile_doc(rng, arch)[0], "arch hostile"
    budget = (["--max-evaluations", str(rng.choice([200, 2000]))] if rng.random() < 0.3
              else ["--time-limit", rng.choice(["0.5", "1", "2", "3"])])
    argv = ["fuse", "{arch.yaml}", "{workload.yaml}", *budget]
    if rng.random() < 0.3:
        argv += ["--objective", rng.choice(["energy", "cycles", "bytes"])]
    if rng.random() < 0.15:
        files["mapspace.yaml"] = mutated(rng, rng.choice(pool["mapspace"])) if rng.random() < 0.5 \
            else copy.deepcopy(rng.choice(pool["mapspace"]))
        argv += ["--mapspace", "{mapspace.yaml}"]
    return Case("fuse", files, argv + (["--json"] if rng.random() < 0.7 else []), f"workload: {how}")


# ----------------------------------------------------------------------------- GPUs of today

GPU_DTYPES = ("bf16", "fp16", "fp8", "e5m2", "int8", "fp6_e3m2", "e2m1", "nvfp4", "mxfp8", "mxfp6", "mxfp4", "tf32")


def gpu_case(rng, pool) -> Case:
    """Hopper and Blackwell presets (warpgroup and tcgen05 MMAs, tensor memory, block clusters
    and their distributed shared memory, CTA pairs, block-scaled dtypes) under the GPU mapspaces
    (clusters, CTA pairs, swap-AB, the Triton kernel's), one of the three made hostile or an
    option asked of a GPU that lacks it, searched, emitted or fused."""
    arch = copy.deepcopy(rng.choice(pool["gpus"]))
    space = copy.deepcopy(rng.choice(pool["gpu_spaces"]))
    sizes = {d: rng.choice([1, 8, 64, 96, 256, 512, 1000]) for d in "mnk"}
    dtype = rng.choice(GPU_DTYPES)
    workload = {"name": "g", "einsum": GEMM, "sizes": sizes, "dtype": dtype,
                "dtypes": {"Z": rng.choice(["bf16", "fp32", dtype])}}
    files = {"arch.yaml": arch, "workload.yaml": workload, "mapspace.yaml": space}
    pick = rng.random()
    if pick < 0.45:
        kind = rng.choice(list(files))
        files[kind], how = hostile_doc(rng, files[kind])
    elif pick < 0.6:
        kind = "mapspace"
        key = rng.choice(["cta_pairs", "clusters", "swap_operands", "align_to_native", "factors"])
        space[key] = rng.choice([True, False, "auto", "always", "never", 2, None, "imperfect"])
        how = f"{key} = {space[key]!r}"
    else:
        kind, how = "none", "valid"
    a, w, s = "{arch.yaml}", "{workload.yaml}", "{mapspace.yaml}"
    budget = ["--max-evaluations", "1500"] if rng.random() < 0.7 else ["--time-limit", rng.choice(["0.5", "1", "2"])]
    roll = rng.random()
    if roll < 0.6:
        argv = ["search", a, w, "--mapspace", s, "--strategy", rng.choice(["joint", "greedy"]), *budget,
                *(["--objective", rng.choice(["cycles", "energy", "edp"])] if rng.random() < 0.3 else []), "--json"]
    elif roll < 0.85:
        argv = ["emit", a, w, "--mapspace", s, "--to", rng.choice(["triton", "cutlass", "mlir"]), "--time-limit", "1"]
    else:
        chain = copy.deepcopy(rng.choice(pool["chains"]))
        files["workload.yaml"] = chain if kind != "workload" else files["workload.yaml"]
        argv = ["fuse", a, w, "--mapspace", s, *budget, "--json"]
    return Case("gpu", files, argv, f"{kind}: {how}")


# ----------------------------------------------------------------------------- emit and Triton configs

def emit_case(rng, pool) -> Case:
    files = {"arch.yaml": copy.deepcopy(pool["gpu"])}
    kind = rng.choice(["arch", "workload", "mapping", "mapping", "opgraph", "none"])
    pick = rng.random()
    if kind == "opgraph":
        graph, how = hostile_opgraph(rng, pool) if pick < 0.6 else (copy.deepcopy(rng.choice(pool["chains"])), "valid")
        files["workload.yaml"] = graph
    else:
        workload = copy.deepcopy(pool["gemm_4096"])
        files["workload.yaml"] = workload
        files["mapping.yaml"] = copy.deepcopy(pool["gpu_mapping"])
        how = "valid"
        if kind in ("arch", "workload", "mapping"):
            if kind == "workload" and pick < 0.3:
                files["workload.yaml"], how = garbage_einsum(rng), "garbage einsum"
            else:
                files[f"{kind}.yaml"], how = hostile_doc(rng, files[f"{kind}.yaml"])
    backend = rng.choice(["triton", "cutlass", "mlir"])
    argv = ["emit", "{arch.yaml}", "{workload.yaml}"]
    searched = kind == "opgraph" or "mapping.yaml" not in files or rng.random() < 0.15
    if not searched:
        argv.append("{mapping.yaml}")
    argv += ["--to", backend, "--time-limit", rng.choice(["1", "2"])]
    if backend == "triton" and kind != "opgraph" and rng.random() < 0.4:
        argv += rng.choice([["--top", str(rng.randint(2, 4))], ["--kernel"], ["--top", "3", "--kernel"]])
    if kind != "opgraph" and rng.random() < 0.4:
        for _ in range(rng.randint(1, 3)):
            argv += ["--epilogue", rng.choice(["bias", "gelu", "silu", "relu", "tanh", ""])]
    if rng.random() < 0.2:
        argv += ["-o", "{dir}/out.txt"]
    return Case("emit", files, argv, f"{kind}: {how}")


def triton_case(rng, pool) -> Case:
    config = copy.deepcopy(pool["triton"])
    pick = rng.random()
    if pick < 0.3:
        key = rng.choice(list(config) + ["warps_m"])
        config[key] = rng.choice([2**62, 10**30, 0, -1, 1.5, float("nan"), True, 4096, 3, 2**31 - 1, "8", None])
        text, how = dump(config), f"{key} hostile"
    elif pick < 0.55:
        text, how = hostile_doc(rng, config)
        text = text if isinstance(text, (str, bytes)) else dump(text)
    elif pick < 0.7:
        text, how = json.dumps(mutated(rng, config)), "json mutated"
    else:
        meta = {k: config[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")}
        key = rng.choice(list(meta) + ["num_warps", "num_stages"])
        value = rng.choice(["0x" + "f" * 5000, "2**62", "10**30", "-1", "1.5", "float('nan')", "'8'", "[1]",
                            "4096", "(", "1e999"])
        stages, warps = "3", "4"
        if key == "num_warps":
            warps = value
        elif key == "num_stages":
            stages = value
        else:
            meta[key] = "@"
        body = ", ".join(f"'{k}': {value if v == '@' else v}" for k, v in meta.items())
        text = f"triton.Config({{{body}}}, num_stages={stages}, num_warps={warps})\n"
        how = f"triton.Config text, {key} = {value[:12]}"
    workload = rng.choice(["{workload.yaml}", "{workload.yaml}", "gemm-256"])
    files = {"workload.yaml": copy.deepcopy(pool["gemm_4096"]), "config.yaml": text}
    return Case("triton", files, ["evaluate", "h100", workload, "--from-triton", "{config.yaml}",
                                  *(["--json"] if rng.random() < 0.5 else [])], f"config: {how}")


# ----------------------------------------------------------------------------- sweeps and models

def hostile_model(rng, base: dict) -> tuple[object, str]:
    pick = rng.random()
    doc = copy.deepcopy(base)
    if pick < 0.6:
        return hostile_doc(rng, doc)
    layer = rng.choice(doc["layers"])
    key = rng.choice(["count", "sizes"])
    value = rng.choice(["tokens // 0", "tokens // (batch - batch)", "1+" * 3000 + "1", "(" * 300 + "1" + ")" * 300,
                        "tokens * " * 60 + "tokens", "hidden ** 2", "①", 2**31 - 1, 10**30, "seq - seq"])
    if key == "count":
        layer["count"] = value
    else:
        layer["sizes"][rng.choice(list(layer["sizes"]))] = value
    return doc, f"layer {key} = {str(value)[:20]}"


# paths of the tiny sweep architecture (`tests/data/sweep-tiny-arch.yaml`: DRAM, Buf, RF) and others
VARIED_PATHS = ["Buf.capacity", "DRAM.bandwidth", "RF.mesh", "compute.mesh", "compute.instances", "clock",
                "Buf.energy.read", "Buf.nope", "Nope.capacity", "gpu.sms", "RF.instances", "Buf.block_size"]
VARIED_VALUES = ["32B..256B:x2", "0..8KiB:x2", "1B..1TiB:+1B", "2x2,4x1", "3x5", "①", 10**30, -1, "2,4",
                 "1GHz..2GHz:+0.5GHz", "1pJ..4pJ:x2", [1, 2, 4], "nan", "", {"a": 1}]


def sweep_case(rng, pool) -> Case:
    sweep = copy.deepcopy(pool["sweep"])
    model = copy.deepcopy(rng.choice(pool["models"]))
    files = {"arch.yaml": copy.deepcopy(pool["tiny_arch"]), "workload.yaml": copy.deepcopy(pool["tiny_gemm"]),
             "model.yaml": model}
    kind = rng.choice(["sweep", "sweep", "sizes", "model", "workload", "arch", "opgraph-preset", "vary"])
    how = "valid"
    if kind == "sweep":
        sweep, how = hostile_doc(rng, sweep)
    elif kind == "sizes":
        entry = sweep["workloads"][rng.choice([1, 2])]
        key = "sizes" if "sizes" in entry else rng.choice(["seq", "batch"])
        # (ranges stay short: a sweep of thousands of points is work the user asked for, not a hang)
        value = rng.choice(["①", "٣", "1..12:+1", "2..2147483647:x4096", 2**31 - 1, "0x10", "1,2,①", 10**30, "9" * 50,
                            "4..2:x2", "1..4:x1", 999_983, "1..20000:+1"])
        if key == "sizes":
            entry["sizes"][rng.choice(["m", "n", "k"])] = value
        else:
            entry[key] = value
        how = f"{key} = {str(value)[:20]}"
    elif kind == "model":
        files["model.yaml"], how = hostile_model(rng, model)
    elif kind == "workload":
        files["workload.yaml"], how = hostile_doc(rng, files["workload.yaml"])
    elif kind == "arch":
        files["arch.yaml"], how = hostile_doc(rng, files["arch.yaml"])
    else:
        sweep["workloads"][0] = {"workload": rng.choice(["chain-gemm-bias-relu", "chain-llama7b-block"])}
    if kind == "vary":                  # an architecture grid, perhaps hostile
        sweep["archs"] = [{"base": "arch.yaml", "vary": {rng.choice(VARIED_PATHS): rng.choice(VARIED_VALUES)}}]
        how = f"{sweep['archs'][0]['vary']}"[:60]
    files["sweep.yaml"] = sweep
    argv = ["sweep", "{sweep.yaml}", "--jobs", "1", "--db", "{dir}/results.sqlite", "--quiet",
            "--time-limit", rng.choice(["0.5", "1"])]
    if rng.random() < 0.3:
        argv += ["--strategy", rng.choice(["greedy", "joint", "greedy,joint"])]
    if rng.random() < 0.3:
        argv.append("--keep-going")
    if "chains" in model and isinstance(sweep, dict) and rng.random() < 0.3:
        sweep["fuse"] = True
    return Case("sweep", files, argv, f"{kind}: {how}")


def model_case(rng, pool) -> Case:
    model = copy.deepcopy(rng.choice(pool["models"]))
    doc, how = hostile_model(rng, model) if rng.random() < 0.8 else (model, "valid")
    files = {"arch.yaml": copy.deepcopy(pool["tiny_arch"]), "model.yaml": doc}
    argv = ["sweep", "{arch.yaml}", "--model", "{model.yaml}", "--jobs", "1", "--db", "{dir}/results.sqlite",
            "--quiet", "--time-limit", rng.choice(["0.5", "1"]), "--strategy", rng.choice(["greedy", "greedy,joint"])]
    if rng.random() < 0.4:
        argv += [rng.choice(["--seq", "--batch"]), rng.choice(["4", "1,2", "2147483647", "①", "1..3:+1", "999983"])]
    if rng.random() < 0.3:
        argv += ["--phase", rng.choice(["prefill", "decode", "nope", "prefill,decode"])]
    if "chains" in model and rng.random() < 0.4:
        argv.append("--fuse")
    return Case("model", files, argv, f"model: {how}")


# ----------------------------------------------------------------------------- Timeloop files

def timeloop_case(rng, pool) -> Case:
    design = rng.choice(["v04", "v03"])
    docs = {k: copy.deepcopy(v) for k, v in pool["timeloop"][design].items()}
    kind = rng.choice(sorted(docs))
    pick = rng.random()
    if pick < 0.75:
        docs[kind], how = hostile_doc(rng, docs[kind])
    elif pick < 0.9:
        docs[kind] = {**docs[kind]}
        how = "valid"
    else:
        # a valid problem of a size that once hung
        inst = docs["problem"]["problem"]["instance"]
        inst[rng.choice([k for k in inst if k in docs["problem"]["problem"]["shape"]["dimensions"]])] = \
            rng.choice(LARGE_SIZES)
        kind, how = "problem", "large size"
    files = {f"tl_{k}.yaml": v for k, v in docs.items()}
    tagged = {f"tl_{k}.yaml" for k in docs}
    a, p, m, e = "{tl_arch.yaml}", "{tl_problem.yaml}", "{tl_map.yaml}", "{tl_ERT.yaml}"
    ert = ["--ert", e] if rng.random() < 0.8 else []
    roll = rng.random()
    if roll < 0.35:
        extra = ["{tl_constraints.yaml}"] if "tl_constraints.yaml" in files and rng.random() < 0.7 else []
        argv = ["import-timeloop", a, p, m, *extra, "-o", "{dir}/imported", *ert]
    elif roll < 0.7:
        argv = ["evaluate", a, p, m, *ert, "--json"]
    elif roll < 0.9:
        budget = ["--max-evaluations", "800"] if rng.random() < 0.6 else ["--time-limit", rng.choice(["0.5", "1"])]
        space = ["--mapspace", "{tl_constraints.yaml}"] if "tl_constraints.yaml" in files and rng.random() < 0.5 else []
        strategy = rng.choice(["greedy", "joint", "random"])
        argv = ["search", a, p, *space, "--strategy", strategy, *budget,
                *(["--samples", "300"] if strategy == "random" else []), *ert, "--json"]
    else:
        argv = ["explain", a, p, m, *ert, "--json"]
    return Case("timeloop", files, argv, f"{kind}: {how}", tagged)


def onnx_case(rng, pool) -> Case:
    from fuzz_onnx_cases import onnx_case as case
    return case(rng, pool, Case)


SURFACES = {"native": native_case, "fuse": fuse_case, "emit": emit_case, "triton": triton_case,
            "sweep": sweep_case, "model": model_case, "timeloop": timeloop_case, "onnx": onnx_case, "gpu": gpu_case}
# shares of the runs: the surfaces added since the last round get most of them
WEIGHTS = {"native": 0.12, "fuse": 0.07, "emit": 0.07, "triton": 0.07, "sweep": 0.07, "model": 0.06, "timeloop": 0.12,
           "onnx": 0.07, "gpu": 0.35}


def make_case(rng, pool) -> Case:
    surface = rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
    return SURFACES[surface](rng, pool)

"""Fuzz the command line with generated bad inputs and classify what each run ends in.

    PYTHONPATH=$PWD nice python3 scripts/fuzz_cli.py --runs 5000 --seed 1 [--time-limit 10] [--out DIR]

Each run writes an architecture, a workload, a mapping and a mapspace file (valid bases, one
or more of them made hostile: mutated at random key paths, replaced by broken YAML, an einsum
from a garbage alphabet, or a mapspace that is valid alone but leaves the arch no option: no
factor within its bounds, a stage list beyond the level's max_stages, every loop order of a
level forbidden, a fixed order and its own ban, a keep naming no tensor) and runs one command
(evaluate, mapspace, search with each strategy, explain, compare) through `mapper.cli.main`
in this process, under a wall-clock limit (SIGALRM) and an address-space limit (a memory
blow-up becomes a MemoryError). Outcomes:

- `clean error naming the file`: exit 2, one stderr line `mapper: error: FILE...` for an input;
- `explained infeasible`: exit 2, one line saying why no mapping fits or the search found none;
- `success`: exit 0 (with --json: strict JSON on stdout);
- `error without the file`: any other exit status or message;
- `traceback`, `memory error`, `hang`: an exception out of `main`, a MemoryError, the time limit.

Prints a table of outcomes, and per traceback / file-less class one example command and its
files (kept under --out). Seeded: the same seed gives the same inputs.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import io
import itertools
import json
import random
import re
import resource
import shutil
import signal
import sys
import time
import traceback
import warnings
from collections import Counter
from pathlib import Path

import yaml

from mapper.cli import main

ROOT = Path(__file__).resolve().parent.parent
INFEASIBLE = re.compile(r"^mapper: error: (no mapping of .* fits|exhaustive search refuses|\w+ search found no valid"
                        r"|the search.s budget|greedy: after fixing .* no choice at level)")
NASTY_NUMBERS = [0, -1, -2**64, 2**31, 2**63, 2**64, 10**400, 0.5, -0.0, 1e308, 1e-320,
                 float("nan"), float("inf"), float("-inf"), 3, 7, 1000]
NASTY_STRINGS = ["", " ", "64 XB", "1e400 KiB", "-5 B", "nan", "inf", "64 kb", "10 Gb/s", "3 bits", "½ KiB",
                 "0x40", "1_000", "unlimited", "output", "input", "weight", "ü😀", "x" * 3000, "\x00",
                 "Z[m,n] += A[m,k]", "GlobalBuffer", "DRAM", "RegisterFile", "m", "n", "k", "A", "B", "Z", "every",
                 "innermost", "outermost"]
RAW_FILES = ["", "\n", "---\n...\n", "42\n", "- 1\n- 2\n", "just a string\n", "null\n", "[[[[]]]]\n",
             "[" * 3000 + "]" * 3000 + "\n", "name: !!python/name:os.system\n", "name: x\nname: y\n",
             "name: [unclosed\n", "\t- tab\n", "key: value\n  bad indent: 1\n", "? [a, b]\n: 1\n",
             "name: x\n---\nname: y\n", "\ufeffname: x\n", "n: " + "9" * 3000 + "\n",
             "a: &a [x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
             "c: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c]\n"]
EINSUM_ALPHABET = "ZABCmnkpqrs[],+*= 0123456789_-()"


def _yaml(name: str):
    return yaml.safe_load((ROOT / name).read_text())


def bases() -> dict[str, list[dict]]:
    """Valid documents of each kind: small enough that a search answers within a second."""
    toy, pe = _yaml("archs/toy.yaml"), _yaml("archs/pe-array.yaml")
    gemm = _yaml("workloads/gemm-256.yaml")
    gemm["name"], gemm["sizes"] = "gemm-32", {"m": 32, "n": 32, "k": 32}
    conv = _yaml("workloads/conv-alexnet-conv3.yaml")
    conv["sizes"] = {"n": 1, "k": 8, "c": 4, "p": 4, "q": 4, "r": 3, "s": 3}
    mapping = {"arch": "toy", "workload": "gemm-32", "mapping": [       # output-stationary, as the bundled 256 one
        {"level": "DRAM", "loops": [{"dim": "m", "bound": 2}]},
        {"level": "GlobalBuffer", "loops": [{"dim": "k", "bound": 4}, {"dim": "n", "bound": 2}],
         "spatial": [{"dim": "m", "bound": 16, "axis": "x"}, {"dim": "n", "bound": 16, "axis": "y"}]},
        {"level": "RegisterFile", "loops": [{"dim": "k", "bound": 8}]}]}
    spaces = [_yaml(f"constraints/{n}.yaml") for n in ("weight-stationary", "bypass", "imperfect", "min-util-50")]
    return {"arch": [toy, pe], "workload": [gemm, conv], "mapping": [mapping], "mapspace": spaces}


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, prefix + (i,))


def _get(node, path):
    for key in path:
        node = node[key]
    return node


def hostile_value(rng: random.Random, depth: int = 0):
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
        return {rng.choice(["name", "min", "max", "dim", "bound", "m", "k", "ü"]): hostile_value(rng, depth + 1)
                for _ in range(rng.randint(0, 3))}
    return rng.random() * 10 ** rng.randint(-5, 5)


def mutated(rng: random.Random, base: dict) -> dict:
    doc = copy.deepcopy(base)
    for _ in range(rng.randint(1, 3)):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = rng.choice(paths)
        parent, key = _get(doc, path[:-1]), path[-1]
        action = rng.choice(["replace", "replace", "replace", "delete", "add", "duplicate"])
        if action == "replace":
            parent[key] = hostile_value(rng)
        elif action == "delete":
            del parent[key]
        elif action == "add" and isinstance(parent, dict):
            parent[rng.choice(["colour", "Name", "keep", "levels", "stages", "ü"])] = hostile_value(rng)
        elif action == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))
    return doc


def no_option_mapspace(rng: random.Random, arch: dict, workload: dict) -> dict:
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


def garbage_einsum(rng: random.Random) -> dict:
    if rng.random() < 0.5:
        einsum = "".join(rng.choice(EINSUM_ALPHABET) for _ in range(rng.randint(0, 40)))
    else:
        einsum = rng.choice(["Z[m,n] += A[m,k] * B[k,n] * C[n]", "Z[] += A[m]", "Z[m] += Z[m]", "Z[m] += A[m] * ",
                             "Z[m,m] += A[m,m]", "Z[0*m] += A[m]", "Z[m+m] += A[m]", "Z[m] += A[m+k] * B[k]",
                             "Z[m] += A[" + "m+" * 500 + "m]", "Z[m,n] += A[m,k] * B[k,n]"])
    sizes = {d: rng.choice([0, 1, 2, 3, 7, 2**31 - 1, -4]) for d in rng.sample("mnkpqrs", rng.randint(1, 5))}
    return {"name": "e", "einsum": einsum, "sizes": sizes, "dtype": rng.choice(["int8", "fp16", "int3", 8])}


def make_case(rng: random.Random, pool: dict[str, list[dict]]) -> tuple[dict, str]:
    """The four documents (dict, or bytes of a raw file) and which kind was made hostile."""
    docs = {kind: copy.deepcopy(rng.choice(pool[kind])) for kind in pool}
    if docs["workload"]["einsum"] != "Z[m,n] += A[m,k] * B[k,n]":
        docs["mapping"] = None       # the bundled mapping is a GEMM's
    pick = rng.random()
    if pick < 0.35:
        kind = rng.choice(list(pool))
        if docs[kind] is None:
            kind = "mapspace"
        docs[kind] = mutated(rng, docs[kind])
    elif pick < 0.45:
        kind = rng.choice(list(pool))
        docs[kind] = rng.choice(RAW_FILES).encode() if rng.random() < 0.7 else rng.randbytes(rng.randint(0, 100))
    elif pick < 0.55:
        kind = "workload"
        docs[kind] = garbage_einsum(rng)
        docs["mapping"] = None
    else:
        kind = "mapspace"
        docs[kind] = no_option_mapspace(rng, docs["arch"], docs["workload"])
    return docs, kind


def command_for(rng: random.Random, kind: str, files: dict[str, Path], has_mapping: bool) -> list[str]:
    a, w = str(files["arch"]), str(files["workload"])
    if kind == "mapping" or (has_mapping and rng.random() < 0.15):
        return ["evaluate", a, w, str(files["mapping"]), "--json"]
    roll = rng.random()
    space = ["--mapspace", str(files["mapspace"])] if kind == "mapspace" or rng.random() < 0.5 else []
    if roll < 0.55:         # counted exactly up to 100,000 factor combinations, else estimated
        return ["mapspace", a, w, *space, "--exact-limit", "100000", "--json"]
    # searches mostly under an evaluation budget: what they do then does not depend on the
    # machine's load (other users share it), and a run ends after a bounded amount of work
    budget = ["--max-evaluations", "1500"] if rng.random() < 0.7 else ["--time-limit", "0.5"]
    if roll < 0.88:
        strategy = rng.choice(["greedy", "greedy", "joint", "joint", "random", "exhaustive"])
        extra = ["--samples", "500"] if strategy == "random" else []
        return ["search", a, w, *space, "--strategy", strategy, *budget, "--json", *extra]
    if roll < 0.94:
        return ["compare", a, w, *space, *budget, "--json"]
    return ["explain", a, w, *space, "--time-limit", "0.5", "--cpsat-seconds", "0.2", "--json"]


class _Hang(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Hang()


def run_once(argv: list[str], files: list[Path], seconds: float) -> tuple[str, str]:
    """(outcome, detail): detail is the traceback's last frame and exception, or the message.
    A hang is `seconds` of CPU time (a starved process on a shared machine is no hang), or ten
    times that of wall clock (a run blocked without computing)."""
    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _on_alarm), signal.signal(signal.SIGPROF, _on_alarm)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, 10 * seconds)
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            warnings.simplefilter("always")
            try:
                status = main(argv)
            except SystemExit as exc:        # argparse refusing a flag
                status = exc.code if isinstance(exc.code, int) else 1
    except _Hang:
        return "hang", f"over {seconds} s"
    except MemoryError:
        return "memory error", ""
    except Exception as exc:                  # noqa: BLE001 - what the fuzzer is looking for
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        return "traceback", f"{type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno} ({frame.name})"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGALRM, previous[0])
        signal.signal(signal.SIGPROF, previous[1])
    lines = err.getvalue().splitlines()
    if caught:
        return "error without the file", f"warning: {caught[0].message}"[:200]
    if status == 0:
        try:
            json.loads(out.getvalue(), parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        except ValueError as exc:
            return "error without the file", f"not strict JSON: {exc}"[:200]
        return "success", ""
    errors = [line for line in lines if not line.startswith("mapper: note: ")]
    message = errors[0] if errors else "(no message)"
    if status == 2 and len(errors) == 1:
        if any(message.startswith(f"mapper: error: {f}") for f in map(str, files)):
            return "clean error naming the file", ""
        if INFEASIBLE.search(message):
            return "explained infeasible", ""
    return "error without the file", f"status {status}: {message}"[:300]


def _write(path: Path, doc) -> Path:
    if isinstance(doc, bytes):
        path.write_bytes(doc)
    else:
        path.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False))
    return path


def _class_of(outcome: str, detail: str) -> str:
    """Failures grouped by where they happen (tracebacks) or by message shape (file-less errors)."""
    if outcome == "traceback":
        return detail
    return re.sub(r"\d[\d,.]*", "N", re.sub(r"'[^']*'", "'…'", detail))[:120]


def main_fuzz(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--time-limit", type=float, default=10.0, help="CPU seconds per run before it counts as a hang")
    parser.add_argument("--memory-gib", type=float, default=6.0, help="address-space limit of this process")
    parser.add_argument("--out", type=Path, default=Path("fuzz-out"), help="examples of each failure class")
    args = parser.parse_args(argv)
    limit = int(args.memory_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    rng, pool = random.Random(args.seed), bases()
    work = args.out / "work"
    work.mkdir(parents=True, exist_ok=True)
    outcomes, classes, examples = Counter(), Counter(), {}
    started = time.monotonic()
    for run in range(args.runs):
        docs, kind = make_case(rng, pool)
        files = {k: _write(work / f"{k}.yaml", d) for k, d in docs.items() if d is not None}
        files.setdefault("mapping", work / "mapping.yaml")
        argv_run = command_for(rng, kind, files, docs["mapping"] is not None)
        outcome, detail = run_once(argv_run, list(files.values()), args.time_limit)
        outcomes[outcome] += 1
        if outcome not in ("success", "clean error naming the file", "explained infeasible"):
            key = (outcome, _class_of(outcome, detail))
            classes[key] += 1
            if key not in examples:
                keep = args.out / f"example-{len(examples)}"
                shutil.copytree(work, keep, dirs_exist_ok=True)
                examples[key] = (run, " ".join(argv_run).replace(str(work), str(keep)), detail)
                (keep / "command.txt").write_text(f"mapper {examples[key][1]}\n{outcome}: {detail}\n")
        if (run + 1) % 250 == 0:
            print(f"{run + 1} runs, {time.monotonic() - started:.0f} s: {dict(outcomes)}", file=sys.stderr, flush=True)
    print(f"fuzz_cli: {args.runs} runs, seed {args.seed}, {time.monotonic() - started:.0f} s\n")
    print("| outcome | runs |\n|---|---:|")
    for outcome in ("clean error naming the file", "success", "explained infeasible", "traceback", "hang",
                    "memory error", "error without the file"):
        print(f"| {outcome} | {outcomes[outcome]:,} |")
    for (outcome, cls), n in classes.most_common():
        run, command, detail = examples[(outcome, cls)]
        print(f"\n{outcome} x{n}: {cls}\n  first at run {run}: mapper {command}\n  {detail}")
    return 0 if not classes else 1


if __name__ == "__main__":
    sys.exit(main_fuzz())

"""Fuzz the command line with generated bad inputs and classify what each run ends in.

    PYTHONPATH=$PWD nice python3 scripts/fuzz_cli.py --runs 10000 --seed 1 [--hang 10] [--out DIR]

Each run writes the files of one case (`fuzz_cases.py`: every surface of the command line,
native specs, op graphs, emit, Triton configs, sweep files, models and Timeloop files; valid
bases made hostile) and runs its command through `mapper.cli.main` in this process, under a
CPU-time limit (SIGPROF; ten times that of wall clock, SIGALRM) and an address-space limit (a
memory blow-up becomes a MemoryError). Outcomes:

- `clean error naming the file`: exit 2, one stderr line `mapper: error: FILE...` for an input
  or an output named on the command line, or argparse's refusal of a flag's value;
- `explained infeasible`: exit 2, one line saying why no mapping fits or the search found none;
  a sweep's exit 1 after its points were stored with their reasons (none of them an exception);
- `success`: exit 0 (with --json: strict JSON on stdout);
- `error without the file`: any other exit status or message, or a Python warning;
- `traceback`, `memory error`, `hang`: an exception out of `main` (or one a sweep stored as a
  point's `failed` reason), a MemoryError, the CPU-time limit;
- `time limit overrun`: a run with `--time-limit T` whose wall time passed its bound plus a
  second: T (search, explain, emit, fuse), 2T for compare (its two searches each take the full
  limit), T per point studied for a sweep (its limit is per point; a model it imports from an
  ONNX file is imported before the clock starts, as the import is no search), T per capacity
  for `explain --capacity` (a search each); sweeps and capacity curves get the CPU time of
  SWEEP_HANG_FACTOR runs before they count as hangs.

Prints the outcomes per surface and command, the time limits (runs, worst overrun), and per
failure class one example command and its files (kept under --out). Seeded: the same seed
gives the same inputs.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import re
import resource
import shutil
import signal
import sqlite3
import sys
import time
import traceback
import warnings
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzz_cases import bases, make_case, write_doc  # noqa: E402

from mapper.cli import main  # noqa: E402

INFEASIBLE = re.compile(r"^mapper: error: (op [^:]*: no mapping: )?(no mapping of .* fits|exhaustive search refuses"
                        r"|\w+ search found no valid|the search.s budget|greedy: after fixing .* no choice at level)")
ARGPARSE_FLAG = re.compile(r"^mapper [\w-]+: error: argument (--[\w-]+)")
SWEEP_FAILED = re.compile(r"^mapper: \d+ sweep point\(s\) found no mapping")
SLACK_S = 1.0                 # a time limit holds when the command ends within it plus this
SWEEP_HANG_FACTOR = 6         # a sweep's CPU time before it counts as a hang, in runs' (--hang)
OUTCOMES = ("clean error naming the file", "success", "explained infeasible", "traceback", "hang",
            "memory error", "error without the file", "time limit overrun")
FAILURES = OUTCOMES[3:]


class _Hang(BaseException):
    """The run's time is up: a BaseException, so that no `except Exception` of the code under
    test (a sweep storing a point's exception, a warm start that may fail) swallows it."""


def _on_alarm(signum, frame):
    raise _Hang()


def _call(argv: list[str], seconds: float):
    """(status or None, stdout, stderr, warnings, (outcome, detail) or None) of one run."""
    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _on_alarm), signal.signal(signal.SIGPROF, _on_alarm)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.setitimer(signal.ITIMER_REAL, 10 * seconds)
    caught: list = []
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            warnings.simplefilter("always")
            try:
                status = main(argv)
            except SystemExit as exc:        # argparse refusing a flag
                status = exc.code if isinstance(exc.code, int) else 1
    except _Hang:
        return None, "", "", [], ("hang", f"over {seconds} s")
    except MemoryError:
        return None, "", "", [], ("memory error", "")
    except Exception as exc:                  # noqa: BLE001 - what the fuzzer is looking for
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        return None, "", "", [], ("traceback", f"{type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno} "
                                               f"({frame.name})")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGALRM, previous[0])
        signal.signal(signal.SIGPROF, previous[1])
    return status, out.getvalue(), err.getvalue(), list(caught), None


def _failed_points(db: Path) -> list[str]:
    """The reasons of a sweep's points stored as `failed`: an exception inside a point."""
    if not db.is_file():
        return []
    with contextlib.closing(sqlite3.connect(db)) as con:
        return [r for (r,) in con.execute("select reason from points where status = 'failed'")]


def classify(argv: list[str], files: list[Path], work: Path, seconds: float) -> tuple[str, str, float]:
    """(outcome, detail, wall seconds) of one run."""
    _import_first(argv, seconds)
    started = time.monotonic()
    status, stdout, stderr, caught, failure = _call(argv, seconds)
    wall = time.monotonic() - started
    if failure:
        return (*failure, wall)
    failed = _failed_points(work / "results.sqlite") if argv[0] == "sweep" else []
    if failed:
        memory = [r for r in failed if r.startswith("MemoryError")]
        return ("memory error" if memory else "traceback"), f"sweep point failed: {failed[0]}"[:200], wall
    if caught:
        return "error without the file", f"warning: {caught[0].message}"[:200], wall
    lines = [line for line in stderr.splitlines() if not line.startswith("mapper: note: ")]
    message = lines[0] if lines else "(no message)"
    if status == 0:
        if "--json" in argv:
            try:
                json.loads(stdout, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
            except ValueError as exc:
                return "error without the file", f"not strict JSON: {exc}"[:200], wall
        overrun = _overrun(argv, stdout, wall)
        if overrun:
            return "time limit overrun", overrun, wall
        return "success", "", wall
    if status == 1 and argv[0] == "sweep" and len(lines) == 1 and SWEEP_FAILED.match(message):
        overrun = _overrun(argv, stdout, wall)
        return ("time limit overrun", overrun, wall) if overrun else ("explained infeasible", "", wall)
    if status == 2 and lines and ARGPARSE_FLAG.match(lines[-1]) and \
            ARGPARSE_FLAG.match(lines[-1]).group(1) in argv:      # argparse refusing a flag's value
        return "clean error naming the file", "", wall
    if status == 2 and len(lines) == 1:
        overrun = _overrun(argv, stdout, wall)
        if overrun:
            return "time limit overrun", overrun, wall
        named = [str(f) for f in files] + [a for a in argv if a.startswith(str(work))]     # inputs, outputs
        if any(message.startswith(f"mapper: error: {f}") for f in named) or _names_a_flag(message, argv):
            return "clean error naming the file", "", wall
        if INFEASIBLE.search(message):
            return "explained infeasible", "", wall
    return "error without the file", f"status {status}: {message}"[:300], wall


def _import_first(argv: list[str], seconds: float) -> None:
    """A sweep of a model file the importer reads (ONNX) imports it before its first point: that
    import is done here first, before the clock starts (the sweep then finds it in the process's
    cache), since a sweep's time limit is per point and the import is no search. Whatever it
    raises, the run itself raises again and is classified."""
    from mapper.model_import.cache import importable, imported_model
    if argv[0] != "sweep" or "--model" not in argv or not importable(argv[argv.index("--model") + 1]):
        return
    values = {flag: argv[argv.index(flag) + 1] for flag in ("--seq", "--batch") if flag in argv}
    first = {flag: int(v.split(",")[0]) if v.split(",")[0].isascii() and v.split(",")[0].isdigit() else None
             for flag, v in values.items()}
    with contextlib.suppress(Exception):
        _call_quietly(lambda: imported_model(argv[argv.index("--model") + 1], first.get("--seq"),
                                             first.get("--batch")), seconds)


def _call_quietly(function, seconds: float) -> None:
    previous = signal.signal(signal.SIGPROF, _on_alarm)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            function()
    except _Hang:
        pass
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def _names_a_flag(message: str, argv: list[str]) -> bool:
    """A refusal of a command-line value names its flag first (`--epilogue 'tanh': ...`,
    `command line: --samples: ...`): the input at fault is that flag, given in `argv`."""
    match = re.match(r"^mapper: error: (?:command line: )?(--[\w/-]+)", message)
    return bool(match) and any(flag in argv for flag in re.findall(r"--[\w-]+", match.group(1)))


def time_bound(argv: list[str], stdout: str) -> float | None:
    """The wall seconds a run with `--time-limit` must end within (before the slack), or None."""
    if "--time-limit" not in argv or "--max-evaluations" in argv:
        return None
    limit = float(argv[argv.index("--time-limit") + 1])
    if argv[0] == "compare":
        return 2 * limit
    if argv[0] == "explain" and "--capacity" in argv:      # a search per capacity, each its limit
        try:
            curve = json.loads(stdout)
        except ValueError:
            return None
        return (len(curve["points"]) + len(curve["infeasible_capacities"])) * limit
    if argv[0] == "sweep":
        searched = re.search(r"(\d+) searched in", stdout)
        studied = re.search(r"(\d+) studied in", stdout)
        if not searched:                # refused before any point ran
            return None
        return (int(searched.group(1)) + (int(studied.group(1)) if studied else 0)) * limit
    return limit


def _overrun(argv: list[str], stdout: str, wall: float) -> str:
    bound = time_bound(argv, stdout)
    TIMES.append((argv[0], bound, wall))
    if bound is not None and wall > bound + SLACK_S:
        return f"{argv[0]}: {wall:.1f} s for a bound of {bound:g} s"
    return ""


TIMES: list[tuple] = []        # (command, bound or None, wall) of every run that ended


def _write(folder: Path, files: dict, tagged: set) -> dict[str, Path]:
    return {name: write_doc(folder / name, doc) for name, doc in files.items()}


def _class_of(outcome: str, detail: str) -> str:
    """Failures grouped by where they happen (tracebacks) or by message shape (the others)."""
    if outcome in ("traceback", "time limit overrun"):
        return re.sub(r"\d[\d,.]*", "N", detail) if outcome != "traceback" else detail
    return re.sub(r"\d[\d,.]*", "N", re.sub(r"'[^']*'", "'…'", detail))[:120]


def main_fuzz(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--hang", type=float, default=10.0, help="CPU seconds per run before it counts as a hang")
    parser.add_argument("--memory-gib", type=float, default=6.0, help="address-space limit of this process")
    parser.add_argument("--out", type=Path, default=Path("fuzz-out"), help="examples of each failure class")
    parser.add_argument("--surface", action="append", help="only these surfaces (repeatable)")
    args = parser.parse_args(argv)
    limit = int(args.memory_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    rng, pool = random.Random(args.seed), bases()
    work = args.out / "work"
    outcomes, by_command, classes, examples = Counter(), defaultdict(Counter), Counter(), {}
    started = time.monotonic()
    done = 0
    while done < args.runs:
        case = make_case(rng, pool)
        if args.surface and case.surface not in args.surface:
            continue
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        paths = _write(work, case.files, case.tagged)
        fields = {name: str(path) for name, path in paths.items()} | {"dir": str(work)}
        argv_run = [re.sub(r"\{([^{}]+)\}", lambda m: fields[m.group(1)], a) for a in case.argv]
        # a sweep or a capacity curve runs many searches: more CPU time than one run
        hang = args.hang * (SWEEP_HANG_FACTOR if argv_run[0] == "sweep" or "--capacity" in argv_run else 1)
        outcome, detail, wall = classify(argv_run, list(paths.values()), work, hang)
        outcomes[outcome] += 1
        by_command[(case.surface, argv_run[0])][outcome] += 1
        if outcome in FAILURES:
            key = (outcome, f"{argv_run[0]}: {_class_of(outcome, detail)}")
            classes[key] += 1
            if key not in examples:
                keep = args.out / f"example-{len(examples)}"
                shutil.copytree(work, keep, dirs_exist_ok=True)
                examples[key] = (done, " ".join(argv_run).replace(str(work), str(keep)), detail, case.hostile)
                (keep / "command.txt").write_text(f"mapper {examples[key][1]}\n{outcome}: {detail}\n{case.hostile}\n")
        done += 1
        if done % 250 == 0:
            print(f"{done} runs, {time.monotonic() - started:.0f} s: {dict(outcomes)}", file=sys.stderr, flush=True)
    print(f"fuzz_cli: {args.runs} runs, seed {args.seed}, {time.monotonic() - started:.0f} s\n")
    print("| outcome | runs |\n|---|---:|")
    for outcome in OUTCOMES:
        print(f"| {outcome} | {outcomes[outcome]:,} |")
    print("\n| surface | command | runs | " + " | ".join(OUTCOMES) + " |")
    print("|---|---|---:|" + "---:|" * len(OUTCOMES))
    for (surface, command), counts in sorted(by_command.items()):
        print(f"| {surface} | {command} | {sum(counts.values()):,} | "
              + " | ".join(f"{counts[o]:,}" for o in OUTCOMES) + " |")
    timed = [(c, b, w) for c, b, w in TIMES if b is not None]
    print(f"\ntime limits: {len(timed):,} runs under --time-limit; worst (wall - bound) per command:")
    for command in sorted({c for c, _, _ in timed}):
        runs = [(w - b, b, w) for c, b, w in timed if c == command]
        worst = max(runs)
        print(f"  {command}: {len(runs):,} runs, worst {worst[0]:+.2f} s (bound {worst[1]:g} s, wall {worst[2]:.2f} s), "
              f"{sum(o > SLACK_S for o, _, _ in runs)} over the bound by more than {SLACK_S:g} s")
    for (outcome, cls), n in classes.most_common():
        run, command, detail, hostile = examples[(outcome, cls)]
        print(f"\n{outcome} x{n}: {cls}\n  first at run {run} ({hostile}): mapper {command}\n  {detail}")
    return 0 if not classes else 1


if __name__ == "__main__":
    sys.exit(main_fuzz())

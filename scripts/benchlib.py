"""What the benchmark scripts share: their command line's `--only` and `--write` (`bench_parser`);
one strategy run, timed, in a process of its own whose peak resident memory is read at the end
(`run_measured`); the table, printed as it comes and put into a Markdown file (`Table`)."""
from __future__ import annotations

import argparse
import multiprocessing
import resource
import time


def bench_parser(doc: str, cases: str = "cases") -> argparse.ArgumentParser:
    """A benchmark's command line, described by the first line of its `doc`: `--only SUBSTRING`
    (run the `cases` whose name contains it; "": all) and `--write FILE` (`Table.write`)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--only", default="", help=f"run the {cases} whose name contains this")
    parser.add_argument("--write", metavar="FILE", help="also put the table into this Markdown file (its section, dated)")
    return parser


def run_measured(strategy, space, objective, time_limit: float | None = None):
    """(result, error text, seconds, peak MiB) of `strategy` run within `time_limit` seconds
    (a `SearchContext` of its own, as a library caller gives it); an exception becomes the error text, so that a
    table goes on past a case that fails. The run is a forked child process, so that its peak
    is its own (`ru_maxrss`: the interpreter, numpy and OR-Tools included, as a user's command
    sees it, plus its largest walk worker's) and its time is not slowed by tracing allocations
    (tracemalloc, used before, slowed numpy-heavy searches several times over)."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_measured_child, args=(strategy, space, objective, time_limit, send))
    child.start()
    send.close()
    try:
        out = receive.recv()
    except EOFError:                    # the child died (killed for memory, say)
        out = (None, f"the run's process ended with status {child.exitcode}", float("nan"), float("nan"))
    child.join()
    return out


def _measured_child(strategy, space, objective, time_limit, send) -> None:
    from mapper.search import SearchContext
    start = time.perf_counter()
    try:
        result, error = strategy.run(space, objective, SearchContext(time_limit)), None
    except Exception as exc:
        result, error = None, f"{type(exc).__name__}: {str(exc)[:90]}"
    seconds = time.perf_counter() - start
    # KiB on Linux; with the walk on several cores (`mapper/search/joint/parallel.py`), its own peak
    # plus its largest worker's, an upper bound on what the run held at once
    peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    send.send((result, error, seconds, peak))
    send.close()


def joint_variants(ablation: bool) -> list:
    """(name, strategy): the joint search, and with `ablation` the same without CP-SAT
    proposals, without the local search (and its polish of new incumbents), and without both."""
    from mapper.search import Joint
    out = [("joint", Joint())]
    if ablation:
        out += [("no-cpsat", Joint(cpsat_seconds=0)),
                ("no-local", Joint(local_search=False)),
                ("neither", Joint(cpsat_seconds=0, local_search=False))]
    return out


class Table:
    """The lines of a benchmark's table, printed as they come and kept for `write_results`."""

    def __init__(self):
        self.lines: list[str] = []

    def print(self, line: str) -> None:
        print(line, flush=True)
        self.lines.append(line)

    def write(self, path: str | None, name: str) -> None:
        """Put the table into the Markdown file `path` as its section `name` (`write_results`);
        nothing where `path` is None (no `--write`)."""
        if path:
            write_results(path, name, self.lines)


def write_results(path, name: str, lines: list[str]) -> None:
    """Put `lines` (a table) into the Markdown file `path` as its section `name`, between the
    markers `<!-- name:begin -->` and `<!-- name:end -->` (appended at the end when it has none),
    dated, with the machine's cores and the command that measured it."""
    import datetime
    import os
    import pathlib
    import sys
    path = pathlib.Path(path)
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    command = " ".join(["python3", *sys.argv])
    section = (f"{begin}\nMeasured {datetime.date.today().isoformat()} on {os.cpu_count()} cores: `{command}`\n\n"
               "```text\n" + "\n".join(lines) + "\n```\n" + end)
    text = path.read_text() if path.exists() else ""
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + section + rest.split(end, 1)[1]
    else:
        text = text.rstrip() + ("\n\n" if text else "") + section + "\n"
    path.write_text(text)

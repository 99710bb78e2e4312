"""A sweep killed with SIGKILL leaves no process behind: its pool workers, their forked
helpers and multiprocessing's resource tracker all end within a few seconds (Linux: read
from /proc)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import mapper
from mapper.lifetime import die_with_parent

ROOT = Path(mapper.__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every process."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            out[int(entry.name)] = (int(fields[1]), fields[0])
    return out


def _descendants(root: int) -> set[int]:
    procs, found, frontier = _processes(), set(), {root}
    while frontier:
        frontier = {pid for pid, (ppid, _) in procs.items() if ppid in frontier} - found
        found |= frontier
    return found


def _alive(pids: set[int]) -> set[int]:
    procs = _processes()
    return {pid for pid in pids if pid in procs and procs[pid][1] != "Z"}     # a zombie holds nothing


def test_a_killed_sweep_leaves_no_process(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    sweep = subprocess.Popen(
        [sys.executable, "-m", "mapper", "sweep", "toy", "--gemm", "m=128,256,512,1024 n=256 k=256",
         "--strategy", "joint", "--time-limit", "30", "--jobs", "2", "--quiet", "--db", str(tmp_path / "r.db")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 60
        # two pool workers and the resource tracker, all started and running
        while time.monotonic() < deadline and len(workers) < 3 and sweep.poll() is None:
            time.sleep(0.1)
            workers = _descendants(sweep.pid)
        assert len(workers) >= 3, f"the sweep started {len(workers)} processes (status {sweep.poll()})"
        time.sleep(0.5)         # past the workers' start-up
        workers = _descendants(sweep.pid)
        sweep.send_signal(signal.SIGKILL)
        sweep.wait()
        deadline = time.monotonic() + 5
        while _alive(workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(workers), f"left behind: {sorted(_alive(workers))}"
    finally:
        if sweep.poll() is None:
            sweep.kill()
        for pid in _alive(workers):         # what a failure left behind, not the next test's problem
            os.kill(pid, signal.SIGKILL)


def _forked_then_wait(parent_pid_seen) -> None:
    die_with_parent(parent_pid_seen)
    time.sleep(30)


def test_a_worker_whose_parent_is_already_gone_exits():
    """The race die_with_parent covers: the parent died before the worker was told to follow it."""
    child = os.fork()
    if child == 0:
        try:
            _forked_then_wait(os.getppid() + 10**6)      # a parent pid that is not its parent
        finally:
            os._exit(3)         # reached only if die_with_parent did not kill it
    _, status = os.waitpid(child, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status

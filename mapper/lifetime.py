"""Worker processes that end with their parent (`die_with_parent`).

Why: a process killed with SIGKILL runs no cleanup, so a sweep's pool workers and a joint
search's forked workers would live on (each a few hundred MB), and with them multiprocessing's
resource tracker, which waits for every holder of its pipe to exit. Each worker calls
`die_with_parent` first thing. On Linux the kernel sends the worker SIGKILL when its parent
dies (prctl PR_SET_PDEATHSIG; the parent is the thread that started the worker, always the
parent's main thread here); elsewhere a daemon thread polls the parent's pid. Either way a
parent that died before the call is caught by comparing `os.getppid()` with the pid it had.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1            # <linux/prctl.h>
POLL_SECONDS = 0.5              # the fallback watcher's period


def die_with_parent(parent_pid: int) -> None:
    """End this process (SIGKILL, no cleanup: the parent's results are lost with it anyway)
    as soon as the process `parent_pid` that started it is gone."""
    if not (sys.platform.startswith("linux") and _kernel_signal_on_parent_death()):
        threading.Thread(target=_watch, args=(parent_pid,), daemon=True, name="die-with-parent").start()
    if os.getppid() != parent_pid:        # the parent died before the kernel was told
        os.kill(os.getpid(), signal.SIGKILL)


def _kernel_signal_on_parent_death() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(POLL_SECONDS)
    os.kill(os.getpid(), signal.SIGKILL)

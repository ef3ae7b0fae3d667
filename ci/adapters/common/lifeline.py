#!/usr/bin/env python3
"""An adapter's lifeline to ctxbench (stdlib only, Linux).

An adapter reads its protocol lines from ctxbench on stdin and exits when stdin closes. But
while a turn is in flight it is blocked on the agent CLI, not on stdin; if ctxbench is
killed then (kill -9, an OOM kill, a CI job cancelled), the agent keeps calling a provider
that is gone, possibly for minutes, and the adapter and the agent's whole process tree
outlive the run. `watch()` starts a daemon thread that notices the parent's death (the
adapter is re-parented) and then kills every process descended from the adapter, then the
adapter itself. Descendants are found through /proc, so an adapter need not track which
processes its agent started.

Self-test (what tests/runtimes.rs runs):
  lifeline.py --selftest   a stand-in parent starts a stand-in adapter that starts a
                           grandchild; the parent is SIGKILLed; exit 0 when adapter and
                           grandchild are gone within the deadline, 1 otherwise
"""

import os
import signal
import subprocess
import sys
import threading
import time

# How often the watch looks at the parent, in seconds.
POLL_SECONDS = 0.5


def _children():
    """Map pid -> parent pid of every process visible in /proc."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # The command name is in parentheses and may itself contain spaces or ')'.
        rest = stat[stat.rfind(")") + 2:].split()
        if len(rest) > 1:
            out[int(name)] = int(rest[1])
    return out


def descendants(pid):
    """Every process below `pid` (children first found, then theirs)."""
    parents = _children()
    found, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        found.extend(kids)
        frontier.extend(kids)
    return found


def kill_tree():
    """SIGKILL every descendant of this process, deepest last found first."""
    for pid in reversed(descendants(os.getpid())):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def watch():
    """Die with the parent: when it is gone, kill this process's tree and exit."""
    parent = os.getppid()

    def loop():
        while True:
            if os.getppid() != parent:
                kill_tree()
                os._exit(70)
            time.sleep(POLL_SECONDS)

    threading.Thread(target=loop, name="lifeline", daemon=True).start()


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1].split()[0] != "Z"
    except OSError:
        return False


def _selftest():
    here = os.path.abspath(__file__)
    if len(sys.argv) > 2 and sys.argv[2] == "adapter":
        # The stand-in adapter: a grandchild that would run forever, then block.
        watch()
        g = subprocess.Popen(["sleep", "600"])
        print(f"{os.getpid()} {g.pid}", flush=True)
        g.wait()
        return 0
    if len(sys.argv) > 2 and sys.argv[2] == "parent":
        a = subprocess.Popen([sys.executable, here, "--selftest", "adapter"],
                             stdout=subprocess.PIPE, text=True)
        print(a.stdout.readline().strip(), flush=True)
        a.wait()
        return 0
    parent = subprocess.Popen([sys.executable, here, "--selftest", "parent"],
                              stdout=subprocess.PIPE, text=True)
    line = parent.stdout.readline().split()
    if len(line) != 2:
        print("stand-in adapter did not start", file=sys.stderr)
        return 1
    adapter, grandchild = int(line[0]), int(line[1])
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 20 * POLL_SECONDS + 10
    while time.monotonic() < deadline:
        if not _alive(adapter) and not _alive(grandchild):
            print("ok: adapter and its agent process died with their parent")
            return 0
        time.sleep(0.05)
    for pid in (grandchild, adapter):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    print(f"adapter {adapter} alive: {_alive(adapter)}, grandchild {grandchild} alive: "
          f"{_alive(grandchild)}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--selftest":
        sys.exit(_selftest())
    print(__doc__)

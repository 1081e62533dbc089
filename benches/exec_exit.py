#!/usr/bin/env python3
"""Time from a `keel exec --json` request's terminal event line to the process's exit,
and the process's peak RSS, over several runs on a small scratch workspace.

Usage: python3 benches/exec_exit.py target/release/keel 10 tests/data/scripts/hello.json
(the binary, the number of runs, a script for the scripted model).

The peak RSS is the process's own `VmHWM`, read from /proc while it runs (the last
reading before it exits). The reaped child's `ru_maxrss` is not used: it also counts
the memory of the process that started it, before `exec` (here this Python
interpreter, about 14 MB)."""
import os
import subprocess
import sys
import tempfile
import threading
import time

binary = sys.argv[1]
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
script = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else None
exits, rss = [], []
for _ in range(runs):
    with tempfile.TemporaryDirectory() as ws, tempfile.TemporaryDirectory() as home:
        for j in range(5):
            with open(os.path.join(ws, f"f{j}.txt"), "w") as f:
                f.write("hello\n" * 10)
        env = dict(os.environ, KEEL_HOME=home)
        env.pop("KEEL_MODEL", None)
        args = [binary, "exec", "say hi", "--json", "--workspace", ws]
        if script:
            args += ["--model", f"scripted:{script}"]
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        peak, reaped = [0], threading.Event()

        def watch(pid=p.pid, peak=peak, reaped=reaped):
            # VmHWM only grows: the last reading before the exit is the peak.
            while not reaped.is_set():
                try:
                    with open(f"/proc/{pid}/status") as f:
                        for line in f:
                            if line.startswith("VmHWM:"):
                                peak[0] = max(peak[0], int(line.split()[1]))
                except OSError:
                    return
                time.sleep(0.001)

        watcher = threading.Thread(target=watch)
        watcher.start()
        terminal = None
        for line in p.stdout:
            if terminal is None and b'"session.completed"' in line:
                terminal = time.monotonic()
        _, status, _ = os.wait4(p.pid, 0)
        exited = time.monotonic()
        reaped.set()
        watcher.join()
        if terminal is None or status != 0:
            sys.exit(f"keel exec ended without session.completed or failed (wait status {status})")
        exits.append((exited - terminal) * 1e3)
        rss.append(peak[0] / 1024)
print("exit after the terminal event, ms:", " ".join(f"{x:.1f}" for x in sorted(exits)))
print("peak RSS, MB:", " ".join(f"{x:.1f}" for x in sorted(rss)))

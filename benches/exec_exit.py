#!/usr/bin/env python3
"""Time from a `keel exec --json` request's terminal event line to the process's exit,
and the process's peak RSS, over several runs on a small scratch workspace.

Usage: python3 benches/exec_exit.py target/release/keel 10 tests/data/scripts/hello.json
(the binary, the number of runs, a script for the scripted model)."""
import os, subprocess, sys, time, tempfile, json, resource
binary = sys.argv[1]
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
script = sys.argv[3] if len(sys.argv) > 3 else None
lat = []
rss = []
for i in range(runs):
    ws = tempfile.mkdtemp(); home = tempfile.mkdtemp()
    for j in range(5):
        open(os.path.join(ws, f"f{j}.txt"), "w").write("hello\n" * 10)
    env = dict(os.environ, KEEL_HOME=home)
    env.pop("KEEL_MODEL", None)
    args = [binary, "exec", "say hi", "--json", "--workspace", ws]
    if script:
        args += ["--model", f"scripted:{os.path.abspath(script)}"]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    t_term = None
    for line in p.stdout:
        if b'"session.completed"' in line and t_term is None:
            t_term = time.monotonic()
    t_eof = time.monotonic()
    _, status, ru = os.wait4(p.pid, 0)
    t_exit = time.monotonic()
    lat.append(((t_exit - t_term) * 1e3 if t_term else -1, (t_eof - t_term) * 1e3 if t_term else -1))
    rss.append(ru.ru_maxrss / 1024)
lat.sort()
print("exit after terminal event ms (exit, stdout-eof):", [f"{a:.1f}/{b:.1f}" for a, b in lat])
print("max RSS MB:", sorted(f"{r:.1f}" for r in rss))

#!/usr/bin/env python3
"""Peak memory of one `keel bridge` running many sessions, each sending requests one
after another; each request makes one model turn with a tool call (`read_file`) and
one answering turn.

Usage: python3 benches/bridge_load.py target/release/keel [SESSIONS [REQUESTS [MODEL]]]
MODEL is `scripted` (default: each session its own scripted model, from a script file)
or `openai` (every session on one OpenAI Chat Completions server on loopback, started
by this script, streaming the same turns).

Prints the bridge's peak RSS (VmHWM, read from /proc while the bridge still runs), the
wall time, and the bridge's CPU time (user + system of the reaped process)."""
import json
import os
import subprocess
import sys
import tempfile
import time

import openai_provider

binary = sys.argv[1]
sessions = int(sys.argv[2]) if len(sys.argv) > 2 else 500
requests = int(sys.argv[3]) if len(sys.argv) > 3 else 20
model_kind = sys.argv[4] if len(sys.argv) > 4 else "scripted"


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    return 0


with tempfile.TemporaryDirectory() as ws, tempfile.TemporaryDirectory() as home:
    with open(os.path.join(ws, "README.md"), "w") as f:
        f.write("# Project\n\nA readme.\n")
    env = dict(os.environ, KEEL_HOME=home)
    env.pop("KEEL_MODEL", None)
    if model_kind == "openai":
        env["OPENAI_BASE_URL"] = openai_provider.start()
        env["OPENAI_API_KEY"] = "test"
        model = "openai:bench-model"
    else:
        turns = []
        for r in range(requests):
            turns.append({"toolCalls": [{"name": "read_file", "arguments": {"path": "README.md"}}]})
            turns.append({"text": f"Request {r} done."})
        script = os.path.join(home, "script.json")
        with open(script, "w") as f:
            json.dump({"turns": turns}, f)
        model = f"scripted:{script}"
    p = subprocess.Popen([binary, "bridge", "--mode", "auto-edit", "--workspace", ws],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env)

    def send(kind, rid, sid, payload):
        env = {"version": "1.0", "type": kind, "requestId": rid, "payload": payload}
        if sid:
            env["sessionId"] = sid
        p.stdin.write(json.dumps(env).encode() + b"\n")
        p.stdin.flush()

    start = time.monotonic()
    owner, sid, done = {}, [None] * sessions, [0] * sessions
    for i in range(sessions):
        owner[f"start{i}"] = i
        send("session.start", f"start{i}", None, {"model": model})
    finished, failed = 0, 0
    for line in p.stdout:
        if finished == sessions:
            break
        if not line.startswith(b"{"):
            continue  # a wrapper's own output (e.g. a heap profiler's)
        e = json.loads(line)
        i = owner.get(e.get("requestId"))
        if i is None:
            continue
        kind = e["type"]
        if kind == "session.started" or kind in ("session.completed", "session.failed",
                                                 "session.interrupted"):
            if kind == "session.started":
                sid[i] = e["sessionId"]
            else:
                failed += kind != "session.completed"
                done[i] += 1
            if done[i] < requests:
                rid = f"s{i}r{done[i]}"
                owner[rid] = i
                send("request.send", rid, sid[i], {"message": "read the readme"})
            else:
                finished += 1
                if finished == sessions:
                    break
        elif kind == "error" and e["requestId"].startswith("start"):
            sys.exit(f"session.start failed: {line!r}")
    wall = time.monotonic() - start
    hwm = status_kib(p.pid, "VmHWM:")
    send("runtime.shutdown", "bye", None, {})
    p.stdin.close()
    for _ in p.stdout:
        pass
    _, status, usage = os.wait4(p.pid, 0)
    print(f"{sessions} sessions x {requests} requests ({model_kind}): "
          f"peak RSS {hwm / 1024:.1f} MB, wall {wall:.1f} s, "
          f"CPU {usage.ru_utime + usage.ru_stime:.1f} s, "
          f"requests not completed {failed}, exit status {status}")

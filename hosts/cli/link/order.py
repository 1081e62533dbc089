#!/usr/bin/env python3
"""Writes hosts/cli/link/keel.order: the functions of the `keel` binary that its common
short runs execute, for the linker to lay out together at the start of the text segment.

Why: the kernel maps a binary's code around each page a process touches (fault-around,
64 KiB), so a short run of a large binary whose touched functions are spread over the
whole text keeps most of the text resident. Laid out together, the same functions fill
a few megabytes. See docs/performance.md ("Memory and exit of a one-request keel exec").

How: each scenario below runs under Valgrind's callgrind, which lists every function
that executed an instruction. Functions used by more scenarios come first. Names are
the binary's own symbols (mangled), so the file stays valid while the code changes:
a name that no longer exists is skipped by the linker, a new function is laid out
after the listed ones.

A function's name carries a hash of its crate's build (Rust's version, the crate's
version and features, the profile), so after a new Rust toolchain or a dependency
update most names no longer match and the file must be written again; `--check`
says how many still do.

Usage: python3 hosts/cli/link/order.py target/release/keel
(needs valgrind; takes about a minute). Rebuild the release binary afterwards.
       python3 hosts/cli/link/order.py --check target/release/keel"""
import json
import os
import subprocess
import sys
import tempfile

check = sys.argv[1] == "--check"
binary = os.path.abspath(sys.argv[-1])
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
scripts = os.path.join(root, "tests", "data", "scripts")
sys.path.insert(0, os.path.join(root, "benches"))
import openai_provider  # noqa: E402  (benches/openai_provider.py)

out_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "keel.order")


def bridge_input(model):
    start = {"version": "1.0", "type": "session.start", "requestId": "s1",
             "payload": {"model": model}}
    return json.dumps(start) + "\n"


def scenarios(ws, openai_url):
    scripted = lambda name: f"scripted:{os.path.join(scripts, name)}"
    yield ["exec", "say hi", "--json", "--workspace", ws, "--model", scripted("hello.json")], None, {}
    yield ["exec", "say hi", "--workspace", ws, "--model", scripted("hello.json")], None, {}
    yield ["exec", "look", "--json", "--mode", "auto", "--workspace", ws,
           "--model", scripted("explore_workspace.json")], None, {}
    yield ["exec", "notes", "--json", "--mode", "auto-edit", "--workspace", ws,
           "--model", scripted("write_notes.json")], None, {}
    yield ["exec", "read the readme", "--json", "--mode", "auto", "--workspace", ws, "--model",
           "openai:order-model"], None, {"OPENAI_BASE_URL": openai_url, "OPENAI_API_KEY": "k"}
    yield ["bridge", "--workspace", ws], bridge_input(scripted("hello.json")), {}
    yield ["demo"], None, {}


def executed(args, stdin, extra, home, work):
    out = os.path.join(work, "callgrind.out")
    env = dict(os.environ, KEEL_HOME=home, **extra)
    env.pop("KEEL_MODEL", None)
    subprocess.run(["valgrind", "--tool=callgrind", "--demangle=no", "--compress-strings=no",
                    "--compress-pos=no", f"--callgrind-out-file={out}", binary, *args],
                   input=(stdin or "").encode(), stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env=env, timeout=600, check=False)
    names = set()
    with open(out) as f:
        for line in f:
            if line.startswith("fn="):
                names.add(line[3:].strip())
    os.remove(out)
    return names


def functions_of(path):
    symbols = set()
    nm = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True, check=True)
    for line in nm.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            symbols.add(parts[2])
    return symbols


def main():
    symbols = functions_of(binary)
    if check:
        with open(out_path) as f:
            listed = f.read().split()
        found = sum(1 for name in listed if name in symbols)
        print(f"{found} of {len(listed)} listed functions are in {binary}")
        return
    url = openai_provider.start()
    uses = {}
    with tempfile.TemporaryDirectory() as work:
        for n, (args, stdin, extra) in enumerate(scenarios(os.path.join(work, "ws"), url)):
            ws, home = os.path.join(work, "ws"), os.path.join(work, f"home{n}")
            os.makedirs(ws, exist_ok=True)
            os.makedirs(home)
            for j in range(5):
                with open(os.path.join(ws, f"f{j}.txt"), "w") as f:
                    f.write("hello\n" * 10)
            with open(os.path.join(ws, "README.md"), "w") as f:
                f.write("# Project\n")
            found = executed(args, stdin, extra, home, work)
            print(f"{' '.join(args[:1])}: {len(found)} functions", file=sys.stderr)
            for name in found & symbols:
                uses[name] = uses.get(name, 0) + 1
    ordered = sorted(uses, key=lambda name: (-uses[name], name))
    with open(out_path, "w") as f:
        f.write("".join(name + "\n" for name in ordered))
    print(f"{len(ordered)} functions written to {out_path}", file=sys.stderr)


main()

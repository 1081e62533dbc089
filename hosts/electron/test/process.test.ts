import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import { BridgeExitError, KeelBridge, VersionMismatchError, type ExitInfo } from "../src";
import { fixture, killAfter, tempDir } from "./support";

/** The last eight of the ten lines the crashing fixture writes to stderr. */
const LAST_EIGHT = Array.from({ length: 8 }, (_, i) => `crash log line ${i + 3} — détail`);

function isGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ESRCH";
  }
}

function recorded(file: string): { pid: number; commands: Array<{ type: string; version: string }> } {
  const lines = readFileSync(file, "utf8").split("\n").filter((l) => l !== "");
  const pid = Number(lines[0].replace(/^pid /, ""));
  return { pid, commands: lines.slice(1).map((l) => JSON.parse(l)) };
}

describe("the bridge process", { timeout: 30_000 }, () => {
  it("a runtime speaking another major version is shut down and spawn rejects", async (t) => {
    const dir = tempDir(t, "future");
    const record = join(dir, "record.txt");
    await assert.rejects(
      KeelBridge.spawn({ binary: fixture("future-bridge.js"), workspace: dir, env: { KEEL_FIXTURE_RECORD: record } }),
      (err: unknown) => {
        assert.ok(err instanceof VersionMismatchError);
        assert.equal(err.expected, "1.0");
        assert.equal(err.got, "2.0");
        return true;
      },
    );
    const { pid, commands } = recorded(record);
    assert.deepEqual(commands.map((c) => c.type), ["runtime.shutdown"]);
    assert.equal(commands[0].version, "1.0");
    assert.ok(isGone(pid), "the process has ended");
  });

  it("a mismatched runtime that ignores runtime.shutdown is killed", async (t) => {
    const dir = tempDir(t, "future");
    const record = join(dir, "record.txt");
    await assert.rejects(
      KeelBridge.spawn({
        binary: fixture("future-bridge.js"),
        workspace: dir,
        args: ["--ignore-shutdown"],
        shutdownTimeoutMs: 300,
        env: { KEEL_FIXTURE_RECORD: record },
      }),
      VersionMismatchError,
    );
    const { pid, commands } = recorded(record);
    assert.deepEqual(commands.map((c) => c.type), ["runtime.shutdown"]);
    assert.ok(isGone(pid), "the process was killed");
  });

  it("an abnormal exit rejects pending commands with the exit code and the last 8 stderr lines", async (t) => {
    const dir = tempDir(t, "crash");
    const bridge = killAfter(t, await KeelBridge.spawn({ binary: fixture("crashing-bridge.js"), workspace: dir }));
    const stderr: string[] = [];
    bridge.on("stderr", (l) => stderr.push(l));
    const exited = new Promise<ExitInfo>((resolve) => bridge.once("exit", resolve));
    const session = bridge.session("sess_x");
    const events = session.events();

    await assert.rejects(bridge.listSessions(), (err: unknown) => {
      assert.ok(err instanceof BridgeExitError);
      assert.equal(err.code, 3);
      assert.equal(err.signal, null);
      assert.equal(err.abnormal, true);
      assert.deepEqual(err.stderrTail, LAST_EIGHT);
      return true;
    });
    const info = await exited;
    assert.deepEqual(info, { code: 3, signal: null, stopped: false, stderrTail: LAST_EIGHT, abnormal: true });
    assert.equal(stderr.length, 10, "every stderr line was reported");
    // Session iterators fail too, and later commands are refused at once.
    await assert.rejects(events.next(), BridgeExitError);
    await assert.rejects(bridge.send("session.list", {}), BridgeExitError);
    assert.deepEqual(await bridge.shutdown(), info);
  });

  it("a process that dies before runtime.ready rejects spawn with its exit code and stderr", async (t) => {
    const dir = tempDir(t, "crash");
    await assert.rejects(
      KeelBridge.spawn({ binary: fixture("crashing-bridge.js"), workspace: dir, args: ["--crash-before-ready"] }),
      (err: unknown) => {
        assert.ok(err instanceof BridgeExitError);
        assert.equal(err.code, 3);
        assert.deepEqual(err.stderrTail, LAST_EIGHT);
        return true;
      },
    );
  });

  it("a binary that does not exist rejects spawn", async (t) => {
    const dir = tempDir(t, "missing");
    await assert.rejects(
      KeelBridge.spawn({ binary: join(dir, "no-such-keel"), workspace: dir }),
      (err: unknown) => (err as NodeJS.ErrnoException).code === "ENOENT",
    );
  });
});

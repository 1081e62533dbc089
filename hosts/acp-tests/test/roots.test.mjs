// ACP's additionalDirectories through the official client library against the real
// binary: announced, given to session/new they are the session's extra roots (the
// agent reads and writes there by absolute path), reported by session/list, kept
// by session/load in a new process when the client gives them again, and dropped
// when it gives none (the list of session/load is the whole list); bad ones are
// refused with -32602.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, realpathSync, writeFileSync, existsSync } from "node:fs";
import path from "node:path";

import { fixture, startAgent, text } from "./harness.mjs";

const T = { timeout: 60_000 };

const allowOnce = (p) => ({
  outcome: { outcome: "selected", optionId: p.options.find((o) => o.kind === "allow_once").optionId },
});

test("additionalDirectories: the session's extra roots, listed, and kept or dropped by session/load", T, async () => {
  const fx = fixture();
  try {
    const extra = path.join(fx.root, "shared");
    mkdirSync(extra);
    writeFileSync(path.join(extra, "notes.txt"), "shared notes\n");
    const real = realpathSync(extra);
    const script = path.join(fx.root, "roots.json");
    writeFileSync(
      script,
      JSON.stringify({
        turns: [
          { toolCalls: [{ name: "read_file", arguments: { path: path.join(real, "notes.txt") } }] },
          { toolCalls: [{ name: "write_file", arguments: { path: path.join(real, "out.txt"), content: "written\n" } }] },
          { text: "Done." },
        ],
      }),
    );
    const model = `scripted:${script}`;
    // The second process's model (a script starts again in each process).
    const script2 = path.join(fx.root, "roots-again.json");
    writeFileSync(
      script2,
      JSON.stringify({
        turns: [
          { toolCalls: [{ name: "write_file", arguments: { path: path.join(real, "again.txt"), content: "again\n" } }] },
          { text: "Tried." },
        ],
      }),
    );
    const first = await startAgent({ model, workspace: fx.workspace, home: fx.home, onPermission: allowOnce });
    const init = await first.initialize();
    assert.ok(init.agentCapabilities.sessionCapabilities.additionalDirectories, "announced");
    const { sessionId } = await first.conn.newSession({
      cwd: fx.workspace,
      additionalDirectories: [extra],
      mcpServers: [],
    });
    const res = await first.conn.prompt({ sessionId, prompt: text("Use the shared notes.") });
    assert.equal(res.stopReason, "end_turn");
    assert.equal(readFileSync(path.join(extra, "out.txt"), "utf8"), "written\n");
    const read = first
      .updatesOf(sessionId)
      .some((u) => u.sessionUpdate === "tool_call_update" && JSON.stringify(u).includes("shared notes"));
    assert.ok(read, "the read in the extra root was reported");
    // Only the write asked.
    assert.equal(first.permissions.length, 1);
    let list = await first.conn.listSessions({ cwd: fx.workspace });
    assert.deepEqual(list.sessions.find((s) => s.sessionId === sessionId).additionalDirectories, [real]);

    // Bad directories: relative, missing, the workspace itself, twice.
    for (const bad of [["relative/dir"], [path.join(fx.root, "missing")], [fx.workspace], [extra, extra]]) {
      await assert.rejects(
        first.conn.newSession({ cwd: fx.workspace, additionalDirectories: bad, mcpServers: [] }),
        (e) => e.code === -32602 && e.data.code === "REQUEST_INVALID",
        JSON.stringify(bad),
      );
    }
    await first.finish();

    // A new process: session/load with the directories keeps them…
    const second = await startAgent({ model: `scripted:${script2}`, workspace: fx.workspace, home: fx.home, onPermission: allowOnce });
    await second.initialize();
    await second.conn.loadSession({ sessionId, cwd: fx.workspace, additionalDirectories: [extra], mcpServers: [] });
    list = await second.conn.listSessions({ cwd: fx.workspace });
    assert.deepEqual(list.sessions.find((s) => s.sessionId === sessionId).additionalDirectories, [real]);
    // …and one without them leaves none: a write there is now outside the session.
    await second.conn.loadSession({ sessionId, cwd: fx.workspace, mcpServers: [] });
    list = await second.conn.listSessions({ cwd: fx.workspace });
    assert.equal(list.sessions.find((s) => s.sessionId === sessionId).additionalDirectories, undefined);
    const again = await second.conn.prompt({ sessionId, prompt: text("Write again.") });
    assert.equal(again.stopReason, "end_turn");
    assert.ok(!existsSync(path.join(extra, "again.txt")), "no longer a root: the write was refused");
    const failed = second
      .updatesOf(sessionId)
      .filter((u) => u.status === "failed" && !u._meta.keel.replay);
    assert.equal(failed.length, 1, JSON.stringify(second.updatesOf(sessionId)));
    assert.equal(failed[0].rawOutput.code, "PATH_OUTSIDE_WORKSPACE");
    await second.finish();
  } finally {
    fx.cleanup();
  }
});

import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import { KeelError, type KeelEvent } from "../src";
import { endOf, readUntil, sandbox, startBridge } from "./support";

describe("budgets and hooks through the client", { timeout: 30_000 }, () => {
  it("a session's per-tool budget warns, skips the call over it and ends the request with the limit", async (t) => {
    const dirs = sandbox(t);
    const bridge = await startBridge(t, dirs, "electron-limits.json");
    const session = await bridge.startSession({ budget: { request: { toolCalls: { list_dir: 2 } } } });
    const events = session.events();
    const run = await session.sendMessage("list it three times");
    const seen = await readUntil(events, endOf(run.requestId));
    const mine = seen.filter((e) => e.requestId === run.requestId);
    const warning = mine.find((e) => e.type === "budget.warning");
    assert.ok(warning && warning.type === "budget.warning", "a warning at 80 %");
    assert.deepEqual(
      { scope: warning.payload.scope, limit: warning.payload.limit, toolName: warning.payload.toolName },
      { scope: "request", limit: "toolCalls", toolName: "list_dir" },
    );
    assert.equal(mine.filter((e) => e.type === "tool.call.completed").length, 2);
    const skipped = mine.find((e) => e.type === "tool.call.skipped");
    assert.ok(skipped && skipped.type === "tool.call.skipped");
    assert.equal(skipped.payload.error.code, "BUDGET_EXCEEDED");
    const end = mine[mine.length - 1];
    assert.ok(end.type === "session.completed");
    assert.equal(end.payload.stopReason, "max_turns");
    assert.equal(end.payload.budget?.limit, "toolCalls");
    assert.equal(end.payload.budget?.used, 2);
    const result = await run.done;
    assert.equal(result.type, "session.completed");
    await bridge.shutdown();
  });

  it("a request's budget applies to that request only, and a bad one is refused", async (t) => {
    const dirs = sandbox(t);
    const bridge = await startBridge(t, dirs, "electron-limits.json");
    const session = await bridge.startSession();
    await assert.rejects(session.sendMessage("go", { budget: { costUsd: -1 } }), (err: unknown) => {
      assert.ok(err instanceof KeelError);
      assert.equal(err.code, "REQUEST_INVALID");
      return true;
    });
    await assert.rejects(bridge.startSession({ maxOutputTokens: 0 }), KeelError);
    const events = session.events();
    const run = await session.sendMessage("go", { budget: { modelCalls: 1 } });
    const seen = await readUntil(events, endOf(run.requestId));
    const end = seen[seen.length - 1];
    assert.ok(end.type === "session.completed");
    assert.equal(end.payload.stopReason, "max_turns");
    assert.equal(end.payload.budget?.limit, "modelCalls");
    // The next request has no such limit: it runs the rest of the script to its end.
    const next = await session.sendMessage("go on");
    const rest = await readUntil(events, endOf(next.requestId));
    const last = rest[rest.length - 1];
    assert.ok(last.type === "session.completed");
    assert.equal(last.payload.stopReason, "end_turn");
    assert.equal(last.payload.finalText, "Listed it three times.");
    await bridge.shutdown();
  });

  it("a PreToolUse hook from the configuration denies a call, and the model is told why", async (t) => {
    const dirs = sandbox(t);
    writeFileSync(
      join(dirs.home, "config.toml"),
      '[[hooks.PreToolUse]]\nmatcher = "list_dir"\ncommand = "echo \'no listing today\' >&2; exit 2"\n',
    );
    const bridge = await startBridge(t, dirs, "electron-limits.json");
    const session = await bridge.startSession();
    const events = session.events();
    const run = await session.sendMessage("list");
    const seen: KeelEvent[] = await readUntil(events, endOf(run.requestId));
    const skipped = seen.filter((e) => e.type === "tool.call.skipped");
    assert.equal(skipped.length, 3, "every listing is denied");
    for (const s of skipped) {
      assert.ok(s.type === "tool.call.skipped");
      assert.equal(s.payload.error.code, "TOOL_PERMISSION_DENIED");
      assert.match(s.payload.error.message, /no listing today/);
    }
    assert.equal(seen.filter((e) => e.type === "tool.call.started").length, 0);
    await bridge.shutdown();
  });
});

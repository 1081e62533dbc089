import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import { KeelError, type EventOf, type HostToolDefinition, type KeelEvent } from "../src";
import { endOf, readUntil, sandbox, startBridge } from "./support";

const LOOKUP: HostToolDefinition = {
  name: "lookup_ticket",
  description: "Reads a ticket of the team's tracker by its id.",
  inputSchema: { type: "object", properties: { id: { type: "string" } }, required: ["id"] },
  level: "read",
};

function ofType<K extends KeelEvent["type"]>(events: KeelEvent[], type: K): EventOf<K>[] {
  return events.filter((e): e is EventOf<K> => e.type === type);
}

describe("host tools through the TypeScript client", { timeout: 60_000 }, () => {
  it("runs a registered tool when the model calls it and gives its result back", async (t) => {
    const dirs = sandbox(t);
    const bridge = await startBridge(t, dirs, "electron-host-tool.json");
    assert.ok(bridge.ready.capabilities.includes("host_tools"));
    const session = await bridge.startSession();
    const calls: unknown[] = [];
    await session.registerTool(LOOKUP, async (args, { signal, toolCallId }) => {
      calls.push(args);
      assert.equal(signal.aborted, false);
      assert.match(toolCallId, /./);
      return { title: "Login fails on Safari", status: "open" };
    });
    assert.deepEqual(session.hostTools.names, ["lookup_ticket"]);
    const events = session.events();
    const run = await session.sendMessage("What does KEEL-7 say?");
    const seen = await readUntil(events, endOf(run.requestId));
    const done = await run.done;
    assert.equal(done.type, "session.completed");
    assert.equal(done.type === "session.completed" && done.payload.finalText, "The ticket says the login fails on Safari.");
    assert.deepEqual(calls, [{ id: "KEEL-7" }]);
    const requested = ofType(seen, "host-tool.requested");
    assert.equal(requested.length, 1);
    assert.equal(requested[0].requestId, run.requestId);
    const responded = ofType(seen, "host-tool.responded")[0];
    assert.equal(responded.payload.toolCallId, requested[0].payload.toolCallId);
    assert.ok(responded.meta?.replyTo, "the answer names the command it answers");
    const completed = ofType(seen, "tool.call.completed")[0];
    assert.deepEqual((completed.payload.result as { result: unknown }).result, {
      title: "Login fails on Safari",
      status: "open",
    });
    await bridge.shutdown();
  });

  it("sends what the handler throws as the tool's error", async (t) => {
    const dirs = sandbox(t);
    const bridge = await startBridge(t, dirs, "electron-host-tool.json");
    const session = await bridge.startSession();
    await session.registerTool(LOOKUP, async () => {
      throw new Error("the tracker is down");
    });
    const events = session.events();
    const run = await session.sendMessage("What does KEEL-7 say?");
    const seen = await readUntil(events, endOf(run.requestId));
    const failed = ofType(seen, "tool.call.failed")[0];
    assert.equal(failed.payload.error.code, "TOOL_EXECUTION_FAILED");
    assert.equal(failed.payload.error.message, "the tracker is down");
    const done = await run.done;
    assert.equal(done.type === "session.completed" && done.payload.finalText, "The tracker is down; I could not read the ticket.");
    await bridge.shutdown();
  });

  it("aborts the handler's signal on an interrupt", async (t) => {
    const dirs = sandbox(t);
    const bridge = await startBridge(t, dirs, "electron-host-tool.json");
    const session = await bridge.startSession();
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    let aborted!: (reason: unknown) => void;
    const abortSeen = new Promise<unknown>((resolve) => (aborted = resolve));
    await session.registerTool(LOOKUP, (_args, { signal }) => {
      started();
      return new Promise((_resolve, reject) => {
        signal.addEventListener("abort", () => {
          aborted(signal.reason);
          reject(new Error("stopped"));
        });
      });
    });
    const run = await session.sendMessage("What does KEEL-7 say?");
    await running;
    const answer = await session.interrupt();
    assert.equal(answer.type, "session.interrupted");
    const reason = await abortSeen;
    assert.ok(reason instanceof Error);
    const done = await run.done;
    assert.equal(done.type, "session.interrupted");
    const failed = ofType([...run.events], "tool.call.failed")[0];
    assert.equal(failed.payload.error.code, "INTERRUPTED");
    // The session is usable afterwards, and the aborted handler sent no answer.
    assert.equal(ofType([...run.events], "host-tool.responded").length, 0);
    await bridge.shutdown();
  });

  it("aborts the handler when the call times out", async (t) => {
    const dirs = sandbox(t);
    writeFileSync(join(dirs.home, "config.toml"), "hostToolTimeoutSecs = 1\n");
    const bridge = await startBridge(t, dirs, "electron-host-tool.json");
    const session = await bridge.startSession();
    let aborted = false;
    await session.registerTool(LOOKUP, (_args, { signal }) => {
      return new Promise((_resolve, reject) => {
        signal.addEventListener("abort", () => {
          aborted = true;
          reject(new Error("stopped"));
        });
      });
    });
    const run = await session.sendMessage("What does KEEL-7 say?");
    const done = await run.done;
    assert.equal(done.type === "session.completed" && done.payload.finalText, "The ticket lookup did not answer.");
    const failed = ofType([...run.events], "tool.call.failed")[0];
    assert.equal(failed.payload.error.code, "TOOL_TIMEOUT");
    assert.equal(aborted, true);
    await bridge.shutdown();
  });

  it("rejects a tool the runtime refuses, and keeps the others", async (t) => {
    const dirs = sandbox(t);
    const bridge = await startBridge(t, dirs, "electron-host-tool.json");
    const session = await bridge.startSession();
    await session.registerTool(LOOKUP, () => "ok");
    await assert.rejects(
      session.registerTool({ ...LOOKUP, name: "bad", inputSchema: { type: "string" } }, () => "x"),
      (err: unknown) =>
        err instanceof KeelError && err.code === "REQUEST_INVALID" && /inputSchema/.test(err.message),
    );
    await assert.rejects(
      session.registerTool({ ...LOOKUP, name: "read_file" }, () => "x"),
      (err: unknown) => err instanceof KeelError && err.code === "TOOL_NAME_CONFLICT",
    );
    assert.deepEqual(session.hostTools.names, ["lookup_ticket"]);
    // A raw answer for a call that does not exist is refused with a stable code.
    await assert.rejects(
      session.send("host-tool.respond", { toolCallId: "call_nope", result: 1, error: null }),
      (err: unknown) => err instanceof KeelError && err.code === "HOST_TOOL_CALL_NOT_FOUND",
    );
    assert.deepEqual(await session.mcpServers(), []);
    await bridge.shutdown();
  });
});

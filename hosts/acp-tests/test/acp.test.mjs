import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import path from "node:path";

import { fixture, scripted, startAgent, text, until } from "./harness.mjs";

const T = { timeout: 60_000 };

test("initialize answers protocol version 1 with loadSession and Keel's session capabilities", T, async () => {
  const fx = fixture();
  try {
    const agent = await startAgent({ model: scripted("acp-read.json"), workspace: fx.workspace, home: fx.home });
    const init = await agent.initialize();
    assert.equal(init.protocolVersion, 1);
    assert.equal(init.agentCapabilities.loadSession, true);
    assert.deepEqual(init.agentCapabilities.sessionCapabilities, { list: {}, delete: {}, close: {}, resume: {}, fork: {}, additionalDirectories: {} });
    assert.equal(init.agentCapabilities.promptCapabilities.image, false);
    assert.equal(init.agentInfo.name, "keel");
    await agent.finish();
  } finally {
    fx.cleanup();
  }
});

test("session/new returns Keel's four modes; set_mode reports current_mode_update", T, async () => {
  const fx = fixture();
  try {
    const agent = await startAgent({ model: scripted("acp-read.json"), workspace: fx.workspace, home: fx.home });
    await agent.initialize();
    const s = await agent.conn.newSession({ cwd: fx.workspace, mcpServers: [] });
    assert.match(s.sessionId, /\S/);
    assert.equal(s.modes.currentModeId, "ask");
    assert.deepEqual(
      s.modes.availableModes.map((m) => m.id),
      ["ask", "auto-edit", "auto", "plan"],
    );
    for (const m of s.modes.availableModes) {
      assert.ok(m.name && m.description, `mode ${m.id} has a name and a description`);
    }
    await agent.conn.setSessionMode({ sessionId: s.sessionId, modeId: "auto-edit" });
    await until(() => agent.updatesOf(s.sessionId).some((u) => u.sessionUpdate === "current_mode_update"));
    const modeUpdates = agent.updatesOf(s.sessionId).filter((u) => u.sessionUpdate === "current_mode_update");
    assert.deepEqual(modeUpdates.map((u) => u.currentModeId), ["auto-edit"]);
    await assert.rejects(
      agent.conn.setSessionMode({ sessionId: s.sessionId, modeId: "yolo" }),
      (e) => e.code === -32602,
    );
    await assert.rejects(
      agent.conn.setSessionMode({ sessionId: "sess_missing", modeId: "ask" }),
      (e) => e.code === -32002,
    );
    await agent.finish();
  } finally {
    fx.cleanup();
  }
});

test("a prompt with read_file streams thought, text, plan and tool updates, then end_turn", T, async () => {
  const fx = fixture();
  try {
    const agent = await startAgent({ model: scripted("acp-read.json"), workspace: fx.workspace, home: fx.home });
    await agent.initialize();
    const { sessionId } = await agent.conn.newSession({ cwd: fx.workspace, mcpServers: [] });
    const res = await agent.conn.prompt({ sessionId, prompt: text("What does the README say?") });
    assert.equal(res.stopReason, "end_turn");
    const ups = agent.updatesOf(sessionId);
    const kinds = ups.map((u) => u.sessionUpdate);

    const thought = ups.filter((u) => u.sessionUpdate === "agent_thought_chunk").map((u) => u.content.text).join("");
    assert.equal(thought, "I should read the README first.");
    const said = ups.filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text).join("");
    assert.equal(said, "Let me read the README.The README greets the world.");

    const readCall = ups.find((u) => u.sessionUpdate === "tool_call" && u.kind === "read");
    assert.ok(readCall, `a tool_call of kind read, got ${JSON.stringify(kinds)}`);
    assert.equal(readCall.title, "Read README.md");
    assert.deepEqual(readCall.rawInput, { path: "README.md" });
    assert.deepEqual(readCall.locations, [{ path: path.join(realpathSync(fx.workspace), "README.md") }]);
    assert.ok(["pending", "in_progress"].includes(readCall.status));
    const done = ups.find((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === readCall.toolCallId && u.status === "completed");
    assert.ok(done, "the read call completes");
    assert.equal(done.content[0].type, "content");
    assert.equal(done.content[0].content.text, "# Demo\n\nHello, world.\n");
    assert.ok(kinds.indexOf("tool_call") < kinds.lastIndexOf("tool_call_update"));

    const plans = ups.filter((u) => u.sessionUpdate === "plan");
    assert.ok(plans.length >= 2, "a plan update on every change");
    assert.deepEqual(plans[0].entries, [
      { content: "Read README.md", priority: "medium", status: "pending" },
      { content: "Summarise it", priority: "medium", status: "pending" },
    ]);
    assert.deepEqual(plans.at(-1).entries.map((e) => e.status), ["completed", "completed"]);
    assert.ok(ups.some((u) => u.sessionUpdate === "usage_update" && u.size > 0 && u.used > 0));
    assert.ok(res.usage && res.usage.inputTokens === 720 && res.usage.outputTokens === 28);
    // Envelope identity travels in _meta.
    for (const u of ups) {
      assert.ok(u._meta?.keel?.eventId?.startsWith("evt_"));
      assert.ok(u._meta.keel.requestId.startsWith("req_"));
    }
    await agent.finish();
  } finally {
    fx.cleanup();
  }
});

test("write_file: reject_once leaves no file and the turn ends normally", T, async () => {
  const fx = fixture();
  try {
    const agent = await startAgent({
      model: scripted("acp-write.json"),
      workspace: fx.workspace,
      home: fx.home,
      onPermission: (p) => {
        const reject = p.options.find((o) => o.kind === "reject_once");
        return { outcome: { outcome: "selected", optionId: reject.optionId } };
      },
    });
    await agent.initialize();
    const { sessionId } = await agent.conn.newSession({ cwd: fx.workspace, mcpServers: [] });
    const res = await agent.conn.prompt({ sessionId, prompt: text("Write the notes.") });
    assert.equal(res.stopReason, "end_turn");
    assert.equal(agent.permissions.length, 1);
    const req = agent.permissions[0];
    assert.deepEqual(req.options.map((o) => o.kind), ["allow_once", "allow_always", "reject_once", "reject_always"]);
    assert.equal(req.toolCall.kind, "edit");
    assert.equal(req.toolCall.title, "Write NOTES.md");
    const diff = req.toolCall.content.find((c) => c.type === "diff");
    assert.ok(diff, "the permission request shows the diff");
    assert.equal(diff.newText, "# Notes\n\nwritten over ACP\n");
    assert.ok(!existsSync(path.join(fx.workspace, "NOTES.md")), "no file after a rejection");
    const ups = agent.updatesOf(sessionId);
    const failed = ups.find((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === req.toolCall.toolCallId);
    assert.equal(failed.status, "failed");
    const said = ups.filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text).join("");
    assert.match(said, /did not write NOTES\.md/);
    await agent.finish();
  } finally {
    fx.cleanup();
  }
});

test("write_file: allow_once writes the file and reports a diff", T, async () => {
  const fx = fixture();
  try {
    const agent = await startAgent({
      model: scripted("acp-write.json"),
      workspace: fx.workspace,
      home: fx.home,
      onPermission: (p) => ({ outcome: { outcome: "selected", optionId: p.options.find((o) => o.kind === "allow_once").optionId } }),
    });
    await agent.initialize();
    const { sessionId } = await agent.conn.newSession({ cwd: fx.workspace, mcpServers: [] });
    const res = await agent.conn.prompt({ sessionId, prompt: text("Write the notes.") });
    assert.equal(res.stopReason, "end_turn");
    assert.equal(readFileSync(path.join(fx.workspace, "NOTES.md"), "utf8"), "# Notes\n\nwritten over ACP\n");
    const ups = agent.updatesOf(sessionId);
    const id = agent.permissions[0].toolCall.toolCallId;
    const calls = ups.filter((u) => u.toolCallId === id);
    assert.equal(calls[0].sessionUpdate, "tool_call");
    // `pending` is the protocol's default status: the protocol's own types leave it out.
    assert.equal(calls[0].status ?? "pending", "pending");
    const done = calls.find((u) => u.status === "completed");
    assert.ok(done, "the write completes");
    const diff = done.content.find((c) => c.type === "diff");
    assert.equal(diff.path, path.join(realpathSync(fx.workspace), "NOTES.md"));
    assert.equal(diff.oldText ?? null, null);
    assert.equal(diff.newText, "# Notes\n\nwritten over ACP\n");
    await agent.finish();
  } finally {
    fx.cleanup();
  }
});

test("reject_always denies the same command later in the session without asking", T, async () => {
  const fx = fixture();
  try {
    const agent = await startAgent({
      model: scripted("acp-deny.json"),
      workspace: fx.workspace,
      home: fx.home,
      onPermission: (p) => ({ outcome: { outcome: "selected", optionId: p.options.find((o) => o.kind === "reject_always").optionId } }),
    });
    await agent.initialize();
    const { sessionId } = await agent.conn.newSession({ cwd: fx.workspace, mcpServers: [] });
    const first = await agent.conn.prompt({ sessionId, prompt: text("Build it.") });
    assert.equal(first.stopReason, "end_turn");
    assert.equal(agent.permissions.length, 1);
    assert.equal(agent.permissions[0].toolCall.kind, "execute");
    const second = await agent.conn.prompt({ sessionId, prompt: text("Build it again.") });
    assert.equal(second.stopReason, "end_turn");
    assert.equal(agent.permissions.length, 1, "no second permission request");
    assert.ok(!existsSync(path.join(fx.workspace, "built.txt")));
    const said = agent.updatesOf(sessionId).filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text).join("");
    assert.match(said, /Refused again/);
    await agent.finish();
  } finally {
    fx.cleanup();
  }
});

test("session/cancel during a stalled model stream answers cancelled; the session stays usable", T, async () => {
  const fx = fixture();
  try {
    const agent = await startAgent({ model: scripted("stall.json"), workspace: fx.workspace, home: fx.home });
    await agent.initialize();
    const { sessionId } = await agent.conn.newSession({ cwd: fx.workspace, mcpServers: [] });
    const pending = agent.conn.prompt({ sessionId, prompt: text("Take your time.") });
    await until(async () => (await agent.conn.extMethod("_keel/session_state", { sessionId })).activeRequestId);
    // Let the request reach its model call, so the cancel drops a stalled stream (and the
    // script's stalled turn is used up) rather than stopping the request before the call.
    await new Promise((r) => setTimeout(r, 300));
    await agent.conn.cancel({ sessionId });
    const res = await pending;
    assert.equal(res.stopReason, "cancelled");
    const again = await agent.conn.prompt({ sessionId, prompt: text("Are you there?") });
    assert.equal(again.stopReason, "end_turn");
    const said = agent.updatesOf(sessionId).filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text).join("");
    assert.equal(said, "(The script has no more turns.)");
    await agent.finish();
  } finally {
    fx.cleanup();
  }
});

test("session/cancel during an open permission request answers cancelled", T, async () => {
  const fx = fixture();
  try {
    let settle;
    const agent = await startAgent({
      model: scripted("acp-write.json"),
      workspace: fx.workspace,
      home: fx.home,
      onPermission: () => new Promise((resolve) => (settle = resolve)),
    });
    await agent.initialize();
    const { sessionId } = await agent.conn.newSession({ cwd: fx.workspace, mcpServers: [] });
    const pending = agent.conn.prompt({ sessionId, prompt: text("Write the notes.") });
    await until(() => settle);
    await agent.conn.cancel({ sessionId });
    // As ACP requires, the client answers its open permission request `cancelled`.
    settle({ outcome: { outcome: "cancelled" } });
    const res = await pending;
    assert.equal(res.stopReason, "cancelled");
    assert.ok(!existsSync(path.join(fx.workspace, "NOTES.md")));
    const state = await agent.conn.extMethod("_keel/session_state", { sessionId });
    assert.equal(state.state, "idle");
    assert.deepEqual(state.pendingApprovalIds, []);
    await agent.finish();
  } finally {
    fx.cleanup();
  }
});

test("plan mode: a write is refused by the gate without a permission request", T, async () => {
  const fx = fixture();
  try {
    const agent = await startAgent({ model: scripted("acp-write.json"), workspace: fx.workspace, home: fx.home });
    await agent.initialize();
    const { sessionId } = await agent.conn.newSession({ cwd: fx.workspace, mcpServers: [] });
    await agent.conn.setSessionMode({ sessionId, modeId: "plan" });
    const res = await agent.conn.prompt({ sessionId, prompt: text("Write the notes.") });
    assert.equal(res.stopReason, "end_turn");
    assert.equal(agent.permissions.length, 0);
    assert.ok(!existsSync(path.join(fx.workspace, "NOTES.md")));
    const ups = agent.updatesOf(sessionId);
    assert.ok(ups.some((u) => u.sessionUpdate === "current_mode_update" && u.currentModeId === "plan"));
    const refused = ups.find((u) => u.sessionUpdate === "tool_call" && u.kind === "edit");
    assert.equal(refused.status, "failed");
    const said = ups.filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text).join("");
    assert.match(said, /Plan mode/);
    await agent.finish();
  } finally {
    fx.cleanup();
  }
});

test("session/list and session/close", T, async () => {
  const fx = fixture();
  try {
    const agent = await startAgent({ model: scripted("acp-read.json"), workspace: fx.workspace, home: fx.home });
    await agent.initialize();
    const { sessionId } = await agent.conn.newSession({ cwd: fx.workspace, mcpServers: [] });
    const list = await agent.conn.listSessions({ cwd: fx.workspace });
    const entry = list.sessions.find((s) => s.sessionId === sessionId);
    assert.ok(entry, "the new session is listed");
    assert.equal(entry.cwd, realpathSync(fx.workspace));
    assert.match(entry.updatedAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d/);
    await agent.conn.closeSession({ sessionId });
    await assert.rejects(agent.conn.prompt({ sessionId, prompt: text("hi") }), (e) => e.code === -32002);
    await agent.finish();
  } finally {
    fx.cleanup();
  }
});

test("plan mode: a proposed plan is approved through a permission request and the mode switches", T, async () => {
  const fx = fixture();
  try {
    const agent = await startAgent({
      model: scripted("acp-plan.json"),
      workspace: fx.workspace,
      home: fx.home,
      onPermission: (p) => ({ outcome: { outcome: "selected", optionId: p.options.find((o) => o.kind === "allow_always").optionId } }),
    });
    await agent.initialize();
    const { sessionId } = await agent.conn.newSession({ cwd: fx.workspace, mcpServers: [] });
    await agent.conn.setSessionMode({ sessionId, modeId: "plan" });
    const res = await agent.conn.prompt({ sessionId, prompt: text("Plan the notes.") });
    assert.equal(res.stopReason, "end_turn");
    assert.equal(agent.permissions.length, 1);
    const req = agent.permissions[0];
    assert.equal(req.toolCall.kind, "switch_mode");
    assert.match(req.toolCall.content[0].content.text, /1\. Write NOTES\.md\n2\. Check it/);
    const ups = agent.updatesOf(sessionId);
    const modes = ups.filter((u) => u.sessionUpdate === "current_mode_update").map((u) => u.currentModeId);
    assert.deepEqual(modes, ["plan", "auto-edit"]);
    const plan = ups.find((u) => u.sessionUpdate === "plan");
    assert.deepEqual(plan.entries.map((e) => e.content), ["Write NOTES.md", "Check it"]);
    const said = ups.filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text).join("");
    assert.match(said, /approved; starting/);
    await agent.finish();
  } finally {
    fx.cleanup();
  }
});

test("ask_user: candidate answers are offered as permission options", T, async () => {
  const fx = fixture();
  try {
    const agent = await startAgent({
      model: scripted("acp-ask.json"),
      workspace: fx.workspace,
      home: fx.home,
      onPermission: (p) => ({ outcome: { outcome: "selected", optionId: p.options.find((o) => o.name === "README.md").optionId } }),
    });
    await agent.initialize();
    const { sessionId } = await agent.conn.newSession({ cwd: fx.workspace, mcpServers: [] });
    const res = await agent.conn.prompt({ sessionId, prompt: text("Read something.") });
    assert.equal(res.stopReason, "end_turn");
    assert.equal(agent.permissions.length, 1);
    assert.equal(agent.permissions[0].toolCall.title, "Which file should I read?");
    assert.deepEqual(agent.permissions[0].options.map((o) => o.name), ["README.md", "NOTES.md", "Do not answer"]);
    const said = agent.updatesOf(sessionId).filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text).join("");
    assert.equal(said, "You chose the README.");
    await agent.finish();
  } finally {
    fx.cleanup();
  }
});

test("stop reasons: refusal, and max_turn_requests when the turn limit is hit", T, async () => {
  const fx = fixture();
  try {
    writeFileSync(path.join(fx.home, "config.toml"), "maxTurns = 1\n");
    const agent = await startAgent({ model: scripted("acp-refusal.json"), workspace: fx.workspace, home: fx.home });
    await agent.initialize();
    const { sessionId } = await agent.conn.newSession({ cwd: fx.workspace, mcpServers: [] });
    const refused = await agent.conn.prompt({ sessionId, prompt: text("Do something bad.") });
    assert.equal(refused.stopReason, "refusal");
    const limited = await agent.conn.prompt({ sessionId, prompt: text("Read the README twice.") });
    assert.equal(limited.stopReason, "max_turn_requests");
    await agent.finish();
  } finally {
    fx.cleanup();
  }
});

// Config options (mode and model), session titles and session/delete, through the
// official client library against the real binary.
import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";

import { fixture, scripted, scripts, startAgent, text, until } from "./harness.mjs";

const T = { timeout: 60_000 };

test("config options: mode and model are offered, set, and reported", T, async () => {
  const fx = fixture();
  try {
    const refuser = `scripted:${path.join(scripts, "acp-refusal.json")}`;
    writeFileSync(
      path.join(fx.home, "config.toml"),
      `[[availableModels]]\nid = "${refuser}"\ndisplayName = "Refuser"\n`,
    );
    const agent = await startAgent({ model: scripted("acp-read.json"), workspace: fx.workspace, home: fx.home });
    await agent.initialize();
    const s = await agent.conn.newSession({ cwd: fx.workspace, mcpServers: [] });
    assert.deepEqual(s.configOptions.map((o) => [o.id, o.category, o.type]), [
      ["mode", "mode", "select"],
      ["model", "model", "select"],
    ]);
    const [mode, model] = s.configOptions;
    assert.equal(mode.currentValue, "ask");
    assert.deepEqual(mode.options.map((o) => o.value), ["ask", "auto-edit", "auto", "plan"]);
    assert.equal(model.currentValue, scripted("acp-read.json"));
    assert.deepEqual(model.options.map((o) => [o.value, o.name]), [
      [scripted("acp-read.json"), scripted("acp-read.json")],
      [refuser, "Refuser"],
    ]);

    const setMode = await agent.conn.setSessionConfigOption({ sessionId: s.sessionId, configId: "mode", value: "auto-edit" });
    assert.equal(setMode.configOptions[0].currentValue, "auto-edit");
    await until(() => agent.updatesOf(s.sessionId).some((u) => u.sessionUpdate === "config_option_update"));
    const ups = agent.updatesOf(s.sessionId);
    assert.deepEqual(ups.filter((u) => u.sessionUpdate === "current_mode_update").map((u) => u.currentModeId), ["auto-edit"]);
    assert.equal(ups.find((u) => u.sessionUpdate === "config_option_update").configOptions[0].currentValue, "auto-edit");

    // Switching the model takes effect on the next prompt: the refuser answers.
    const setModel = await agent.conn.setSessionConfigOption({ sessionId: s.sessionId, configId: "model", value: refuser });
    assert.equal(setModel.configOptions[1].currentValue, refuser);
    const res = await agent.conn.prompt({ sessionId: s.sessionId, prompt: text("Do it.") });
    assert.equal(res.stopReason, "refusal");

    // Bad input: unknown option, unknown value, unknown session.
    const bad = [
      [{ sessionId: s.sessionId, configId: "colour", value: "blue" }, -32602],
      [{ sessionId: s.sessionId, configId: "mode", value: "yolo" }, -32602],
      [{ sessionId: s.sessionId, configId: "model", value: "openai:not-offered" }, -32602],
      [{ sessionId: s.sessionId, configId: "mode", type: "boolean", value: true }, -32602],
      [{ sessionId: "sess_missing", configId: "mode", value: "ask" }, -32002],
    ];
    for (const [params, code] of bad) {
      await assert.rejects(agent.conn.setSessionConfigOption(params), (e) => e.code === code, JSON.stringify(params));
    }
    const state = await agent.conn.extMethod("_keel/session_state", { sessionId: s.sessionId });
    assert.equal(state.session.permissionMode, "auto-edit");
    assert.equal(state.session.model, refuser);
    await agent.finish();
  } finally {
    fx.cleanup();
  }
});

test("the first prompt titles the session: session_info_update, then session/list", T, async () => {
  const fx = fixture();
  try {
    const agent = await startAgent({ model: scripted("acp-read.json"), workspace: fx.workspace, home: fx.home });
    await agent.initialize();
    const { sessionId } = await agent.conn.newSession({ cwd: fx.workspace, mcpServers: [] });
    const res = await agent.conn.prompt({ sessionId, prompt: text("What does the README say?\nBe brief.") });
    assert.equal(res.stopReason, "end_turn");
    const infos = agent.updatesOf(sessionId).filter((u) => u.sessionUpdate === "session_info_update");
    assert.deepEqual(infos.map((u) => u.title), ["What does the README say?"]);
    assert.equal(infos[0]._meta.keel.type, "session.title_changed");
    const list = await agent.conn.listSessions({ cwd: fx.workspace });
    assert.equal(list.sessions.find((x) => x.sessionId === sessionId).title, "What does the README say?");
    await agent.finish();
  } finally {
    fx.cleanup();
  }
});

test("session/delete removes a session for good; unknown ids get -32002", T, async () => {
  const fx = fixture();
  try {
    const agent = await startAgent({ model: scripted("acp-read.json"), workspace: fx.workspace, home: fx.home });
    await agent.initialize();
    const keep = await agent.conn.newSession({ cwd: fx.workspace, mcpServers: [] });
    const gone = await agent.conn.newSession({ cwd: fx.workspace, mcpServers: [] });
    await agent.conn.prompt({ sessionId: gone.sessionId, prompt: text("What does the README say?") });
    await agent.conn.deleteSession({ sessionId: gone.sessionId });
    const ids = (await agent.conn.listSessions({})).sessions.map((x) => x.sessionId);
    assert.deepEqual(ids, [keep.sessionId]);
    await assert.rejects(agent.conn.prompt({ sessionId: gone.sessionId, prompt: text("hi") }), (e) => e.code === -32002);
    await assert.rejects(
      agent.conn.loadSession({ sessionId: gone.sessionId, cwd: fx.workspace, mcpServers: [] }),
      (e) => e.code === -32002,
    );
    for (const sessionId of [gone.sessionId, "sess_never", "../home"]) {
      await assert.rejects(agent.conn.deleteSession({ sessionId }), (e) => e.code === -32002, sessionId);
    }
    // The other session is untouched.
    const again = await agent.conn.prompt({ sessionId: keep.sessionId, prompt: text("What does the README say?") });
    assert.equal(again.stopReason, "end_turn");
    await agent.finish();
  } finally {
    fx.cleanup();
  }
});

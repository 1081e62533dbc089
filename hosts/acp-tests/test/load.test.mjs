import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";

import { spawn } from "node:child_process";

import { fixture, scripted, startAgent, text } from "./harness.mjs";

/** A local OpenAI-compatible server: records each request, answers with `reply(body)`. */
async function fakeOpenAI(reply) {
  const requests = [];
  const server = http.createServer((req, res) => {
    // Only chat completions are answered; metadata probes (`GET /v1/models`, a
    // llama.cpp server's `GET /props`) find nothing, as on a server without them.
    if (req.method !== "POST") {
      res.writeHead(404, { "content-type": "application/json" });
      res.end('{"error":{"message":"not found"}}');
      return;
    }
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      const parsed = JSON.parse(body);
      requests.push(parsed);
      const answer = reply(parsed);
      res.writeHead(200, { "content-type": "text/event-stream" });
      const chunk = (o) => res.write(`data: ${JSON.stringify(o)}\n\n`);
      chunk({ choices: [{ index: 0, delta: { role: "assistant", content: answer }, finish_reason: null }] });
      chunk({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] });
      chunk({ choices: [], usage: { prompt_tokens: 50, completion_tokens: 5, total_tokens: 55 } });
      res.end("data: [DONE]\n\n");
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address();
  return {
    requests,
    env: { OPENAI_BASE_URL: `http://127.0.0.1:${port}/v1`, OPENAI_API_KEY: "test-key" },
    close: () => new Promise((r) => server.close(r)),
  };
}

test("session/load in a new process replays the history before answering; the model gets it", { timeout: 60_000 }, async () => {
  const fx = fixture();
  const model = await fakeOpenAI((body) => {
    const last = body.messages.at(-1);
    return String(last.content).includes("tangerine") ? "Noted: tangerine." : "You asked me to remember tangerine.";
  });
  try {
    const first = await startAgent({ model: "openai:fake-model", workspace: fx.workspace, home: fx.home, env: model.env });
    await first.initialize();
    const { sessionId } = await first.conn.newSession({ cwd: fx.workspace, mcpServers: [] });
    const r1 = await first.conn.prompt({ sessionId, prompt: text("Please remember the word tangerine.") });
    assert.equal(r1.stopReason, "end_turn");
    await first.finish();

    const second = await startAgent({ model: "openai:fake-model", workspace: fx.workspace, home: fx.home, env: model.env });
    const init = await second.initialize();
    assert.equal(init.agentCapabilities.loadSession, true);
    const before = second.updates.length;
    assert.equal(before, 0);
    let updatesWhenAnswered = -1;
    const loaded = await second.conn.loadSession({ sessionId, cwd: fx.workspace, mcpServers: [] }).then((r) => {
      updatesWhenAnswered = second.updates.length;
      return r;
    });
    assert.equal(loaded.modes.currentModeId, "ask");
    const replay = second.updatesOf(sessionId);
    assert.equal(updatesWhenAnswered, replay.length, "every replayed update arrived before the load answer");
    const user = replay.filter((u) => u.sessionUpdate === "user_message_chunk").map((u) => u.content.text);
    assert.deepEqual(user, ["Please remember the word tangerine."]);
    const agentText = replay.filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text).join("");
    assert.equal(agentText, "Noted: tangerine.");
    assert.ok(replay.every((u) => u._meta.keel.replay === true));
    // The raw stdout order: replay notifications, then the response.
    const lines = second.raw.map((l) => JSON.parse(l));
    const answerAt = lines.findIndex((m) => m.result && m.result.modes);
    assert.ok(answerAt > 0 && lines.slice(0, answerAt).filter((m) => m.method === "session/update").length === replay.length);

    const r2 = await second.conn.prompt({ sessionId, prompt: text("Which word?") });
    assert.equal(r2.stopReason, "end_turn");
    const lastRequest = model.requests.at(-1);
    const contents = lastRequest.messages.map((m) => `${m.role}:${typeof m.content === "string" ? m.content : JSON.stringify(m.content)}`);
    assert.ok(contents.includes("user:Please remember the word tangerine."), `history reaches the model: ${contents.join(" | ")}`);
    assert.ok(contents.includes("assistant:Noted: tangerine."));
    assert.equal(contents.at(-1), "user:Which word?");

    // Replay from a cursor through the extension method.
    const cursor = { requestId: replay[0]._meta.keel.requestId, sequence: replay[0]._meta.keel.sequence };
    const n = second.updates.length;
    const res = await second.conn.extMethod("_keel/replay", { sessionId, cursor });
    assert.ok(res.replayedEvents > 0);
    assert.equal(second.updates.length - n, res.updates);
    assert.deepEqual(res.lastCursor.requestId.startsWith("req_"), true);
    await second.finish();
  } finally {
    await model.close();
    fx.cleanup();
  }
});

test("bad input gets JSON-RPC errors and the agent reads on (raw stdio)", { timeout: 60_000 }, async () => {
  const fx = fixture();
  try {
    const child = spawn(process.env.KEEL_BIN, ["acp", "--workspace", fx.workspace, "--model", scripted("acp-read.json")], {
      env: { ...process.env, KEEL_HOME: fx.home },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    const exited = new Promise((r) => child.on("exit", (code) => r(code)));
    child.stdin.write("this is not json\n");
    child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id: "x1", method: "no/such_method", params: {} }) + "\n");
    child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id: "x2", method: "session/new", params: { cwd: 42 } }) + "\n");
    child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id: "x3", method: "initialize", params: { protocolVersion: 1 } }) + "\n");
    child.stdin.end();
    assert.equal(await exited, 0);
    const lines = out.trim().split("\n").map((l) => JSON.parse(l));
    assert.deepEqual(
      lines.map((m) => [m.id, m.error?.code ?? m.result?.protocolVersion]),
      [[null, -32700], ["x1", -32601], ["x2", -32602], ["x3", 1]],
    );
  } finally {
    fx.cleanup();
  }
});

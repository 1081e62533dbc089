import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import { KeelBridge, SequenceTracker, type KeelEvent, type SequenceGap, type UnknownEvent } from "../src";
import { fixture, killAfter, tempDir } from "./support";

function env(requestId: string, sequence: number, replay = false) {
  return { requestId, sequence, meta: replay ? { replay: true } : undefined };
}

describe("SequenceTracker", () => {
  it("accepts contiguous streams, interleaved", () => {
    const t = new SequenceTracker();
    const feed = [env("a", 1), env("b", 1), env("a", 2), env("b", 2), env("a", 3)];
    assert.deepEqual(feed.map((e) => t.check(e)), [null, null, null, null, null]);
    assert.equal(t.expected("a"), 4);
    assert.equal(t.expected("b"), 3);
  });

  it("reports a gap, a repeat and a stream that does not start at 1, then resynchronises", () => {
    const t = new SequenceTracker();
    assert.equal(t.check(env("a", 1)), null);
    assert.equal(t.check(env("a", 2)), null);
    assert.deepEqual(t.check(env("a", 5)), { requestId: "a", expected: 3, got: 5 });
    assert.equal(t.check(env("a", 6)), null);
    assert.deepEqual(t.check(env("a", 6)), { requestId: "a", expected: 7, got: 6 });
    assert.deepEqual(t.check(env("b", 2)), { requestId: "b", expected: 1, got: 2 });
    assert.equal(t.check(env("b", 3)), null);
  });

  it("lets replayed streams start anywhere, and checks them against a seeded cursor", () => {
    const t = new SequenceTracker();
    assert.equal(t.check(env("old", 7, true)), null);
    assert.equal(t.check(env("old", 8, true)), null);
    assert.equal(t.check(env("old", 9)), null);
    t.seed("cur", 4);
    assert.deepEqual(t.check(env("cur", 6, true)), { requestId: "cur", expected: 5, got: 6 });
    // A replayed event the host already has is not a break.
    assert.equal(t.check(env("old", 8, true)), null);
    assert.equal(t.check(env("old", 10)), null);
  });
});

/** An envelope line as the runtime writes it. */
function line(type: string, requestId: string, sequence: number, payload: object, sessionId: string | null = "sess_1"): string {
  return JSON.stringify({
    version: "1.0",
    sessionId,
    requestId,
    eventId: `evt_${requestId}_${sequence}`,
    type,
    timestamp: 1775600000000 + sequence,
    source: sessionId === null ? "bridge" : "runtime",
    sequence,
    payload,
  });
}

describe("KeelBridge stream checks (scripted fixture)", { timeout: 30_000 }, () => {
  it("emits 'gap' for a broken stream, ignores unknown event types and reports non-envelope lines", async (t) => {
    const dir = tempDir(t, "lines");
    const ready = line(
      "runtime.ready",
      "req_ready",
      1,
      {
        protocolVersion: "1.0",
        keelVersion: "0.1.0",
        pid: 1,
        workspace: null,
        availableModels: [],
        permissionModes: ["ask"],
        capabilities: [],
      },
      null,
    );
    const lines = [
      ready,
      line("request.accepted", "req_a", 1, { message: "héllo 世界", fromQueue: false }),
      line("assistant.delta", "req_a", 2, { text: "ünïcödé — 🚀 " }),
      line("future.thing", "req_a", 3, { shiny: true }),
      line("assistant.delta", "req_a", 5, { text: "after a gap" }),
      "this is not an envelope",
      line("session.completed", "req_a", 6, {
        stopReason: "end_turn",
        finalText: "done",
        telemetry: { elapsedMs: 1, turns: 1, toolCalls: 0, inputTokens: 0, outputTokens: 0 },
      }),
      line("request.accepted", "req_b", 2, { message: "late", fromQueue: false }),
    ];
    const file = join(dir, "lines.jsonl");
    writeFileSync(file, lines.join("\n") + "\n");

    const bridge = killAfter(
      t,
      await KeelBridge.spawn({
        binary: fixture("scripted-bridge.js"),
        workspace: dir,
        env: { KEEL_FIXTURE_LINES: file },
      }),
    );
    const gaps: SequenceGap[] = [];
    const unknown: UnknownEvent[] = [];
    const invalid: string[] = [];
    const known: KeelEvent[] = [];
    bridge.on("gap", (g) => gaps.push(g));
    bridge.on("unknown", (e) => unknown.push(e));
    bridge.on("invalidLine", (l) => invalid.push(l.line));
    bridge.on("event", (e) => known.push(e));
    const session = bridge.session("sess_1");
    const events = session.events();

    const exit = await bridge.shutdown();
    assert.equal(exit.abnormal, false);

    assert.deepEqual(gaps, [
      { requestId: "req_a", expected: 4, got: 5 },
      { requestId: "req_b", expected: 1, got: 2 },
    ]);
    assert.deepEqual(unknown.map((e) => e.type), ["future.thing"]);
    assert.deepEqual(invalid, ["this is not an envelope"]);
    assert.ok(!known.some((e) => e.type === ("future.thing" as string)));
    assert.deepEqual(
      known.filter((e) => e.sessionId === "sess_1").map((e) => `${e.requestId}#${e.sequence} ${e.type}`),
      [
        "req_a#1 request.accepted",
        "req_a#2 assistant.delta",
        "req_a#5 assistant.delta",
        "req_a#6 session.completed",
        "req_b#2 request.accepted",
      ],
    );
    // The text survived being cut into 5-byte pieces.
    const delta = known.find((e) => e.type === "assistant.delta");
    assert.equal(delta?.type === "assistant.delta" && delta.payload.text, "ünïcödé — 🚀 ");

    // The session's iterator got the same events and ended with the bridge.
    const got: string[] = [];
    for await (const e of events) got.push(e.type);
    assert.deepEqual(got, [
      "request.accepted",
      "assistant.delta",
      "assistant.delta",
      "session.completed",
      "request.accepted",
    ]);
  });
});

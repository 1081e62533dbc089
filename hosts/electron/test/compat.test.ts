import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import { KeelBridge, type KeelEvent, type UnknownEvent } from "../src";
import { REPO_ROOT, fixture, tempDir } from "./support";

// The corpus the Rust decoder reads too (tests/it/compat.rs): envelopes of a later 1.x
// with new fields, unknown values in every growable enum field, new event types and new
// error codes.
const CORPUS = join(REPO_ROOT, "tests", "data", "compat", "later-1x.jsonl");

describe("forward compatibility", { timeout: 30_000 }, () => {
  it("a later 1.x runtime's envelopes are delivered whole, unknown values and types kept", async (t) => {
    const dir = tempDir(t, "later");
    const lines = readFileSync(CORPUS, "utf8")
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const bridge = await KeelBridge.spawn({
      binary: fixture("later-bridge.js"),
      workspace: dir,
      env: { KEEL_FIXTURE_CORPUS: CORPUS },
    });
    t.after(() => bridge.kill().catch(() => undefined));

    const known: KeelEvent[] = [];
    const unknown: UnknownEvent[] = [];
    const invalid: string[] = [];
    const gaps: unknown[] = [];
    bridge.on("event", (e) => {
      if (e.requestId.startsWith("req_later_")) known.push(e);
    });
    bridge.on("unknown", (e) => unknown.push(e));
    bridge.on("invalidLine", (l) => invalid.push(l.reason));
    bridge.on("gap", (g) => gaps.push(g));

    // The runtime replays the corpus before answering; answers come in line order.
    const sessions = await bridge.listSessions();
    assert.deepEqual(sessions, []);
    assert.deepEqual(invalid, []);
    assert.deepEqual(gaps, []);

    const want = lines.filter((l) => !["runtime.ready", "runtime.stopped"].includes(l.type as string));
    const got = [...known, ...unknown].sort((a, b) => a.requestId.localeCompare(b.requestId));
    assert.equal(got.length, want.length);
    for (let i = 0; i < want.length; i++) {
      // Nothing lost or changed: new fields, unknown enum values, unknown payloads.
      assert.deepEqual(JSON.parse(JSON.stringify(got[i])), want[i], `line of ${String(want[i].type)}`);
    }
    assert.deepEqual(
      unknown.map((e) => e.type),
      ["session.paused", "tool.call.retried", "later.event.with-odd-chars"],
    );

    // An unknown error code reads as a string the host treats as a generic error.
    const error = known.find((e) => e.type === "error");
    assert.ok(error !== undefined && error.type === "error");
    assert.equal(error.payload.code, "later_errorcode");
    const approval = known.find((e) => e.type === "approval.requested");
    assert.ok(approval !== undefined && approval.type === "approval.requested");
    assert.equal(approval.payload.riskLevel, "later_risklevel");

    await bridge.shutdown();
  });
});

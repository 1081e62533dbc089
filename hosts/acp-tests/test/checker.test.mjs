// The stdout checker itself: it must catch what the library would drop or reject.
import { test } from "node:test";
import assert from "node:assert/strict";

import { validateStdout } from "./harness.mjs";

const meta = { keel: { eventId: "evt_1", requestId: "req_1", sequence: 1 } };
const update = (u) => JSON.stringify({ jsonrpc: "2.0", method: "session/update", params: { sessionId: "s", update: { ...u, _meta: meta } } });

test("the checker accepts a valid update", () => {
  validateStdout([update({ sessionUpdate: "tool_call", toolCallId: "t", title: "Read a", kind: "read", status: "pending" })], new Map());
});

test("the checker rejects an unknown tool kind, a missing title, non-JSON and fs requests", () => {
  assert.throws(() => validateStdout([update({ sessionUpdate: "tool_call", toolCallId: "t", title: "x", kind: "bogus" })], new Map()));
  assert.throws(() => validateStdout([update({ sessionUpdate: "tool_call", toolCallId: "t" })], new Map()));
  assert.throws(() => validateStdout([update({ sessionUpdate: "plan", entries: [{ content: "a", priority: "urgent", status: "pending" }] })], new Map()));
  assert.throws(() => validateStdout(["log line"], new Map()));
  assert.throws(() => validateStdout([JSON.stringify({ jsonrpc: "2.0", id: 0, method: "fs/read_text_file", params: {} })], new Map()));
});

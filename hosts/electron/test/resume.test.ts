import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { BridgeExitError, type KeelEvent, type SequenceGap } from "../src";
import { readUntil, sandbox, startBridge } from "./support";

/** An envelope without `meta.replay`, for comparing a replay with the original. */
function original(e: KeelEvent): KeelEvent {
  const { meta, ...rest } = e;
  if (meta === undefined) return rest as KeelEvent;
  const { replay: _replay, ...others } = meta;
  return (Object.keys(others).length === 0 ? rest : { ...rest, meta: others }) as KeelEvent;
}

describe("resume", { timeout: 30_000 }, () => {
  it("after the bridge is killed mid-request, a new bridge replays what followed the cursor", async (t) => {
    const dirs = sandbox(t);
    const first = await startBridge(t, dirs, "electron-resume.json");
    const sent: KeelEvent[] = [];
    first.on("event", (e) => {
      if (e.sessionId !== null) sent.push(e);
    });
    const session = await first.startSession({ title: "resume me" });
    const events = session.events();
    const run = await session.sendMessage("List the workspace, then think for a long time");
    // The first turn lists the workspace; the second one stalls.
    await readUntil(events, (e) => e.type === "tool.call.completed" && e.requestId === run.requestId);

    const exit = await first.kill("SIGKILL");
    assert.equal(exit.signal, "SIGKILL");
    assert.equal(exit.abnormal, true);
    await assert.rejects(run.done, BridgeExitError);
    // Events already delivered (the turn's end, the next turn's start) are still read;
    // then the stream fails with the exit.
    await assert.rejects(readUntil(events, () => false), BridgeExitError);
    // The last event the killed bridge delivered: the turn's end and the next turn's start
    // may have followed `tool.call.completed` before the kill landed.
    const lastBeforeKill = session.cursor;
    assert.ok(lastBeforeKill !== null);
    assert.deepEqual(lastBeforeKill, { requestId: sent[sent.length - 1].requestId, sequence: sent[sent.length - 1].sequence });

    // The cursor: the request's first event. Everything after it must come back.
    const at = sent.findIndex((e) => e.requestId === run.requestId && e.type === "request.accepted");
    assert.ok(at >= 0);
    const cursor = { requestId: sent[at].requestId, sequence: sent[at].sequence };
    const expected = sent.slice(at + 1);
    assert.ok(expected.length >= 4, "the first bridge sent a real stream after the cursor");

    const second = await startBridge(t, dirs, "electron-resume.json");
    const gaps: SequenceGap[] = [];
    second.on("gap", (g) => gaps.push(g));
    // The request the killed bridge never finished is ended by the new one.
    const restartEnded = new Promise<KeelEvent>((resolve) => {
      second.on("event", (e) => {
        if (e.type === "session.interrupted" && e.requestId === run.requestId && e.meta?.replay !== true) resolve(e);
      });
    });
    const { session: again, resumed, replayed } = await second.resume(session.id, cursor);
    assert.equal(again.id, session.id);
    assert.equal(resumed.payload.session.sessionId, session.id);
    assert.equal(resumed.payload.session.title, "resume me");
    assert.equal(resumed.payload.replayed, replayed.length);
    assert.ok(replayed.every((e) => e.meta?.replay === true), "replayed events are marked");
    // Everything delivered comes back, in order. The log is written before stdout, so an
    // event logged in the instant before the kill may follow what was delivered.
    assert.deepEqual(replayed.slice(0, expected.length).map(original), expected);
    assert.ok(replayed.length <= expected.length + 2, "at most the in-flight events were logged but not delivered");
    const lastLogged = replayed[replayed.length - 1];
    assert.ok(lastLogged.sequence >= lastBeforeKill.sequence);
    assert.deepEqual(resumed.payload.lastCursor, { requestId: lastLogged.requestId, sequence: lastLogged.sequence });
    const ended = await restartEnded;
    assert.equal(ended.type === "session.interrupted" && ended.payload.reason, "restart");
    assert.equal(ended.sequence, lastLogged.sequence + 1, "the stream goes on without a gap");
    assert.deepEqual(gaps, []);
    assert.deepEqual(again.cursor, { requestId: run.requestId, sequence: lastLogged.sequence + 1 });

    // The restored session answers commands.
    const state = await again.state();
    assert.equal(state.payload.session.sessionId, session.id);
    assert.equal(state.payload.state, "idle");
    await second.shutdown();
  });

  it("after a clean shutdown, resuming from the saved cursor replays nothing and the session goes on", async (t) => {
    const dirs = sandbox(t);
    const first = await startBridge(t, dirs, "electron-write.json");
    const session = await first.startSession();
    const events = session.events();
    const run = await session.sendMessage("Write the notes");
    const seen = await readUntil(events, (e) => e.type === "approval.requested");
    const asked = seen[seen.length - 1];
    assert.equal(asked.type, "approval.requested");
    await session.deny(asked.type === "approval.requested" ? asked.payload.approvalId : "");
    await run.done;
    await first.shutdown();
    // The session's last event is its `session.closed`, sent during the shutdown.
    const closed = await readUntil(events, (e) => e.type === "session.closed");
    const saved = session.cursor;
    assert.deepEqual(saved, { requestId: closed[closed.length - 1].requestId, sequence: closed[closed.length - 1].sequence });
    assert.equal(session.closed, true);

    const second = await startBridge(t, dirs, "electron-write.json");
    const { session: again, resumed, replayed } = await second.resume(session.id, saved);
    assert.equal(again.closed, false);
    assert.deepEqual(replayed, []);
    assert.deepEqual(resumed.payload.lastCursor, saved);
    assert.ok(resumed.payload.messageCount > 0, "the history came back");
    const next = await again.sendMessage("Once more");
    assert.equal(next.answer.type, "request.accepted");
    await second.shutdown();
  });

  it("a cursor that is not in the log is refused", async (t) => {
    const dirs = sandbox(t);
    const first = await startBridge(t, dirs, "electron-write.json");
    const session = await first.startSession();
    await first.shutdown();
    const second = await startBridge(t, dirs, "electron-write.json");
    await assert.rejects(second.resume(session.id, { requestId: "req_never_sent", sequence: 1 }), {
      name: "KeelError",
      code: "REQUEST_INVALID",
    });
    await assert.rejects(second.resume("sess_unknown"), { name: "KeelError", code: "SESSION_NOT_FOUND" });
    await second.shutdown();
  });

  it("--session-id resumes a stored session as the bridge starts", async (t) => {
    const dirs = sandbox(t);
    const first = await startBridge(t, dirs, "electron-write.json");
    const session = await first.startSession({ title: "restart" });
    await first.shutdown();

    const second = await startBridge(t, dirs, "electron-write.json", { sessionId: session.id });
    const events = second.session(session.id).events();
    const [resumed] = await readUntil(events, () => true);
    assert.equal(resumed.type, "session.resumed");
    assert.equal(resumed.type === "session.resumed" && resumed.payload.session.title, "restart");
    const list = await second.listSessions();
    assert.ok(list.some((s) => s.sessionId === session.id && s.state !== "closed"));
    await second.shutdown();
  });
});

import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import { KeelBridge, KeelError, type KeelEvent, type SequenceGap } from "../src";
import { connectClient, endOf, fixture, readUntil, sandbox, scripted, startDaemon } from "./support";

function approvalOf(events: KeelEvent[]): string {
  const e = events.find((x) => x.type === "approval.requested");
  assert.ok(e !== undefined && e.type === "approval.requested");
  return e.payload.approvalId;
}

describe("the daemon's socket", { timeout: 60_000 }, () => {
  it("two clients on one session see the same events in order, and one approval closes both dialogs", async (t) => {
    const dirs = sandbox(t);
    const daemon = await startDaemon(t, dirs, scripted("electron-write.json"));
    const a = await connectClient(t, daemon);
    const b = await connectClient(t, daemon);
    assert.equal(a.viaSocket, true);
    assert.equal(a.pid, daemon.child.pid, "the daemon's pid, from runtime.ready");
    const gaps: SequenceGap[] = [];
    a.on("gap", (g) => gaps.push(g));
    b.on("gap", (g) => gaps.push(g));

    const sa = await a.startSession({ title: "shared" });
    const { session: sb, watched, replayed } = await b.watch(sa.id);
    assert.equal(watched.payload.session.sessionId, sa.id);
    assert.equal(watched.payload.activeRequestId, null);
    assert.deepEqual(replayed, []);
    const aEvents = sa.events();
    const bEvents = sb.events();

    const run = await sa.sendMessage("Write the notes");
    const aAsked = await readUntil(aEvents, (e) => e.type === "approval.requested");
    const bAsked = await readUntil(bEvents, (e) => e.type === "approval.requested");
    const approvalId = approvalOf(aAsked);
    assert.equal(approvalOf(bAsked), approvalId);

    // B answers; A's dialog closes on the same `approval.granted`; A's late answer is
    // refused (`bridge.approve` would not even know the session any more).
    const granted = await b.approve(approvalId);
    assert.equal(granted.type, "approval.granted");
    await assert.rejects(sa.approve(approvalId), (e: unknown) => e instanceof KeelError && e.code === "APPROVAL_NOT_FOUND");
    const done = await run.done;
    assert.equal(done.type, "session.completed");
    const aRest = await readUntil(aEvents, endOf(run.requestId));
    const bRest = await readUntil(bEvents, endOf(run.requestId));
    assert.ok(aRest.some((e) => e.eventId === granted.eventId));
    assert.ok(bRest.some((e) => e.eventId === granted.eventId));
    const ids = (evs: KeelEvent[]) => evs.filter((e) => e.requestId === run.requestId).map((e) => e.eventId);
    assert.deepEqual(ids([...aAsked, ...aRest]), ids([...bAsked, ...bRest]));
    assert.deepEqual(gaps, []);
    assert.equal(readFileSync(join(dirs.workspace, "NOTES.md"), "utf8"), "# Notes\n\nWritten through the Electron client.\n");
  });

  it("a client killed mid-stream leaves the request running; a new one watches from its cursor and gets exactly what it missed", async (t) => {
    const dirs = sandbox(t);
    const daemon = await startDaemon(t, dirs, `scripted:${fixture("serve-slow.json")}`);
    const first = await connectClient(t, daemon);
    const session = await first.startSession();
    const events = session.events();
    const run = await first.sendMessage(session.id, "list, then wait");
    await readUntil(events, (e) => e.type === "tool.call.completed");
    const cursor = session.cursor;
    assert.ok(cursor !== null);
    const seenBefore = new Set<string>();
    first.on("event", (e) => seenBefore.add(e.eventId));
    const exit = await first.kill();
    assert.equal(exit.abnormal, true, "dropped without runtime.stopped");

    const second = await connectClient(t, daemon);
    const gaps: SequenceGap[] = [];
    second.on("gap", (g) => gaps.push(g));
    const live: KeelEvent[] = [];
    const ended = new Promise<KeelEvent>((resolve) => {
      second.on("event", (e) => {
        if (e.meta?.replay !== true && e.sessionId === session.id && e.type !== "session.watched") live.push(e);
        if (e.requestId === run.requestId && e.type === "session.completed") resolve(e);
      });
    });
    const { watched, replayed } = await second.watch(session.id, cursor);
    const completed = await ended;
    assert.equal(completed.type === "session.completed" && completed.payload.finalText, "Finished after the pause, in several pieces.");
    assert.equal(watched.payload.replayed, replayed.length);
    assert.ok(replayed.every((e) => e.meta?.replay === true));
    // Replay and live stream join: the request's events from just after the cursor to
    // its end, each once, in order, whatever split the timing chose.
    const after = [...replayed, ...live].filter((e) => e.requestId === run.requestId);
    assert.equal(after[0].sequence, Number(cursor.sequence) + 1);
    after.forEach((e, i) => assert.equal(e.sequence, Number(cursor.sequence) + 1 + i));
    assert.equal(new Set(after.map((e) => e.eventId)).size, after.length);
    assert.deepEqual(gaps, []);
    // The log agrees: what follows the cursor there is what the new client got.
    const log = readFileSync(join(dirs.home, "sessions", session.id, "events.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as KeelEvent);
    const at = log.findIndex((e) => e.requestId === cursor.requestId && e.sequence === cursor.sequence);
    assert.deepEqual(
      [...replayed, ...live].map((e) => e.eventId),
      log.slice(at + 1).map((e) => e.eventId),
    );
  });

  it("bad input is answered on its connection only, and shutdown ends the connection, not the daemon", async (t) => {
    const dirs = sandbox(t);
    const daemon = await startDaemon(t, dirs, scripted("hello.json"));
    const a = await connectClient(t, daemon);
    const b = await connectClient(t, daemon);
    const bSaw: KeelEvent[] = [];
    b.on("event", (e) => bSaw.push(e));
    const errors = new Promise<KeelEvent>((resolve) => a.on("event", (e) => e.type === "error" && resolve(e)));
    a.writeLine("{ this is not json");
    const err = await errors;
    assert.equal(err.type === "error" && err.payload.code, "REQUEST_INVALID");
    assert.equal(err.type === "error" && err.payload.details.reason, "invalid_json");
    await assert.rejects(
      a.send("session.list", {}, null, { requestId: "sv" }).then(() => a.send("session.watch", { sessionId: "sess_nope" })),
      (e: unknown) => e instanceof KeelError && e.code === "SESSION_NOT_FOUND",
    );
    // A schemaVersion other than 1 is refused; the connection stays usable.
    a.writeLine(JSON.stringify({ version: "1.0", schemaVersion: 2, type: "session.list", requestId: "sv2" }));
    const list = await a.listSessions();
    assert.ok(Array.isArray(list));
    assert.ok(bSaw.every((e) => e.type !== "error"), "B saw none of A's errors");

    const exit = await a.shutdown();
    assert.equal(exit.stopped, true);
    assert.equal(exit.reason, "disconnect");
    assert.equal(exit.abnormal, false);
    assert.equal((await b.listSessions()).length >= 0, true, "the other connection goes on");
    const c = await KeelBridge.connect({ socket: daemon.socket });
    await c.shutdown();
    assert.equal(daemon.child.exitCode, null, "the daemon goes on");
  });

  it("connecting where no daemon listens fails with the socket's error", async (t) => {
    const dirs = sandbox(t);
    const missing = join(dirs.home, "nobody.sock");
    assert.equal(existsSync(missing), false);
    await assert.rejects(KeelBridge.connect({ socket: missing }), (e: unknown) => (e as NodeJS.ErrnoException).code === "ENOENT");
  });
});

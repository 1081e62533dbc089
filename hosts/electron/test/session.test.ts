import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import { KeelError, type EventOf, type KeelEvent } from "../src";
import { endOf, readUntil, sandbox, startBridge } from "./support";

function ofType<K extends KeelEvent["type"]>(events: KeelEvent[], type: K): EventOf<K>[] {
  return events.filter((e): e is EventOf<K> => e.type === type);
}

describe("sessions against the real bridge", { timeout: 30_000 }, () => {
  it("runs a session through an approval: allow_once writes the file", async (t) => {
    const dirs = sandbox(t);
    const bridge = await startBridge(t, dirs, "electron-write.json");
    assert.equal(bridge.ready.protocolVersion.split(".")[0], "1");
    assert.equal(bridge.ready.pid, bridge.pid);
    assert.ok(bridge.ready.capabilities.includes("approvals"));

    const session = await bridge.startSession();
    assert.match(session.id, /^sess_/);
    const events = session.events();
    const run = await session.sendMessage("Write the notes file");
    assert.equal(run.answer.type, "request.accepted");
    assert.equal(run.answer.requestId, run.requestId);

    const untilApproval = await readUntil(events, (e) => e.type === "approval.requested");
    const asked = ofType(untilApproval, "approval.requested")[0];
    assert.equal(asked.requestId, run.requestId);
    assert.equal(asked.payload.toolName, "write_file");
    assert.ok(asked.payload.decisions.includes("allow_once"));
    assert.ok(!existsSync(join(dirs.workspace, "NOTES.md")), "nothing is written before the approval");

    const granted = await session.approve(asked.payload.approvalId, "allow_once");
    assert.equal(granted.type, "approval.granted");
    assert.equal(granted.requestId, run.requestId, "the grant is on the running request's stream");
    assert.ok(granted.meta?.replyTo, "the grant names the command it answers");
    assert.equal(granted.type === "approval.granted" && granted.payload.approvalId, asked.payload.approvalId);

    const rest = await readUntil(events, endOf(run.requestId));
    const done = await run.done;
    assert.equal(done.type, "session.completed");
    assert.equal(done.type === "session.completed" && done.payload.stopReason, "end_turn");
    assert.equal(done.type === "session.completed" && done.payload.finalText, "Done: NOTES.md is written.");
    assert.deepEqual(ofType(rest, "tool.call.completed").map((e) => e.payload.toolName), ["write_file"]);
    assert.equal(
      readFileSync(join(dirs.workspace, "NOTES.md"), "utf8"),
      "# Notes\n\nWritten through the Electron client.\n",
    );
    // The run saw its whole stream, in order.
    assert.deepEqual(
      run.events.map((e) => e.sequence),
      run.events.map((_, i) => i + 1),
    );

    const exit = await bridge.shutdown();
    assert.deepEqual([exit.code, exit.signal, exit.stopped, exit.abnormal], [0, null, true, false]);
  });

  it("denies an approval: no file, and the run still completes", async (t) => {
    const dirs = sandbox(t);
    const bridge = await startBridge(t, dirs, "electron-write.json");
    const session = await bridge.startSession();
    const events = session.events();
    const run = await session.sendMessage("Write the notes file");

    const seen = await readUntil(events, (e) => e.type === "approval.requested");
    const asked = ofType(seen, "approval.requested")[0];
    // The bridge knows which session asked: no sessionId needed.
    const denied = await bridge.approve(asked.payload.approvalId, "deny");
    assert.equal(denied.type, "approval.denied");
    assert.equal(denied.requestId, run.requestId);

    const rest = await readUntil(events, endOf(run.requestId));
    const skipped = ofType(rest, "tool.call.skipped");
    assert.equal(skipped.length, 1);
    assert.equal(skipped[0].payload.error.code, "TOOL_PERMISSION_DENIED");
    assert.equal(ofType(rest, "tool.call.started").length, 0);
    const done = await run.done;
    assert.equal(done.type === "session.completed" && done.payload.stopReason, "end_turn");
    assert.equal(done.type === "session.completed" && done.payload.finalText, "Understood: I did not write NOTES.md.");
    assert.ok(!existsSync(join(dirs.workspace, "NOTES.md")));

    // A second answer to the same approval is refused with a stable code.
    await assert.rejects(session.approve(asked.payload.approvalId), (err: unknown) => {
      assert.ok(err instanceof KeelError);
      assert.equal(err.code, "APPROVAL_NOT_FOUND");
      assert.equal(err.eventType, "error");
      return true;
    });
    await bridge.shutdown();
  });

  it("interrupts a running request promptly; the next message works", async (t) => {
    const dirs = sandbox(t);
    const bridge = await startBridge(t, dirs, "electron-stall.json");
    const session = await bridge.startSession();
    const events = session.events();
    const run = await session.sendMessage("Take your time");
    assert.equal(run.answer.type, "request.accepted");
    const state = await session.state();
    assert.equal(state.payload.activeRequestId, run.requestId);
    // The model call is under way once its (announced) slow retry arrives.
    const before = await readUntil(events, (e) => e.type === "warning" && e.requestId === run.requestId);

    const answer = await session.interrupt();
    assert.equal(answer.type, "session.interrupted");
    assert.equal(answer.requestId, run.requestId, "answered on the running request's stream");
    assert.equal(answer.type === "session.interrupted" && answer.payload.wasRunning, true);
    assert.equal(answer.type === "session.interrupted" && answer.payload.interruptedRequestId, run.requestId);
    const done = await run.done;
    assert.equal(done.eventId, answer.eventId);
    const seen = before.concat(await readUntil(events, endOf(run.requestId)));
    assert.ok(!seen.some((e) => e.type === "assistant.delta"), "the stalled answer never arrived");

    // Interrupting an idle session is answered on the command's own stream.
    const idle = await bridge.interrupt(session.id);
    assert.equal(idle.type, "session.interrupted");
    assert.equal(idle.type === "session.interrupted" && idle.payload.wasRunning, false);
    assert.notEqual(idle.requestId, run.requestId);

    const second = await session.sendMessage("Again");
    assert.equal(second.answer.type, "request.accepted");
    const secondDone = await second.done;
    assert.equal(secondDone.type === "session.completed" && secondDone.payload.finalText, "Second answer, right away.");
    await bridge.shutdown();
  });

  it("plan mode: a write is refused, the plan is approved, then the write runs", async (t) => {
    const dirs = sandbox(t);
    const bridge = await startBridge(t, dirs, "electron-plan.json");
    const session = await bridge.startSession();
    const changed = await session.setMode("plan");
    assert.equal(changed.type === "session.mode_changed" && changed.payload.mode, "plan");

    const events = session.events();
    const run = await session.sendMessage("Write PLAN.md");
    const untilPlan = await readUntil(events, (e) => e.type === "plan.approval_required");
    const skipped = ofType(untilPlan, "tool.call.skipped");
    assert.equal(skipped.length, 1);
    assert.equal(skipped[0].payload.toolName, "write_file");
    assert.equal(skipped[0].payload.error.code, "PLAN_APPROVAL_REQUIRED");
    assert.equal(ofType(untilPlan, "approval.requested").length, 0, "plan mode asks no approval for writes");
    assert.ok(!existsSync(join(dirs.workspace, "PLAN.md")));

    const required = ofType(untilPlan, "plan.approval_required")[0];
    assert.deepEqual(
      required.payload.steps.map((s) => s.title),
      ["Write PLAN.md with the agreed content"],
    );
    const approved = await bridge.approvePlan(required.payload.planId, "auto-edit");
    assert.equal(approved.type, "plan.approved");
    assert.equal(approved.requestId, run.requestId);
    assert.equal(approved.type === "plan.approved" && approved.payload.planId, required.payload.planId);

    const rest = await readUntil(events, endOf(run.requestId));
    assert.ok(!rest.some((e) => e.type === "approval.requested"), "auto-edit writes without asking");
    assert.deepEqual(
      ofType(rest, "tool.call.completed").map((e) => e.payload.toolName),
      ["propose_plan", "write_file"],
    );
    const done = await run.done;
    assert.equal(done.type === "session.completed" && done.payload.finalText, "PLAN.md is written as planned.");
    assert.equal(readFileSync(join(dirs.workspace, "PLAN.md"), "utf8"), "# Plan\n\nApproved, then written.\n");
    const state = await session.state();
    assert.equal(state.payload.session.permissionMode, "auto-edit");
    await bridge.shutdown();
  });

  it("asks the user: the answer reaches the model", async (t) => {
    const dirs = sandbox(t);
    const bridge = await startBridge(t, dirs, "electron-ask.json");
    const session = await bridge.startSession();
    const events = session.events();
    const run = await session.sendMessage("Read something");
    const seen = await readUntil(events, (e) => e.type === "ask.requested");
    const ask = ofType(seen, "ask.requested")[0];
    assert.equal(ask.payload.question, "Which file should I read?");
    assert.deepEqual(ask.payload.candidates, ["README.md", "NOTES.md"]);
    const answered = await bridge.answer(ask.payload.askId, "NOTES.md");
    assert.equal(answered.type, "ask.answered");
    assert.equal(answered.requestId, run.requestId);
    const done = await run.done;
    // The script fails the call unless the answer came back as the tool result.
    assert.equal(done.type === "session.completed" && done.payload.finalText, "You chose NOTES.md.");
    await bridge.shutdown();
  });

  it("an interrupt during an approval expires it and is answered by session.interrupted", async (t) => {
    const dirs = sandbox(t);
    const bridge = await startBridge(t, dirs, "electron-write.json");
    const session = await bridge.startSession();
    const events = session.events();
    const run = await session.sendMessage("Write the notes file");
    const seen = await readUntil(events, (e) => e.type === "approval.requested");
    const asked = ofType(seen, "approval.requested")[0];

    const answer = await session.interrupt();
    // approval.expired also names the interrupt in meta.replyTo, but does not answer it.
    assert.equal(answer.type, "session.interrupted");
    const rest = await readUntil(events, endOf(run.requestId));
    const expired = ofType(rest, "approval.expired");
    assert.equal(expired.length, 1);
    assert.equal(expired[0].payload.approvalId, asked.payload.approvalId);
    assert.equal(expired[0].payload.reason, "interrupted");
    assert.equal((await run.done).type, "session.interrupted");
    assert.ok(!existsSync(join(dirs.workspace, "NOTES.md")));
    await assert.rejects(session.approve(asked.payload.approvalId), { name: "KeelError", code: "APPROVAL_NOT_FOUND" });
    await bridge.shutdown();
  });

  it("queues a message on a busy session and cancels it", async (t) => {
    const dirs = sandbox(t);
    const bridge = await startBridge(t, dirs, "electron-stall.json");
    const session = await bridge.startSession();
    const running = await session.sendMessage("Take your time");
    const queued = await session.sendMessage("Then this", { whenBusy: "queue" });
    assert.equal(queued.answer.type, "request.queued");
    assert.equal(queued.answer.type === "request.queued" && queued.answer.payload.position, 1);
    const state = await session.state();
    assert.deepEqual(state.payload.queuedRequestIds, [queued.requestId]);

    const cancelled = await session.send("request.cancel_queued", { queuedRequestId: queued.requestId });
    assert.equal(cancelled.type, "request.cancelled");
    assert.equal(cancelled.requestId, queued.requestId, "on the queued request's stream");
    assert.equal((await queued.done).eventId, cancelled.eventId);

    await assert.rejects(session.sendMessage("Not now", { whenBusy: "reject" }), (err: unknown) => {
      assert.ok(err instanceof KeelError);
      assert.equal(err.code, "SESSION_BUSY");
      assert.equal(err.eventType, "request.rejected");
      return true;
    });
    await session.interrupt();
    assert.equal((await running.done).type, "session.interrupted");
    await bridge.shutdown();
  });
});

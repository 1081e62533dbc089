import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";

import { KeelError, type KeelEvent } from "../src";
import { endOf, readUntil, sandbox, startBridge } from "./support";

/** Awaits a promise that must reject with a {@link KeelError}; returns it. */
async function refused(p: Promise<unknown>): Promise<KeelError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof KeelError, `expected a KeelError, got ${String(err)}`);
    return err;
  }
  assert.fail("the call was expected to be refused");
}

describe("extension calls against the real bridge", { timeout: 30_000 }, () => {
  it("runs a blocking review: messages are refused until it is approved", async (t) => {
    const dirs = sandbox(t);
    const bridge = await startBridge(t, dirs, "hello.json");
    const session = await bridge.startSession();

    const none = await session.review.status();
    assert.equal(none.type, "review.state");
    assert.equal(none.payload.review, null);
    assert.equal(none.payload.blocking, false);

    const entered = await session.review.enter("release check", { blocking: true, checklist: ["changelog"] });
    assert.equal(entered.type, "review.requested");
    assert.match(entered.payload.review.reviewId, /^rev_/);
    assert.equal(entered.payload.review.status, "pending");
    assert.equal(entered.payload.review.blocking, true);
    const item = entered.payload.review.checklist[0];
    assert.equal(item.title, "changelog");
    assert.equal(item.done, false);

    const blocked = await refused(session.sendMessage("hello"));
    assert.equal(blocked.code, "REVIEW_BLOCKING");

    const status = await session.review.status();
    assert.equal(status.payload.blocking, true);
    assert.equal(status.payload.review?.reviewId, entered.payload.review.reviewId);

    const commented = await session.review.submit({ comment: "looks right", checklistItem: { id: item.id } });
    assert.equal(commented.type, "review.updated");
    assert.deepEqual(
      commented.payload.review.comments.map((c) => c.content),
      ["looks right"],
    );
    assert.equal(commented.payload.review.checklist[0].done, true);

    const resolved = await session.review.resolve("approved", "ship it");
    assert.equal(resolved.type, "review.resolved");
    assert.equal(resolved.payload.review.status, "approved");
    assert.equal(resolved.payload.review.summary, "ship it");
    assert.equal((await session.review.status()).payload.blocking, false);

    // The next message runs.
    const events = session.events();
    const run = await session.sendMessage("hello");
    assert.equal(run.answer.type, "request.accepted");
    await readUntil(events, endOf(run.requestId));
    const done = await run.done;
    assert.equal(done.type, "session.completed");

    // A resolved review is gone for further decisions.
    const again = await refused(session.review.resolve("rejected"));
    assert.equal(again.code, "REVIEW_NOT_FOUND");
    await bridge.shutdown();
  });

  it("proposes and applies patches; a file changed on disk is a conflict", async (t) => {
    const dirs = sandbox(t);
    writeFileSync(join(dirs.workspace, "config.txt"), "port = 80\n");
    const bridge = await startBridge(t, dirs, "hello.json");
    const session = await bridge.startSession();

    const proposed = await session.patch.propose([{ path: "NOTES.md", content: "# Notes\n" }], "add notes");
    assert.equal(proposed.type, "patch.proposed");
    const patch = proposed.payload.patch;
    assert.match(patch.patchId, /^patch_/);
    assert.equal(patch.status, "pending");
    assert.equal(patch.origin, "host");
    assert.deepEqual(
      patch.files.map((f) => [f.path, f.op, f.stats.added, f.stats.removed]),
      [["NOTES.md", "create", 1, 0]],
    );
    assert.ok(!existsSync(join(dirs.workspace, "NOTES.md")), "a proposal writes nothing");

    const summary = await session.patch.summary();
    assert.deepEqual(
      summary.payload.pending.map((p) => p.patchId),
      [patch.patchId],
    );
    assert.equal(summary.payload.totals.fileCount, 1);

    const applied = await session.patch.apply(patch.patchId);
    assert.equal(applied.type, "patch.applied");
    assert.equal(applied.payload.patch.status, "applied");
    assert.equal(readFileSync(join(dirs.workspace, "NOTES.md"), "utf8"), "# Notes\n");

    const gone = await refused(session.patch.apply(patch.patchId));
    assert.equal(gone.code, "PATCH_NOT_FOUND");

    // The file changes after the proposal: applying it would lose that change.
    const change = await session.patch.propose([{ path: "config.txt", content: "port = 8080\n" }]);
    writeFileSync(join(dirs.workspace, "config.txt"), "port = 443\n");
    const conflict = await refused(session.patch.apply(change.payload.patch.patchId));
    assert.equal(conflict.code, "PATCH_CONFLICT");
    assert.equal(readFileSync(join(dirs.workspace, "config.txt"), "utf8"), "port = 443\n");

    // It is still pending and can be rejected.
    const rejected = await session.patch.reject(change.payload.patch.patchId, "stale");
    assert.equal(rejected.type, "patch.rejected");
    assert.equal(rejected.payload.patch.status, "rejected");
    const after = await session.patch.summary();
    assert.equal(after.payload.pending.length, 0);
    assert.deepEqual(
      after.payload.history.map((p) => p.status),
      ["applied", "rejected"],
    );
    await bridge.shutdown();
  });

  it("builds a task graph: cycles are refused, nodes advance and complete", async (t) => {
    const dirs = sandbox(t);
    const bridge = await startBridge(t, dirs, "hello.json");
    const session = await bridge.startSession();

    const empty = await session.taskGraph.state();
    assert.equal(empty.type, "task-graph.state");
    assert.equal(empty.payload.graph, null);

    const cycle = await refused(
      session.taskGraph.create([
        { id: "a", title: "A", dependsOn: ["b"] },
        { id: "b", title: "B", dependsOn: ["a"] },
      ]),
    );
    assert.equal(cycle.code, "CYCLE_DETECTED");
    assert.equal((await session.taskGraph.state()).payload.graph, null, "a refused graph is not kept");

    const created = await session.taskGraph.create(
      [
        { id: "build", title: "Build" },
        { id: "test", title: "Test", dependsOn: ["build"] },
      ],
      { title: "Release" },
    );
    assert.equal(created.type, "task-graph.created");
    const graph = created.payload.graph;
    assert.ok(graph !== null);
    assert.deepEqual(graph.order, ["build", "test"]);
    assert.equal(graph.title, "Release");

    const added = await session.taskGraph.addNode({ id: "ship", title: "Ship", dependsOn: ["test"] });
    assert.equal(added.type, "task-graph.node.added");
    assert.equal(added.payload.node.id, "ship");
    const badDep = await refused(session.taskGraph.addNode({ id: "x", title: "X", dependsOn: ["nope"] }));
    assert.equal(badDep.code, "INVALID_DEPENDENCY");

    const first = await session.taskGraph.advance();
    assert.equal(first.type, "task-graph.advanced");
    assert.equal(first.payload.graph.nodes.build?.status, "ready");
    assert.equal(first.payload.graph.nodes.test?.status, "pending");

    const events = session.events();
    for (const id of ["build", "test", "ship"]) {
      const done = await session.taskGraph.updateNode(id, { status: "completed", result: { ok: id } });
      assert.equal(done.type, "task-graph.node.completed");
      assert.equal(done.payload.node.id, id);
      assert.equal(done.payload.node.status, "completed");
      if (id !== "ship") await session.taskGraph.advance();
      else {
        // The last node ends the graph: `task-graph.completed` follows on the same request.
        const seen = await readUntil(events, (e: KeelEvent) => e.type === "task-graph.completed");
        const completed = seen[seen.length - 1];
        assert.equal(completed.requestId, done.requestId);
        assert.equal(completed.type === "task-graph.completed" && completed.payload.graph?.status, "completed");
      }
    }
    const final = await session.taskGraph.state();
    assert.equal(final.payload.graph?.status, "completed");
    assert.deepEqual(final.payload.graph?.nodes.ship?.result, { ok: "ship" });

    const missing = await refused(session.taskGraph.updateNode("nope", { status: "failed" }));
    assert.equal(missing.code, "GRAPH_NOT_FOUND");
    await bridge.shutdown();
  });

  it("lists sub-agents and background tasks, and the runtime's status", async (t) => {
    const dirs = sandbox(t);
    const bridge = await startBridge(t, dirs, "hello.json");
    const session = await bridge.startSession();

    const agents = await session.subAgents.list();
    assert.equal(agents.type, "sub-agent.list");
    assert.deepEqual([agents.payload.active, agents.payload.recent], [[], []]);
    assert.equal((await refused(session.subAgents.get("sub_nope"))).code, "SUB_AGENT_NOT_FOUND");

    const tasks = await session.background.list();
    assert.equal(tasks.type, "background.list");
    assert.deepEqual(tasks.payload.tasks, []);
    assert.equal((await refused(session.background.get("bg_nope"))).code, "BACKGROUND_TASK_NOT_FOUND");
    assert.equal((await refused(session.background.history("bg_nope"))).code, "BACKGROUND_TASK_NOT_FOUND");
    assert.equal((await refused(session.background.stop("bg_nope"))).code, "BACKGROUND_TASK_NOT_FOUND");

    const other = await bridge.startSession();
    const status = await bridge.harnessStatus();
    assert.equal(status.type, "harness.status");
    assert.equal(status.sessionId, null);
    assert.deepEqual(status.payload.sessions.map((s) => s.sessionId).sort(), [session.id, other.id].sort());
    assert.deepEqual(status.payload.backgroundTasks, []);
    assert.deepEqual(status.payload.subAgents, []);
    await bridge.shutdown();
  });
});

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { describe, it } from "node:test";

import { EVENT_TYPES, KeelError, type KeelBridge, type KeelEvent } from "../src";
import { keelBinary, sandbox, scripted, startBridge } from "./support";

const FIELDS = ["version", "sessionId", "requestId", "eventId", "type", "timestamp", "source", "sequence", "payload"];
const SOURCES = ["runtime", "tool", "bridge", "host", "renderer", "desktop-main", "cli-runtime"];

/** Resolves with the first event of the bridge that matches. */
function nextEvent(bridge: KeelBridge, match: (e: KeelEvent) => boolean): Promise<KeelEvent> {
  return new Promise((resolve) => {
    const listener = (e: KeelEvent) => {
      if (match(e)) {
        bridge.off("event", listener);
        resolve(e);
      }
    };
    bridge.on("event", listener);
  });
}

describe("the wire", { timeout: 30_000 }, () => {
  it("every stdout line of a real session is one envelope with the documented fields", async (t) => {
    const dirs = sandbox(t);
    const child = spawn(keelBinary(), ["bridge", "--workspace", dirs.workspace, "--model", scripted("electron-write.json")], {
      env: { ...process.env, KEEL_HOME: dirs.home },
      stdio: ["pipe", "pipe", "pipe"],
    });
    t.after(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    });
    const chunks: Buffer[] = [];
    let pending = "";
    let sessionId: string | null = null;
    const send = (obj: object) => child.stdin.write(JSON.stringify({ version: "1.0", ...obj }) + "\n");
    child.stderr.resume();
    child.stdout.on("data", (chunk: Buffer) => {
      chunks.push(chunk);
      pending += chunk.toString("latin1");
      let i: number;
      while ((i = pending.indexOf("\n")) !== -1) {
        const e = JSON.parse(Buffer.from(pending.slice(0, i), "latin1").toString("utf8"));
        pending = pending.slice(i + 1);
        if (e.type === "runtime.ready") send({ type: "session.start", requestId: "w-start", payload: {} });
        if (e.type === "session.started") {
          sessionId = e.payload.sessionId;
          child.stdin.write("not a command at all\n");
          send({ type: "request.send", requestId: "w-send", sessionId, payload: { message: "Write the notes, ünïcödé" } });
        }
        if (e.type === "approval.requested") {
          send({ type: "approval.respond", requestId: "w-approve", sessionId, payload: { approvalId: e.payload.approvalId, decision: "allow_once" } });
        }
        if (e.type === "session.completed") send({ type: "session.state", requestId: "w-state", sessionId, payload: {} });
        if (e.type === "session.state") send({ type: "runtime.shutdown", requestId: "w-stop", payload: {} });
      }
    });
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
      child.on("close", (c, s) => resolve([c, s])),
    );
    assert.equal(code, 0);
    assert.equal(signal, null);

    const out = Buffer.concat(chunks).toString("utf8");
    assert.ok(out.endsWith("\n"), "stdout ends with a newline");
    const lines = out.slice(0, -1).split("\n");
    const envelopes = lines.map((line, i) => {
      let v: unknown;
      assert.doesNotThrow(() => (v = JSON.parse(line)), `line ${i + 1} is JSON`);
      return v as Record<string, unknown>;
    });
    const next = new Map<string, number>();
    const eventIds = new Set<string>();
    for (const [i, e] of envelopes.entries()) {
      const where = `line ${i + 1} (${String(e.type)})`;
      const keys = Object.keys(e);
      assert.deepEqual(keys.slice(0, FIELDS.length), FIELDS, `${where}: fields in order`);
      assert.ok(keys.length === FIELDS.length || (keys.length === FIELDS.length + 1 && keys[FIELDS.length] === "meta"), `${where}: only meta may follow`);
      assert.equal(e.version, "1.0", where);
      assert.ok(e.sessionId === null || (typeof e.sessionId === "string" && e.sessionId !== ""), where);
      assert.ok(typeof e.requestId === "string" && e.requestId !== "", where);
      assert.ok(typeof e.eventId === "string" && !eventIds.has(e.eventId), `${where}: unique eventId`);
      eventIds.add(e.eventId as string);
      assert.ok((EVENT_TYPES as readonly string[]).includes(e.type as string), `${where}: known type`);
      assert.ok(Number.isSafeInteger(e.timestamp) && (e.timestamp as number) > 0, `${where}: timestamp`);
      assert.ok(SOURCES.includes(e.source as string), `${where}: source`);
      assert.ok(typeof e.payload === "object" && e.payload !== null && !Array.isArray(e.payload), `${where}: payload`);
      if ("meta" in e) assert.ok(typeof e.meta === "object" && e.meta !== null && !Array.isArray(e.meta), `${where}: meta`);
      const want = next.get(e.requestId as string) ?? 1;
      assert.equal(e.sequence, want, `${where}: sequence of ${String(e.requestId)}`);
      next.set(e.requestId as string, want + 1);
    }
    const types = envelopes.map((e) => e.type);
    assert.equal(types[0], "runtime.ready");
    assert.equal(types[types.length - 1], "runtime.stopped");
    assert.equal(envelopes[0].sessionId, null);

    const by = (rid: string) => envelopes.filter((e) => e.requestId === rid || (e.meta as { replyTo?: string } | undefined)?.replyTo === rid);
    assert.deepEqual(by("w-start").map((e) => e.type), ["session.started"]);
    assert.equal(by("w-send")[0].type, "request.accepted");
    assert.equal(by("w-send").at(-1)?.type, "session.completed");
    const approve = by("w-approve");
    assert.deepEqual(approve.map((e) => e.type), ["approval.granted"]);
    assert.equal(approve[0].requestId, "w-send");
    assert.deepEqual(by("w-state").map((e) => e.type), ["session.state"]);
    const bad = envelopes.filter((e) => e.type === "error");
    assert.equal(bad.length, 1);
    assert.equal((bad[0].payload as { code: string }).code, "REQUEST_INVALID");
    assert.equal(bad[0].sessionId, null);
    assert.ok(envelopes.some((e) => e.type === "session.closed" && e.sessionId === sessionId));
    const accepted = envelopes.find((e) => e.type === "request.accepted");
    assert.equal((accepted?.payload as { message: string }).message, "Write the notes, ünïcödé");
  });

  it("answers bad input with REQUEST_INVALID and goes on answering", async (t) => {
    const dirs = sandbox(t);
    const bridge = await startBridge(t, dirs, "electron-write.json");

    // A line that is not JSON: answered with a runtime-minted requestId.
    const garbage = nextEvent(bridge, (e) => e.type === "error");
    bridge.writeLine("{ this is not json");
    const g = await garbage;
    assert.equal(g.type === "error" && g.payload.code, "REQUEST_INVALID");
    assert.equal(g.sessionId, null);

    // Broken JSON with a readable requestId: the error carries it.
    const truncated = nextEvent(bridge, (e) => e.requestId === "bad-json-1");
    bridge.writeLine('{"version":"1.0","type":"session.list","requestId":"bad-json-1","payload":{');
    const tr = await truncated;
    assert.equal(tr.type, "error");
    assert.equal(tr.type === "error" && tr.payload.code, "REQUEST_INVALID");

    // Well-formed JSON that is not a valid command: send() rejects with the code.
    await assert.rejects(bridge.send("no.such.command" as "session.list", {}), (err: unknown) => {
      assert.ok(err instanceof KeelError);
      assert.equal(err.code, "REQUEST_INVALID");
      return true;
    });
    const session = await bridge.startSession();
    await assert.rejects(session.send("session.set_mode", { mode: "sideways" as "ask" }), (err: unknown) => {
      assert.ok(err instanceof KeelError);
      assert.equal(err.code, "REQUEST_INVALID");
      return true;
    });
    await assert.rejects(session.sendMessage("   "), (err: unknown) => {
      assert.ok(err instanceof KeelError);
      assert.equal(err.code, "REQUEST_INVALID");
      assert.equal(err.eventType, "request.rejected");
      return true;
    });
    await assert.rejects(bridge.send("session.state", {}, "sess_does_not_exist"), (err: unknown) => {
      assert.ok(err instanceof KeelError);
      assert.equal(err.code, "SESSION_NOT_FOUND");
      return true;
    });

    // Still answering.
    const sessions = await bridge.listSessions();
    assert.deepEqual(sessions.map((s) => s.sessionId), [session.id]);
    const exit = await bridge.shutdown();
    assert.equal(exit.abnormal, false);
  });
});

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it, type TestContext } from "node:test";

import WebSocket from "ws";

import {
  ConnectionRefusedError,
  KeelError,
  connectWebSocket,
  type KeelBridge,
  type KeelEvent,
  type WebSocketOptions,
} from "../src";
import { endOf, keelBinary, readUntil, sandbox, scripted, tempDir } from "./support";

interface Remote {
  url: string;
  pid: number;
  home: string;
}

/** Starts `keel serve --listen ws://127.0.0.1:0` and reads the URL it listens on. */
async function startRemote(t: TestContext, dirs: { workspace: string; home: string }, model: string): Promise<Remote> {
  const socket = join(tempDir(t, "run"), "keel.sock");
  const child = spawn(
    keelBinary(),
    ["serve", "--socket", socket, "--listen", "ws://127.0.0.1:0", "--workspace", dirs.workspace, "--model", model],
    { env: { ...process.env, KEEL_HOME: dirs.home, KEEL_MODEL: "", KEEL_SOCKET: "" }, stdio: ["ignore", "ignore", "pipe"] },
  );
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
  });
  let seen = "";
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`keel serve did not listen: ${seen}`)), 20_000);
    child.stderr?.on("data", (b: Buffer) => {
      seen += b.toString();
      const m = /remote clients on (ws:\/\/\S+)/.exec(seen);
      if (m !== null) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.on("exit", () => reject(new Error(`keel serve exited: ${seen}`)));
  });
  return { url, pid: child.pid!, home: dirs.home };
}

function token(home: string, ...args: string[]): string {
  const r = spawnSync(keelBinary(), ["serve", "token", ...args], { env: { ...process.env, KEEL_HOME: home }, encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.trim();
}

async function connect(t: TestContext, url: string, secret: string, options?: WebSocketOptions): Promise<KeelBridge> {
  const c = await connectWebSocket(url, secret, options);
  t.after(() => c.kill());
  return c;
}

function forbidden(required: string): (e: unknown) => boolean {
  return (e) => e instanceof KeelError && e.code === "ROLE_FORBIDDEN" && e.details.required === required;
}

describe("the daemon over WebSocket", { timeout: 90_000 }, () => {
  it("in Node, each role does what it may: a controller prompts, an approver approves, an observer watches", async (t) => {
    const dirs = sandbox(t);
    const remote = await startRemote(t, dirs, scripted("electron-write.json"));
    const controller = await connect(t, remote.url, token(remote.home, "create", "--role", "controller"));
    const approver = await connect(t, remote.url, token(remote.home, "create", "--role", "approver"));
    const observer = await connect(t, remote.url, token(remote.home, "create", "--role", "observer"));
    assert.equal(controller.viaWebSocket, true);
    assert.equal(controller.pid, remote.pid, "the daemon's pid, from runtime.ready");

    const session = await controller.startSession({ title: "remote" });
    const { session: asApprover } = await approver.watch(session.id);
    const { session: asObserver } = await observer.watch(session.id);
    const events = [session.events(), asApprover.events(), asObserver.events()];
    await assert.rejects(asObserver.sendMessage("may I?"), forbidden("controller"));
    await assert.rejects(asApprover.sendMessage("may I?"), forbidden("controller"));

    const run = await session.sendMessage("Write the notes");
    const asked = await Promise.all(events.map((e) => readUntil(e, (x) => x.type === "approval.requested")));
    const request = asked[2]!.at(-1) as Extract<KeelEvent, { type: "approval.requested" }>;
    await assert.rejects(observer.approve(request.payload.approvalId), forbidden("approver"));
    const granted = await approver.approve(request.payload.approvalId);
    assert.equal(granted.type, "approval.granted");
    assert.equal((await run.done).type, "session.completed");
    const rest = await Promise.all(events.map((e) => readUntil(e, endOf(run.requestId))));
    const ids = (i: number) =>
      [...asked[i]!, ...rest[i]!].filter((e) => e.requestId === run.requestId).map((e) => e.eventId);
    assert.deepEqual(ids(1), ids(0));
    assert.deepEqual(ids(2), ids(0));
    const sessions = await observer.listSessions();
    assert.ok(sessions.some((s) => s.sessionId === session.id));
    const exit = await observer.shutdown();
    assert.equal(exit.reason, "disconnect");
    assert.equal(exit.abnormal, false);
  });

  it("in a browser, the token goes in a first auth message", async (t) => {
    const dirs = sandbox(t);
    const remote = await startRemote(t, dirs, scripted("hello.json"));
    const secret = token(remote.home, "create", "--role", "observer");
    // What a page has: a global WebSocket that takes a URL and nothing else.
    class BrowserWebSocket extends WebSocket {
      constructor(url: string) {
        super(url);
      }
    }
    const g = globalThis as { WebSocket?: unknown };
    const before = g.WebSocket;
    g.WebSocket = BrowserWebSocket;
    t.after(() => {
      g.WebSocket = before;
    });
    const page = await connect(t, remote.url, secret);
    assert.equal(page.viaWebSocket, true);
    assert.ok(Array.isArray(await page.listSessions()));
    await assert.rejects(page.startSession(), forbidden("controller"));
    await assert.rejects(
      connectWebSocket(remote.url, `${secret.slice(0, -1)}${secret.endsWith("0") ? "1" : "0"}`),
      (e: unknown) => e instanceof ConnectionRefusedError && e.reason === "token_unknown" && e.closeCode === 4401,
    );
    // Where the `ws` package is there too (Node 22 has a global WebSocket), a header still works.
    const node = await connect(t, remote.url, secret, { auth: "header" });
    assert.ok(Array.isArray(await node.listSessions()));
  });

  it("a wrong, revoked or cross-origin connection is refused with the daemon's reason", async (t) => {
    const dirs = sandbox(t);
    writeFileSync(join(dirs.home, "config.toml"), '[serve]\nallowedOrigins = ["https://app.example"]\n');
    const remote = await startRemote(t, dirs, scripted("hello.json"));
    const secret = token(remote.home, "create", "--role", "observer", "--name", "tablet");
    const refusedWith = (reason: string, status: number) => (e: unknown) =>
      e instanceof ConnectionRefusedError && e.reason === reason && e.status === status;
    await assert.rejects(connectWebSocket(remote.url, "keel_00"), refusedWith("token_unknown", 401));
    await assert.rejects(
      connectWebSocket(remote.url, secret, { origin: "https://evil.example" }),
      refusedWith("origin_refused", 403),
    );
    const fromApp = await connect(t, remote.url, secret, { origin: "https://app.example" });
    assert.ok(Array.isArray(await fromApp.listSessions()));
    // Revoked while connected: the connection ends, saying why; a new one is refused.
    token(remote.home, "revoke", "tablet");
    const exit = await fromApp.closed;
    assert.equal(exit.reason, "token_revoked");
    assert.equal(exit.abnormal, true);
    await assert.rejects(connectWebSocket(remote.url, secret), refusedWith("token_revoked", 401));
    await assert.rejects(
      connectWebSocket(remote.url, secret, { auth: "message" }),
      (e: unknown) => e instanceof ConnectionRefusedError && e.reason === "token_revoked" && e.closeCode === 4401,
    );
  });
});

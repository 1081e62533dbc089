// Drives `keel acp` through the official ACP TypeScript client library and checks
// every line the agent writes against the library's own zod schemas.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import assert from "node:assert/strict";
import { after } from "node:test";

import * as acp from "@agentclientprotocol/sdk";

const here = path.dirname(fileURLToPath(import.meta.url));
export const repo = path.resolve(here, "../../..");
export const scripts = path.join(repo, "tests", "data", "scripts");

// The library's generated zod schemas (used by the library itself to parse messages).
const require = createRequire(import.meta.url);
const sdkEntry = require.resolve("@agentclientprotocol/sdk");
export const z = await import(
  pathToFileURL(path.join(path.dirname(sdkEntry), "schema", "zod.gen.js")).href
);

const responseSchemas = {
  initialize: z.zInitializeResponse,
  "session/new": z.zNewSessionResponse,
  "session/load": z.zLoadSessionResponse,
  "session/resume": z.zResumeSessionResponse,
  "session/list": z.zListSessionsResponse,
  "session/close": z.zCloseSessionResponse,
  "session/delete": z.zDeleteSessionResponse,
  "session/set_config_option": z.zSetSessionConfigOptionResponse,
  "session/set_mode": z.zSetSessionModeResponse,
  "session/prompt": z.zPromptResponse,
};

/** A temporary directory removed by `cleanup`. */
export function tempDir(prefix) {
  return mkdtempSync(path.join(tmpdir(), prefix));
}

/** Every field of `sent` is in `parsed` with the same value (nothing was dropped). */
export function assertKept(sent, parsed, where) {
  if (sent === null || typeof sent !== "object") {
    assert.deepEqual(parsed, sent, `${where}: value changed by the schema`);
    return;
  }
  assert.ok(parsed !== null && typeof parsed === "object", `${where}: dropped by the schema`);
  if (Array.isArray(sent)) {
    assert.ok(Array.isArray(parsed), `${where}: not an array after parsing`);
    assert.equal(parsed.length, sent.length, `${where}: array items dropped`);
    sent.forEach((v, i) => assertKept(v, parsed[i], `${where}[${i}]`));
    return;
  }
  for (const [k, v] of Object.entries(sent)) {
    if (k === "rawInput" || k === "rawOutput" || k === "_meta" || k === "data") {
      assert.deepEqual(parsed[k], v, `${where}.${k}: changed by the schema`);
      continue;
    }
    assert.ok(k in parsed, `${where}.${k}: unknown to the schema (dropped)`);
    assertKept(v, parsed[k], `${where}.${k}`);
  }
}

function check(schema, value, where) {
  const r = schema.safeParse(value);
  assert.ok(r.success, `${where} does not match the ACP schema: ${r.success ? "" : r.error.message}\n${JSON.stringify(value)}`);
  assertKept(value, r.data, where);
}

/** Every agent started by this file's tests: killed when they end, so a failed
 * assertion that skips `finish()` cannot leave an agent that keeps the run alive. */
const agents = new Set();
after(() => {
  for (const child of agents) child.kill("SIGKILL");
});

/**
 * Starts `keel acp` with a client connection. `onPermission(params)` answers
 * permission requests (default: the test fails).
 */
export async function startAgent({ model, workspace, home, args = [], env = {}, onPermission } = {}) {
  // HOME is the store's parent, so the user's own ~/.agents/skills stays out.
  const bin = process.env.KEEL_BIN;
  assert.ok(bin, "KEEL_BIN is set by `npm test`");
  const child = spawn(bin, ["acp", "--workspace", workspace, "--model", model, ...args], {
    env: { ...process.env, KEEL_HOME: home, HOME: path.dirname(home), KEEL_MODEL: "", ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  agents.add(child);
  child.on("exit", () => agents.delete(child));
  const raw = [];
  const sent = new Map();
  let stderr = "";
  child.stderr.on("data", (d) => {
    stderr += d.toString("utf8");
  });
  let partial = "";
  const input = new ReadableStream({
    start(controller) {
      child.stdout.on("data", (chunk) => {
        partial += chunk.toString("utf8");
        let i;
        while ((i = partial.indexOf("\n")) >= 0) {
          raw.push(partial.slice(0, i));
          partial = partial.slice(i + 1);
        }
        controller.enqueue(new Uint8Array(chunk));
      });
      child.stdout.on("end", () => controller.close());
    },
  });
  const encoder = new TextEncoder();
  const output = new WritableStream({
    write(chunk) {
      const text = typeof chunk === "string" ? chunk : new TextDecoder().decode(chunk);
      for (const line of text.split("\n")) {
        if (!line.trim()) continue;
        const msg = JSON.parse(line);
        if (msg.method && msg.id !== undefined) sent.set(msg.id, msg.method);
      }
      return new Promise((resolve, reject) =>
        child.stdin.write(typeof chunk === "string" ? encoder.encode(chunk) : chunk, (e) => (e ? reject(e) : resolve())),
      );
    },
  });
  const updates = [];
  const permissions = [];
  const forbidden = [];
  const client = {
    async sessionUpdate(params) {
      updates.push(params);
    },
    async requestPermission(params) {
      permissions.push(params);
      if (!onPermission) throw new Error("unexpected permission request");
      return onPermission(params);
    },
    async writeTextFile(params) {
      forbidden.push(["fs/write_text_file", params]);
      throw new Error("keel must not use the client's file system");
    },
    async readTextFile(params) {
      forbidden.push(["fs/read_text_file", params]);
      throw new Error("keel must not use the client's file system");
    },
    async createTerminal(params) {
      forbidden.push(["terminal/create", params]);
      throw new Error("keel must not use the client's terminals");
    },
  };
  const conn = new acp.ClientSideConnection(() => client, acp.ndJsonStream(output, input));
  const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));

  return {
    conn,
    child,
    raw,
    updates,
    permissions,
    forbidden,
    stderr: () => stderr,
    exited,
    async initialize() {
      return conn.initialize({
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
        clientInfo: { name: "keel-acp-tests", version: "0.0.0" },
      });
    },
    /** Updates of one session, unwrapped. */
    updatesOf(sessionId) {
      return updates.filter((u) => u.sessionId === sessionId).map((u) => u.update);
    },
    /** Closes stdin, waits for exit (hang guard: the test timeout) and validates stdout. */
    async finish() {
      child.stdin.end();
      const code = await exited;
      assert.equal(code, 0, `keel acp exited with ${code}; stderr:\n${stderr}`);
      validateStdout(raw, sent);
      assert.deepEqual(forbidden, [], "keel sent fs/* or terminal/* requests");
      return code;
    },
  };
}

/** Every stdout line is one JSON-RPC 2.0 message that fits the ACP schema. */
export function validateStdout(raw, sent) {
  assert.ok(raw.length > 0, "the agent wrote nothing");
  raw.forEach((line, n) => {
    const where = `stdout line ${n + 1}`;
    let msg;
    assert.doesNotThrow(() => {
      msg = JSON.parse(line);
    }, `${where} is not JSON: ${line}`);
    assert.equal(msg.jsonrpc, "2.0", `${where} is not JSON-RPC 2.0`);
    if (typeof msg.method === "string") {
      if (msg.id !== undefined) {
        assert.equal(msg.method, "session/request_permission", `${where}: unexpected request ${msg.method}`);
        check(z.zRequestPermissionRequest, msg.params, `${where} (${msg.method})`);
      } else {
        assert.equal(msg.method, "session/update", `${where}: unexpected notification ${msg.method}`);
        check(z.zSessionNotification, msg.params, `${where} (session/update ${msg.params?.update?.sessionUpdate})`);
        // The slash commands of a session come from no event of its log.
        if (msg.params.update.sessionUpdate === "available_commands_update") return;
        const meta = msg.params.update._meta?.keel;
        assert.ok(meta && meta.eventId && meta.requestId && Number.isInteger(meta.sequence), `${where}: _meta.keel lacks eventId/requestId/sequence`);
      }
      return;
    }
    assert.ok("id" in msg, `${where}: neither request, notification nor response`);
    if (msg.error) {
      check(z.zError, msg.error, `${where} (error)`);
      return;
    }
    const method = sent.get(msg.id);
    assert.ok(method, `${where}: response to an id the client never used: ${msg.id}`);
    const schema = responseSchemas[method];
    if (schema) check(schema, msg.result, `${where} (${method} result)`);
  });
}

/** Polls `fn` until it returns a truthy value (the test's timeout is the hang guard). */
export async function until(fn, what) {
  for (;;) {
    const v = await fn();
    if (v) return v;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A workspace with a README and a store directory. */
export function fixture() {
  const root = tempDir("keel-acp-");
  const workspace = path.join(root, "ws");
  const home = path.join(root, "home");
  require("node:fs").mkdirSync(workspace);
  require("node:fs").mkdirSync(home);
  writeFileSync(path.join(workspace, "README.md"), "# Demo\n\nHello, world.\n");
  return {
    root,
    workspace,
    home,
    cleanup: () => rmSync(root, { recursive: true, force: true }),
  };
}

export function scripted(name) {
  return `scripted:${path.join(scripts, name)}`;
}

export function text(prompt) {
  return [{ type: "text", text: prompt }];
}

import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { TestContext } from "node:test";

import { KeelBridge, type KeelEvent, type SpawnOptions } from "../src";

/** The package root (tests run from `dist/test`). */
export const PACKAGE_ROOT = resolve(__dirname, "..", "..");
/** The repository root. */
export const REPO_ROOT = resolve(PACKAGE_ROOT, "..", "..");

/**
 * The `keel` binary: `KEEL_BIN`, else cargo's debug build (under `CARGO_TARGET_DIR`
 * when set, else `<repo>/target`).
 */
export function keelBinary(): string {
  if (process.env.KEEL_BIN) return process.env.KEEL_BIN;
  const exe = process.platform === "win32" ? "keel.exe" : "keel";
  const targetDir = process.env.CARGO_TARGET_DIR
    ? resolve(REPO_ROOT, process.env.CARGO_TARGET_DIR)
    : join(REPO_ROOT, "target");
  return join(targetDir, "debug", exe);
}

/** A scripted model for one of the scripts in `tests/data/scripts/`. */
export function scripted(name: string): string {
  return `scripted:${join(REPO_ROOT, "tests", "data", "scripts", name)}`;
}

/** A test fixture's path. */
export function fixture(name: string): string {
  return join(PACKAGE_ROOT, "test", "fixtures", name);
}

/** A fresh temporary directory, removed after the test. */
export function tempDir(t: TestContext, prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), `keel-electron-${prefix}-`));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A workspace and a KEEL_HOME of its own. */
export function sandbox(t: TestContext): { workspace: string; home: string } {
  return { workspace: tempDir(t, "ws"), home: tempDir(t, "home") };
}

/** Spawns the real bridge for a test; it is killed after the test if still running. */
export async function startBridge(
  t: TestContext,
  dirs: { workspace: string; home: string },
  script: string,
  extra: Partial<SpawnOptions> = {},
): Promise<KeelBridge> {
  const bridge = await KeelBridge.spawn({
    binary: keelBinary(),
    workspace: dirs.workspace,
    model: scripted(script),
    ...extra,
    env: { KEEL_HOME: dirs.home, KEEL_MODEL: "", ...extra.env },
  });
  t.after(() => bridge.kill());
  return bridge;
}

/** Registers a spawned bridge for killing after the test. */
export function killAfter(t: TestContext, bridge: KeelBridge): KeelBridge {
  t.after(() => bridge.kill());
  return bridge;
}

/**
 * Reads events until one matches; returns every event read, the match last. Fails if
 * the stream ends first.
 */
export async function readUntil(
  events: AsyncIterator<KeelEvent>,
  match: (e: KeelEvent) => boolean,
): Promise<KeelEvent[]> {
  const seen: KeelEvent[] = [];
  for (;;) {
    const r = await events.next();
    if (r.done) {
      throw new Error(`the stream ended before the awaited event; saw ${seen.map((e) => e.type).join(", ")}`);
    }
    seen.push(r.value);
    if (match(r.value)) return seen;
  }
}

/** The terminal event of a request. */
export function endOf(requestId: string): (e: KeelEvent) => boolean {
  return (e) =>
    e.requestId === requestId && (e.type === "session.completed" || e.type === "session.interrupted");
}

/** A running `keel serve` daemon for a test: its socket and process. */
export interface Daemon {
  socket: string;
  child: ChildProcess;
  stderr: string[];
}

/**
 * Starts `keel serve` on a socket in a private temporary directory and waits until it
 * answers; it is stopped (SIGTERM) after the test if still running.
 */
export async function startDaemon(
  t: TestContext,
  dirs: { workspace: string; home: string },
  model: string,
): Promise<Daemon> {
  const socket = join(tempDir(t, "run"), "keel.sock");
  const child = spawn(
    keelBinary(),
    ["serve", "--socket", socket, "--workspace", dirs.workspace, "--model", model, "--idle-exit", "0"],
    { env: { ...process.env, KEEL_HOME: dirs.home, KEEL_MODEL: "", KEEL_SOCKET: "" }, stdio: ["ignore", "ignore", "pipe"] },
  );
  const stderr: string[] = [];
  child.stderr?.on("data", (b: Buffer) => stderr.push(b.toString()));
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
  });
  const started = Date.now();
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = createConnection({ path: socket });
      s.on("connect", () => {
        s.destroy();
        resolve(true);
      });
      s.on("error", () => resolve(false));
    });
    if (ok) return { socket, child, stderr };
    if (child.exitCode !== null) throw new Error(`keel serve exited: ${stderr.join("")}`);
    if (Date.now() - started > 20_000) throw new Error(`keel serve did not answer: ${stderr.join("")}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Connects a client to a daemon; the connection is dropped after the test. */
export async function connectClient(t: TestContext, daemon: Daemon): Promise<KeelBridge> {
  const client = await KeelBridge.connect({ socket: daemon.socket });
  t.after(() => client.kill());
  return client;
}

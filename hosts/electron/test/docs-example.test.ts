import assert from "node:assert/strict";
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it, type TestContext } from "node:test";
import ts from "typescript";

import type { KeelEvent } from "../src";
import { PACKAGE_ROOT, REPO_ROOT, keelBinary, sandbox, scripted, tempDir } from "./support";

/** The ```ts blocks of the "Electron integration" section of docs/protocol.md, by file name. */
function exampleSources(): { main: string; preload: string } {
  const doc = readFileSync(join(REPO_ROOT, "docs", "protocol.md"), "utf8");
  const start = doc.indexOf("\n## Electron integration\n");
  assert.ok(start >= 0, "docs/protocol.md has a section `## Electron integration`");
  const end = doc.indexOf("\n## ", start + 1);
  const section = doc.slice(start, end === -1 ? undefined : end);
  const blocks = [...section.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
  const named = (file: string) => {
    const b = blocks.filter((s) => s.startsWith(`// ${file}:`));
    assert.equal(b.length, 1, `one block starts with "// ${file}:"`);
    return b[0];
  };
  return { main: named("main.ts"), preload: named("preload.ts") };
}

/**
 * Writes the example next to a stand-in `electron` module and this package as
 * `keel-electron`, type-checks it strictly and compiles it. Each call makes a fresh
 * directory, so every run loads fresh modules.
 */
function buildExample(t: TestContext): string {
  const dir = tempDir(t, "app");
  const { main, preload } = exampleSources();
  writeFileSync(join(dir, "main.ts"), main);
  writeFileSync(join(dir, "preload.ts"), preload);
  const electron = join(dir, "node_modules", "electron");
  mkdirSync(electron, { recursive: true });
  for (const f of ["index.js", "index.d.ts", "package.json"]) {
    copyFileSync(join(PACKAGE_ROOT, "test", "fixtures", "electron", f), join(electron, f));
  }
  const client = join(dir, "node_modules", "keel-electron");
  mkdirSync(client, { recursive: true });
  const dist = join(PACKAGE_ROOT, "dist", "src", "index");
  writeFileSync(join(client, "index.js"), `module.exports = require(${JSON.stringify(dist)});\n`);
  writeFileSync(join(client, "index.d.ts"), `export * from ${JSON.stringify(dist)};\n`);
  writeFileSync(join(client, "package.json"), '{"name":"keel-electron","main":"index.js","types":"index.d.ts"}\n');

  const options: ts.CompilerOptions = {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.CommonJS,
    moduleResolution: ts.ModuleResolutionKind.Node10,
    strict: true,
    esModuleInterop: true,
    skipLibCheck: true,
    types: ["node"],
    typeRoots: [join(PACKAGE_ROOT, "node_modules", "@types")],
    outDir: dir,
  };
  const program = ts.createProgram([join(dir, "main.ts"), join(dir, "preload.ts")], options);
  const emitted = program.emit();
  const diagnostics = [...ts.getPreEmitDiagnostics(program), ...emitted.diagnostics];
  const text = ts.formatDiagnostics(diagnostics, {
    getCanonicalFileName: (f) => f,
    getCurrentDirectory: () => dir,
    getNewLine: () => "\n",
  });
  assert.equal(text, "", "the example type-checks");
  return dir;
}

interface Control {
  sent: Array<{ channel: string; args: unknown[] }>;
  dialogs: Array<{ title?: string; buttons: string[] }>;
  errorBoxes: unknown[];
  paths: Record<string, string>;
  quitted: Promise<void>;
  quit(): Promise<void>;
  start(): Promise<void>;
  invoke(channel: string, ...args: unknown[]): Promise<unknown>;
  waitForSent(channel: string, match?: (...args: unknown[]) => boolean): Promise<unknown[]>;
}

/** Loads the compiled example as Electron would, with the stand-in module. */
async function launch(dir: string, userData: string): Promise<Control> {
  const control = (require(join(dir, "node_modules", "electron")) as { __control: Control }).__control;
  control.paths.userData = userData;
  control.paths.documents = userData;
  require(join(dir, "main.js"));
  await control.start();
  return control;
}

const isEvent =
  (type: string, requestId?: string) =>
  (...args: unknown[]): boolean => {
    const e = args[0] as KeelEvent;
    return e.type === type && (requestId === undefined || e.requestId === requestId);
  };

// A hang guard, not a speed check: type-checking the example takes long with the cores busy.
describe("the Electron example of docs/protocol.md", { timeout: 180_000 }, () => {
  it("type-checks, runs a session with an approval dialog, quits cleanly and resumes on restart", async (t) => {
    const dirs = sandbox(t);
    const userData = tempDir(t, "userdata");
    const saved = { ...process.env };
    t.after(() => {
      process.env = saved;
    });
    process.env.KEEL_BIN = keelBinary();
    process.env.KEEL_WORKSPACE = dirs.workspace;
    process.env.KEEL_HOME = dirs.home;
    process.env.KEEL_MODEL = scripted("electron-write.json");

    // First run.
    const first = await launch(buildExample(t), userData);
    const [ready] = await first.waitForSent("keel:ready");
    assert.equal((ready as { protocolVersion: string }).protocolVersion, "1.0");
    const [started] = (await first.waitForSent("keel:event", isEvent("session.started"))) as KeelEvent[];
    const sessionId = started.sessionId;
    assert.ok(sessionId);

    const sent = (await first.invoke("keel:send-message", "Write the notes")) as { requestId: string; answer: KeelEvent };
    assert.equal(sent.answer.type, "request.accepted");
    const [done] = (await first.waitForSent("keel:event", isEvent("session.completed", sent.requestId))) as KeelEvent[];
    assert.equal(done.type === "session.completed" && done.payload.finalText, "Done: NOTES.md is written.");
    assert.equal(first.dialogs.length, 1);
    assert.equal(first.dialogs[0].title, "write_file needs approval");
    assert.equal(first.dialogs[0].buttons[0], "Allow once");
    assert.ok(existsSync(join(dirs.workspace, "NOTES.md")), "the approved write happened");
    await first.waitForSent("keel:event", isEvent("approval.granted", sent.requestId));

    const idle = (await first.invoke("keel:interrupt")) as KeelEvent;
    assert.equal(idle.type === "session.interrupted" && idle.payload.wasRunning, false);

    // Quit: before-quit shuts the bridge down, then the app quits.
    await first.quit();
    const [exit] = (await first.waitForSent("keel:exit")) as Array<{ abnormal: boolean }>;
    assert.equal(exit.abnormal, false);
    const closed = first.sent
      .filter((s) => s.channel === "keel:event")
      .map((s) => s.args[0] as KeelEvent)
      .filter((e) => e.sessionId === sessionId)
      .at(-1);
    assert.equal(closed?.type, "session.closed");
    const remembered = JSON.parse(readFileSync(join(userData, "keel-session.json"), "utf8"));
    assert.deepEqual(remembered, { sessionId, cursor: { requestId: closed?.requestId, sequence: closed?.sequence } });
    assert.deepEqual(first.errorBoxes, []);

    // Restart: the same session comes back from the saved cursor, nothing to replay.
    const second = await launch(buildExample(t), userData);
    const [resumed] = (await second.waitForSent("keel:event", isEvent("session.resumed"))) as KeelEvent[];
    assert.equal(resumed.sessionId, sessionId);
    assert.equal(resumed.type === "session.resumed" && resumed.payload.replayed, 0);
    const state = (await second.invoke("keel:state")) as { session: { sessionId: string }; messageCount: number };
    assert.equal(state.session.sessionId, sessionId);
    assert.ok(state.messageCount > 0);
    await second.quit();
    assert.deepEqual(second.errorBoxes, []);
  });
});

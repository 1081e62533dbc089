/**
 * The client of the Keel runtime: spawns `keel bridge` and speaks the JSON-lines
 * protocol on its stdio, or connects to the `keel serve` daemon's socket and speaks the
 * same protocol there; correlates commands with their answers and hands each
 * session's events to the host.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { randomBytes } from "node:crypto";
import { EventEmitter } from "node:events";
import { createConnection } from "node:net";

import {
  EVENT_TYPES,
  PROTOCOL_VERSION,
  type KnownApprovalDecision as ApprovalDecision,
  type CommandPayloads,
  type CommandTypeName,
  type KeelEvent,
  type KnownPermissionMode as PermissionMode,
  type RequestSend,
  type RuntimeReady,
  type SessionStart,
  type UnknownEvent,
} from "./generated/protocol";
import { BridgeExitError, KeelTimeoutError, VersionMismatchError, type ExitInfo } from "./errors";
import { LineRing, LineSplitter } from "./framing";
import { processLink, socketLink, type Link } from "./transport";
import { SequenceTracker, type SequenceGap } from "./sequence";
import {
  KeelSession,
  RunTracker,
  type EventCursor,
  type EventOf,
  type MessageRun,
  type ReplayCollector,
  type ResumeResult,
  type SendOptions,
} from "./session";
import {
  ANSWERS,
  ERROR_ANSWERS,
  deferred,
  encodeCommand,
  envelopeProblem,
  errorFrom,
  protocolMajor,
} from "./wire";

export { KeelSession, protocolMajor };
export type { EventCursor, EventOf, MessageRun, ResumeResult, SendOptions };

const KNOWN_EVENTS: ReadonlySet<string> = new Set(EVENT_TYPES);

/** How long after the process exits its output may still be read. */
const EXIT_GRACE_MS = 2_000;

/** The reasons of `runtime.stopped` that end a daemon connection abnormally. */
const CUT_OFF: ReadonlySet<string> = new Set(["too_slow", "token_revoked", "token_expired", "message_too_big"]);

/** How many stderr lines are kept for exit reports. */
export const STDERR_TAIL_LINES = 8;

/** Options every client has, whichever way it reaches the runtime. */
export interface ClientOptions {
  /** How long to wait for `runtime.ready` (default 20 000 ms). */
  readyTimeoutMs?: number;
  /** How long a command may wait for its answer (default 60 000 ms; 0 waits forever). */
  commandTimeoutMs?: number;
  /** How long {@link KeelBridge.shutdown} waits before killing (default 5 000 ms). */
  shutdownTimeoutMs?: number;
  /**
   * Events kept per session while no iterator of {@link KeelSession.events} is open
   * (default 10 000; the oldest are dropped beyond it; 0 keeps none).
   */
  backlogLimit?: number;
}

/** Options of {@link KeelBridge.connect}. */
export interface ConnectOptions extends ClientOptions {
  /** The daemon's socket (`keel serve --socket`). */
  socket: string;
}

/** The result of {@link KeelBridge.watch}. */
export interface WatchResult {
  session: KeelSession;
  watched: EventOf<"session.watched">;
  /** The events replayed after the cursor and the pending prompts (`meta.replay: true`), in order. */
  replayed: KeelEvent[];
}

/** Options of {@link KeelBridge.spawn}. */
export interface SpawnOptions extends ClientOptions {
  /** The `keel` executable. */
  binary: string;
  /** The workspace (`--workspace`). */
  workspace: string;
  /** The model, `provider:model` (`--model`). */
  model?: string;
  /** The permission mode of new sessions (`--permission-mode`). */
  permissionMode?: PermissionMode;
  /** A session to resume as soon as the bridge is up (`--session-id`). */
  sessionId?: string;
  /** Extra environment variables, on top of this process's environment. */
  env?: NodeJS.ProcessEnv;
  /** Extra command-line arguments, after the ones above. */
  args?: string[];
  /** The working directory of the process. */
  cwd?: string;
}

/** A line on stdout that is not an envelope. */
export interface InvalidLine {
  line: string;
  reason: string;
}

/** The events of a {@link KeelBridge}. */
export interface KeelBridgeEvents {
  /** Every known event, from every session and from the runtime itself. */
  event: [event: KeelEvent];
  /** An event of a type this client does not know (it is otherwise ignored). */
  unknown: [event: UnknownEvent];
  /** A request stream broke the sequence rule. */
  gap: [gap: SequenceGap];
  /** A stdout line that is not an envelope. */
  invalidLine: [invalid: InvalidLine];
  /** One line the process wrote to stderr. */
  stderr: [line: string];
  /** The process ended. */
  exit: [info: ExitInfo];
}


interface PendingCommand {
  type: CommandTypeName;
  requestId: string;
  answers: readonly string[] | null;
  resolve: (e: KeelEvent) => void;
  reject: (e: unknown) => void;
  timer: NodeJS.Timeout | null;
}

/**
 * A running `keel bridge` process, or a connection to the `keel serve` daemon.
 *
 * ```ts
 * const bridge = await KeelBridge.spawn({ binary, workspace }); // or KeelBridge.connect({ socket })
 * const session = await bridge.startSession();
 * const events = session.events();
 * const run = await session.sendMessage("Summarise the README");
 * for await (const ev of events) { … if (ev.requestId === run.requestId && ev.type === "session.completed") break; }
 * await bridge.shutdown();
 * ```
 */
export class KeelBridge extends EventEmitter<KeelBridgeEvents> {
  /** The payload of `runtime.ready`. */
  ready!: RuntimeReady;
  /** How the process ended, once it has. */
  exitInfo: ExitInfo | null = null;

  private readonly link: Link;
  private readonly options: ClientOptions;
  private readonly stdout = new LineSplitter();
  private readonly stderr = new LineRing(STDERR_TAIL_LINES);
  private readonly tracker = new SequenceTracker();
  private readonly pending = new Map<string, PendingCommand>();
  private readonly runs = new Map<string, RunTracker>();
  private readonly sessions = new Map<string, KeelSession>();
  private readonly replays = new Map<string, ReplayCollector>();
  /** `approval:<id>`, `plan:<id>`, `ask:<id>` of pending decisions → their session. */
  private readonly waiting = new Map<string, string>();
  private readonly readyWait = deferred<RuntimeReady>();
  private readonly exited = deferred<ExitInfo>();
  private readonly idPrefix = `host_${randomBytes(6).toString("hex")}`;
  private counter = 0;
  private sawReady = false;
  private sawStopped = false;
  private shutdownSent = false;
  private spawnError: Error | null = null;
  /** The reason of `runtime.stopped`, once received. */
  private stoppedReason: string | null = null;
  /** Lines received after `runtime.ready`, held until `spawn()` has returned. */
  private held: string[] | null = null;

  private constructor(link: Link, options: ClientOptions) {
    super();
    this.link = link;
    this.options = options;
    this.readyWait.promise.catch(() => undefined);
  }

  private onOutput(chunk: Buffer): void {
    for (const line of this.stdout.push(chunk)) this.take(line);
  }

  private onOutputEnd(): void {
    const rest = this.stdout.flush();
    if (rest !== null) this.take(rest);
  }

  private static fromProcess(child: ChildProcessWithoutNullStreams, options: SpawnOptions): KeelBridge {
    const bridge = new KeelBridge(processLink(child), options);
    child.stdout.on("data", (chunk: Buffer) => bridge.onOutput(chunk));
    child.stdout.on("end", () => bridge.onOutputEnd());
    child.stderr.on("data", (chunk: Buffer) => {
      for (const line of bridge.stderr.push(chunk)) bridge.emit("stderr", line);
    });
    child.stderr.on("end", () => {
      const rest = bridge.stderr.end();
      if (rest !== null) bridge.emit("stderr", rest);
    });
    // Writing to a process that has gone away fails with EPIPE; the exit handler reports it.
    child.stdin.on("error", () => undefined);
    child.on("error", (err) => {
      bridge.spawnError = err;
      // A process that never started emits no `close` on some platforms.
      if (child.pid === undefined) bridge.onClose(null, null);
    });
    child.on("close", (code, signal) => bridge.onClose(code, signal));
    // `close` waits for stdout and stderr to end; a grandchild that inherited them
    // could hold them open, so the exit counts after a grace period regardless.
    child.on("exit", (code, signal) => {
      setTimeout(() => bridge.onClose(code, signal), EXIT_GRACE_MS).unref();
    });
    return bridge;
  }

  /** Waits for `runtime.ready` and checks the version; see {@link spawn}. */
  private static async start(bridge: KeelBridge, options: ClientOptions): Promise<KeelBridge> {
    const timeoutMs = options.readyTimeoutMs ?? 20_000;
    let timer: NodeJS.Timeout | null = null;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new KeelTimeoutError(`no runtime.ready within ${timeoutMs} ms`)),
        timeoutMs,
      );
    });
    let ready: RuntimeReady;
    try {
      ready = await Promise.race([bridge.readyWait.promise, timeout]);
    } catch (err) {
      await bridge.kill();
      throw err;
    } finally {
      if (timer !== null) clearTimeout(timer);
    }
    if (protocolMajor(ready.protocolVersion) !== protocolMajor(PROTOCOL_VERSION)) {
      bridge.release();
      await bridge.shutdown();
      throw new VersionMismatchError(PROTOCOL_VERSION, ready.protocolVersion);
    }
    // Whatever followed `runtime.ready` in the same read is delivered on the next turn
    // of the event loop, after the caller has attached its listeners.
    setImmediate(() => bridge.release());
    return bridge;
  }

  /**
   * Starts `keel bridge`, waits for `runtime.ready` and checks the protocol version.
   * Rejects with a {@link VersionMismatchError} (after shutting the process down) when
   * the runtime speaks another major version, with a {@link BridgeExitError} when the
   * process ends first, and with a {@link KeelTimeoutError} when it stays silent.
   */
  static async spawn(options: SpawnOptions): Promise<KeelBridge> {
    const args = ["bridge", "--workspace", options.workspace];
    if (options.model !== undefined) args.push("--model", options.model);
    if (options.permissionMode !== undefined) args.push("--permission-mode", options.permissionMode);
    if (options.sessionId !== undefined) args.push("--session-id", options.sessionId);
    if (options.args) args.push(...options.args);
    const child = spawn(options.binary, args, {
      cwd: options.cwd,
      env: { ...process.env, ...options.env },
      stdio: ["pipe", "pipe", "pipe"],
      windowsHide: true,
    });
    return KeelBridge.start(KeelBridge.fromProcess(child, options), options);
  }

  /**
   * Connects to the `keel serve` daemon's socket (the same protocol as a bridge, one
   * runtime shared by several clients), waits for `runtime.ready` and checks the
   * protocol version. Rejects with the socket's error when nothing listens (`ENOENT`,
   * `ECONNREFUSED`), and as {@link spawn} otherwise. On this connection the client
   * gets the answers to its own commands and the events of the sessions it started,
   * resumed or {@link watch}es. {@link shutdown} ends the connection only; the daemon
   * and its sessions go on.
   */
  static async connect(options: ConnectOptions): Promise<KeelBridge> {
    const socket = createConnection({ path: options.socket });
    const bridge = new KeelBridge(socketLink(socket), options);
    socket.on("data", (chunk: Buffer) => bridge.onOutput(chunk));
    socket.on("end", () => bridge.onOutputEnd());
    socket.on("error", (err) => {
      if (!bridge.sawReady) bridge.spawnError = err;
    });
    socket.on("close", () => bridge.onClose(null, null));
    return KeelBridge.start(bridge, options);
  }

  /** The process id: of the bridge process, or of the daemon (from `runtime.ready`). */
  get pid(): number | undefined {
    return this.link.kind === "process" ? this.link.pid : this.ready?.pid;
  }

  /** Whether this client is connected to the daemon's socket (else it owns a bridge process). */
  get viaSocket(): boolean {
    return this.link.kind === "socket";
  }

  /** Whether this client is connected to the daemon's remote listener ({@link connectWebSocket}). */
  get viaWebSocket(): boolean {
    return this.link.kind === "websocket";
  }

  /**
   * A client on a link of another transport (`websocket.ts`): returns it with the calls
   * that feed it one envelope (`line`), say that it closed (`closed`), or that it could
   * not be opened (`failed`), and `ready`, which waits for `runtime.ready` as
   * {@link connect} does.
   * @internal
   */
  static overLink(
    link: Link,
    options: ClientOptions,
  ): {
    bridge: KeelBridge;
    line: (line: string) => void;
    closed: () => void;
    failed: (err: Error) => void;
    ready: () => Promise<KeelBridge>;
  } {
    const bridge = new KeelBridge(link, options);
    return {
      bridge,
      line: (line) => bridge.take(line),
      closed: () => bridge.onClose(null, null),
      failed: (err) => {
        if (!bridge.sawReady) bridge.spawnError = err;
      },
      ready: () => KeelBridge.start(bridge, options),
    };
  }

  /** Resolves when the process has ended (never rejects). */
  get closed(): Promise<ExitInfo> {
    return this.exited.promise;
  }

  /** A fresh requestId, unique to this client. */
  newRequestId(): string {
    this.counter += 1;
    return `${this.idPrefix}_${this.counter}`;
  }

  /**
   * Sends a command and resolves with its answer: the event with the command's
   * requestId, or the event of a running request whose `meta.replyTo` is the
   * command's requestId (docs/protocol.md, rule 4). An `error` or `request.rejected`
   * answer rejects with a {@link KeelError}.
   */
  send<K extends CommandTypeName>(
    type: K,
    payload: CommandPayloads[K],
    sessionId?: string | null,
    options: SendOptions = {},
  ): Promise<KeelEvent> {
    if (this.exitInfo !== null) {
      return Promise.reject(new BridgeExitError(this.exitInfo, "the Keel bridge has exited"));
    }
    const requestId = options.requestId ?? this.newRequestId();
    if (this.pending.has(requestId)) {
      return Promise.reject(new Error(`requestId ${requestId} is already pending`));
    }
    const cmd: Record<string, unknown> = { version: PROTOCOL_VERSION, type, requestId };
    if (sessionId !== undefined && sessionId !== null) cmd.sessionId = sessionId;
    cmd.payload = payload;
    return new Promise<KeelEvent>((resolve, reject) => {
      const timeoutMs = options.timeoutMs ?? this.options.commandTimeoutMs ?? 60_000;
      const entry: PendingCommand = {
        type,
        requestId,
        answers: ANSWERS[type] ?? null,
        resolve,
        reject,
        timer: null,
      };
      if (timeoutMs > 0) {
        entry.timer = setTimeout(() => {
          this.pending.delete(requestId);
          reject(new KeelTimeoutError(`no answer to ${type} (${requestId}) within ${timeoutMs} ms`));
        }, timeoutMs);
      }
      this.pending.set(requestId, entry);
      if (type === "runtime.shutdown") this.shutdownSent = true;
      this.link.write(`${encodeCommand(cmd)}\n`);
    });
  }

  /**
   * Writes one raw line to the bridge's stdin, as is (a newline is added). For tools
   * and tests; commands should go through {@link send}.
   */
  writeLine(line: string): void {
    this.link.write(`${line}\n`);
  }

  /** The session object for `sessionId` (made on first use; no command is sent). */
  session(sessionId: string): KeelSession {
    let s = this.sessions.get(sessionId);
    if (s === undefined) {
      s = new KeelSession(this, sessionId, this.options.backlogLimit ?? 10_000);
      this.sessions.set(sessionId, s);
    }
    return s;
  }

  /** Starts a session. */
  async startSession(payload: SessionStart = {}, options?: SendOptions): Promise<KeelSession> {
    const ev = (await this.send("session.start", payload, null, options)) as EventOf<"session.started">;
    return this.session(ev.payload.sessionId);
  }

  /** Open sessions, background tasks and running sub-agents of the whole runtime. */
  async harnessStatus(): Promise<EventOf<"harness.status">> {
    return (await this.send("harness.status", {})) as EventOf<"harness.status">;
  }

  /** Lists the stored and open sessions. */
  async listSessions(): Promise<EventOf<"session.list">["payload"]["sessions"]> {
    const ev = (await this.send("session.list", {})) as EventOf<"session.list">;
    return ev.payload.sessions;
  }

  /**
   * Resumes a stored session. With a cursor (usually {@link KeelSession.cursor} saved
   * before a restart), the events logged after it are replayed; this resolves once
   * all of them arrived.
   */
  async resume(sessionId: string, cursor?: EventCursor | null, options?: SendOptions): Promise<ResumeResult> {
    const r = await this.withReplay("session.resume", sessionId, cursor, options);
    return { session: r.session, resumed: r.answer as EventOf<"session.resumed">, replayed: r.replayed };
  }

  /**
   * Watches a session that is open in the runtime (over the daemon's socket: streams
   * its events to this connection). With a cursor, the events logged after it are
   * replayed first, then the live stream follows with no gap and no repeat; the
   * prompts of the running request still waiting for an answer are replayed too.
   * Resolves once every replayed event arrived.
   */
  async watch(sessionId: string, cursor?: EventCursor | null, options?: SendOptions): Promise<WatchResult> {
    const r = await this.withReplay("session.watch", sessionId, cursor, options);
    return { session: r.session, watched: r.answer as EventOf<"session.watched">, replayed: r.replayed };
  }

  /** Stops watching a session (its events no longer reach this connection). */
  async unwatch(sessionId: string, options?: SendOptions): Promise<EventOf<"session.unwatched">> {
    return (await this.send("session.unwatch", { sessionId }, null, options)) as EventOf<"session.unwatched">;
  }

  /** `session.resume` or `session.watch`, collecting the replayed events that follow the answer. */
  private async withReplay(
    type: "session.resume" | "session.watch",
    sessionId: string,
    cursor: EventCursor | null | undefined,
    options: SendOptions | undefined,
  ): Promise<{ session: KeelSession; answer: KeelEvent; replayed: KeelEvent[] }> {
    const session = this.session(sessionId);
    const collector: ReplayCollector = { events: [], want: null, complete: deferred<void>() };
    collector.complete.promise.catch(() => undefined);
    this.replays.set(sessionId, collector);
    const afterSequence =
      cursor === undefined || cursor === null
        ? null
        : { requestId: cursor.requestId, sequence: Number(cursor.sequence) };
    if (afterSequence !== null) this.tracker.seed(afterSequence.requestId, Number(afterSequence.sequence));
    const payload = afterSequence === null ? { sessionId } : { sessionId, afterSequence };
    try {
      const answer =
        type === "session.resume"
          ? await this.send("session.resume", payload, null, options)
          : await this.send("session.watch", payload, null, options);
      collector.want =
        answer.type === "session.resumed" || answer.type === "session.watched" ? answer.payload.replayed : 0;
      if (collector.events.length >= collector.want) collector.complete.resolve();
      await collector.complete.promise;
      return { session, answer, replayed: collector.events };
    } finally {
      if (this.replays.get(sessionId) === collector) this.replays.delete(sessionId);
    }
  }

  /**
   * Sends a user message to a session; resolves once the runtime accepted, queued or
   * steered it (see {@link MessageRun}).
   */
  async sendMessage(
    sessionId: string,
    message: string,
    options: Omit<RequestSend, "message"> = {},
    sendOptions: SendOptions = {},
  ): Promise<MessageRun> {
    const requestId = sendOptions.requestId ?? this.newRequestId();
    const run = new RunTracker(requestId);
    this.runs.set(requestId, run);
    let answer: KeelEvent;
    try {
      answer = await this.send("request.send", { ...options, message }, sessionId, { ...sendOptions, requestId });
    } catch (err) {
      this.runs.delete(requestId);
      throw err;
    }
    run.answer = answer;
    if (answer.type === "request.steered") {
      this.runs.delete(requestId);
      const target = this.runs.get(answer.requestId);
      run.done = target !== undefined ? target.done : Promise.resolve(answer);
    }
    return run;
  }

  /** Answers an approval of any session (`allow_once` by default). */
  approve(approvalId: string, decision: ApprovalDecision = "allow_once"): Promise<KeelEvent> {
    return this.send("approval.respond", { approvalId, decision }, this.owner("approval", approvalId));
  }

  /** Approves a plan of any session; `mode` is the mode to continue in. */
  approvePlan(planId: string, mode?: PermissionMode): Promise<KeelEvent> {
    return this.send("plan.approve", mode === undefined ? { planId } : { planId, mode }, this.owner("plan", planId));
  }

  /** Rejects a plan of any session. */
  rejectPlan(planId: string, feedback?: string): Promise<KeelEvent> {
    return this.send(
      "plan.reject",
      feedback === undefined ? { planId } : { planId, feedback },
      this.owner("plan", planId),
    );
  }

  /** Answers a question of any session. */
  answer(askId: string, answer: string): Promise<KeelEvent> {
    return this.send("ask.respond", { askId, answer }, this.owner("ask", askId));
  }

  /** Interrupts the running request of a session. */
  interrupt(sessionId: string): Promise<KeelEvent> {
    return this.send("request.interrupt", {}, sessionId);
  }

  /** Changes a session's permission mode. */
  setMode(sessionId: string, mode: PermissionMode): Promise<KeelEvent> {
    return this.send("session.set_mode", { mode }, sessionId);
  }

  /** Closes a session. */
  close(sessionId: string): Promise<KeelEvent> {
    return this.send("session.close", {}, sessionId);
  }

  /**
   * The session that asked approval, plan or question `id`. An id this client never
   * saw goes out without a session, and the runtime refuses it.
   */
  private owner(kind: "approval" | "plan" | "ask", id: string): string | null {
    return this.waiting.get(`${kind}:${id}`) ?? null;
  }

  /**
   * Stops the runtime: sends `runtime.shutdown` (the runtime closes its sessions and
   * answers `runtime.stopped`), waits for the process to exit, and kills it if it has
   * not within the shutdown timeout. Resolves with how it ended. Over the daemon's
   * socket only this connection ends (`runtime.stopped {reason: "disconnect"}`); the
   * daemon and its sessions, running requests included, go on.
   */
  async shutdown(timeoutMs?: number): Promise<ExitInfo> {
    if (this.exitInfo !== null) return this.exitInfo;
    if (!this.shutdownSent) {
      this.send("runtime.shutdown", {}, null, { timeoutMs: 0 }).catch(() => undefined);
      this.link.end();
    }
    const limit = timeoutMs ?? this.options.shutdownTimeoutMs ?? 5_000;
    let timer: NodeJS.Timeout | null = null;
    const timedOut = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), limit);
    });
    const first = await Promise.race([this.exited.promise, timedOut]);
    if (timer !== null) clearTimeout(timer);
    if (first === "timeout") return this.kill();
    return first;
  }

  /**
   * Kills the process (SIGKILL by default), or drops the connection to the daemon, and
   * resolves when it has ended.
   */
  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<ExitInfo> {
    if (this.exitInfo === null) {
      try {
        this.link.kill(signal);
      } catch {
        // Already gone: `close` follows.
      }
    }
    return this.exited.promise;
  }

  // ---------------------------------------------------------------------------------

  private take(line: string): void {
    if (this.held !== null) this.held.push(line);
    else this.onLine(line);
  }

  private release(): void {
    const held = this.held;
    this.held = null;
    if (held !== null) for (const line of held) this.onLine(line);
  }

  private onLine(line: string): void {
    if (line.trim() === "") return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (err) {
      this.invalid(line, `not JSON: ${(err as Error).message}`);
      return;
    }
    const problem = envelopeProblem(value);
    if (problem !== null) {
      this.invalid(line, problem);
      return;
    }
    const env = value as KeelEvent | UnknownEvent;
    if (!this.sawReady) {
      if (env.type !== "runtime.ready") {
        this.invalid(line, "the first line is not runtime.ready");
        this.readyWait.reject(new Error(`the bridge's first event is ${env.type}, not runtime.ready`));
        return;
      }
      this.sawReady = true;
      this.ready = (env as EventOf<"runtime.ready">).payload;
      this.held = [];
    }
    const gap = this.tracker.check(env);
    if (gap !== null) this.emit("gap", gap);
    if (!KNOWN_EVENTS.has(env.type)) {
      // Forward compatibility: newer runtimes may send types this client does not know.
      this.emit("unknown", env as UnknownEvent);
      return;
    }
    this.dispatch(env as KeelEvent);
  }

  private invalid(line: string, reason: string): void {
    this.emit("invalidLine", { line, reason });
  }

  private dispatch(env: KeelEvent): void {
    if (env.type === "runtime.ready") this.readyWait.resolve(env.payload);
    if (env.type === "runtime.stopped") {
      this.sawStopped = true;
      this.stoppedReason = env.payload.reason;
    }

    if (env.sessionId !== null) {
      // Replayed prompts count too: a watch replays those still waiting for an answer.
      this.trackWaiting(env, env.sessionId);
      const session = this.session(env.sessionId);
      session.deliver(env);
      const replay = this.replays.get(env.sessionId);
      if (replay !== undefined && env.meta?.replay === true) {
        replay.events.push(env);
        if (replay.want !== null && replay.events.length >= replay.want) replay.complete.resolve();
      }
    }

    const run = this.runs.get(env.requestId);
    if (run !== undefined && run.add(env)) this.runs.delete(env.requestId);

    this.resolveAnswer(env);
    this.emit("event", env);
  }

  private trackWaiting(env: KeelEvent, sessionId: string): void {
    switch (env.type) {
      case "approval.requested":
        this.waiting.set(`approval:${env.payload.approvalId}`, sessionId);
        break;
      case "approval.granted":
      case "approval.denied":
      case "approval.expired":
        this.waiting.delete(`approval:${env.payload.approvalId}`);
        break;
      case "plan.approval_required":
        this.waiting.set(`plan:${env.payload.planId}`, sessionId);
        break;
      case "plan.approved":
      case "plan.rejected":
        this.waiting.delete(`plan:${env.payload.planId}`);
        break;
      case "ask.requested":
        this.waiting.set(`ask:${env.payload.askId}`, sessionId);
        break;
      case "ask.answered":
      case "ask.expired":
        this.waiting.delete(`ask:${env.payload.askId}`);
        break;
      case "session.closed":
        for (const [key, owner] of this.waiting) if (owner === sessionId) this.waiting.delete(key);
        break;
      default:
        break;
    }
  }

  private resolveAnswer(env: KeelEvent): void {
    // Replayed events answer nothing: their commands belong to an earlier process.
    if (env.meta?.replay === true) return;
    let target = this.pending.get(env.requestId);
    if (target === undefined && env.meta?.replyTo) target = this.pending.get(env.meta.replyTo);
    if (target === undefined && env.type === "runtime.stopped") {
      // `runtime.stopped` carries a requestId minted by the bridge, not the one of
      // the `runtime.shutdown` command, so it is matched by type.
      for (const p of this.pending.values()) {
        if (p.type === "runtime.shutdown") {
          target = p;
          break;
        }
      }
    }
    if (target === undefined) return;
    const isError = ERROR_ANSWERS.has(env.type) && env.requestId === target.requestId;
    if (!isError && target.answers !== null && !target.answers.includes(env.type)) return;
    this.pending.delete(target.requestId);
    if (target.timer !== null) clearTimeout(target.timer);
    if (isError) target.reject(errorFrom(env));
    else target.resolve(env);
  }

  private onClose(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.exitInfo !== null) return;
    const rest = this.stdout.flush();
    if (rest !== null) this.take(rest);
    this.release();
    const tailLine = this.stderr.end();
    if (tailLine !== null) this.emit("stderr", tailLine);
    const socket = this.link.kind !== "process";
    const info: ExitInfo = {
      code,
      signal,
      stopped: this.sawStopped,
      stderrTail: this.stderr.tail(),
      // A connection ends cleanly with `runtime.stopped`, unless the daemon cut it off.
      abnormal: socket
        ? !this.sawStopped || CUT_OFF.has(this.stoppedReason ?? "")
        : code !== 0 || signal !== null || !this.sawStopped,
      ...(socket ? { reason: this.stoppedReason } : {}),
    };
    this.exitInfo = info;
    const never = socket ? !this.sawReady : this.link.pid === undefined;
    const what = socket ? "the connection to the Keel daemon" : "the Keel bridge";
    const error =
      this.spawnError !== null && never
        ? this.spawnError
        : new BridgeExitError(info, info.abnormal ? `${what} ended abnormally` : `${what} stopped`);
    this.readyWait.reject(error);
    for (const p of this.pending.values()) {
      if (p.timer !== null) clearTimeout(p.timer);
      p.reject(error);
    }
    this.pending.clear();
    for (const r of this.runs.values()) r.finished.reject(error);
    this.runs.clear();
    for (const c of this.replays.values()) c.complete.reject(error);
    for (const s of this.sessions.values()) s.finish(info);
    this.exited.resolve(info);
    this.emit("exit", info);
  }
}

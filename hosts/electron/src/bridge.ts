/**
 * The client of `keel bridge`: spawns the process, speaks the JSON-lines protocol on
 * its stdio, correlates commands with their answers and hands each session's events
 * to the host.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { randomBytes } from "node:crypto";
import { EventEmitter } from "node:events";

import {
  EVENT_TYPES,
  PROTOCOL_VERSION,
  type ApprovalDecision,
  type CommandPayloads,
  type CommandTypeName,
  type ErrorPayload,
  type EventTypeName,
  type KeelEvent,
  type PermissionMode,
  type RequestSend,
  type RuntimeReady,
  type SessionStart,
  type UnknownEvent,
} from "./generated/protocol";
import { BackgroundCalls, PatchCalls, ReviewCalls, SubAgentCalls, TaskGraphCalls } from "./extensions";
import { BridgeExitError, KeelError, KeelTimeoutError, VersionMismatchError, type ExitInfo } from "./errors";
import { HostTools, type HostToolDefinition, type HostToolHandler } from "./hostTools";
import { LineRing, LineSplitter } from "./framing";
import { AsyncQueue } from "./queue";
import { SequenceTracker, type SequenceGap } from "./sequence";

/** The event of type `K`, with its payload narrowed. */
export type EventOf<K extends EventTypeName> = Extract<KeelEvent, { type: K }>;

/** A position in a session's log: the last event a host has. */
export interface EventCursor {
  requestId: string;
  sequence: number | bigint;
}

/** How long after the process exits its output may still be read. */
const EXIT_GRACE_MS = 2_000;

/** How many stderr lines are kept for exit reports. */
export const STDERR_TAIL_LINES = 8;

/** Options of {@link KeelBridge.spawn}. */
export interface SpawnOptions {
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

/** Options of one command. */
export interface SendOptions {
  /** The requestId to use (default: a fresh one). Must be unique. */
  requestId?: string;
  /** Overrides the bridge's command timeout (0 waits forever). */
  timeoutMs?: number;
}

/** A user message that the runtime accepted, queued or steered. */
export interface MessageRun {
  /** The request's id. */
  requestId: string;
  /** The answer: `request.accepted`, `request.queued` or `request.steered`. */
  answer: KeelEvent;
  /**
   * Resolves with the request's terminal event: `session.completed`,
   * `session.interrupted` or `request.cancelled` (for a steered message, that of the
   * request it joined). Rejects if the bridge exits first.
   */
  done: Promise<KeelEvent>;
  /** Every event of the request received so far, in order. */
  readonly events: readonly KeelEvent[];
}

/** The result of {@link KeelBridge.resume}. */
export interface ResumeResult {
  session: KeelSession;
  resumed: EventOf<"session.resumed">;
  /** The events replayed after the cursor (`meta.replay: true`), in order. */
  replayed: KeelEvent[];
}

/**
 * The event types that answer each command (docs/protocol.md, "Commands"). An `error`
 * or `request.rejected` with the command's requestId answers any command. A command
 * missing here is answered by the first event correlated with it.
 */
const ANSWERS: Partial<Record<CommandTypeName, readonly string[]>> = {
  "runtime.shutdown": ["runtime.stopped"],
  "session.start": ["session.started"],
  "session.resume": ["session.resumed"],
  "session.close": ["session.closed"],
  "session.list": ["session.list"],
  "session.state": ["session.state"],
  "session.set_mode": ["session.mode_changed"],
  "session.set_model": ["session.model_changed"],
  "session.set_rules": ["session.rules_updated"],
  "session.load_history": ["session.history_loaded"],
  "request.send": ["request.accepted", "request.queued", "request.steered"],
  "request.interrupt": ["session.interrupted"],
  "request.cancel_queued": ["request.cancelled"],
  "approval.respond": ["approval.granted", "approval.denied"],
  "plan.approve": ["plan.approved"],
  "plan.reject": ["plan.rejected"],
  "ask.respond": ["ask.answered"],
  "context.compact": ["context.compaction.started"],
  "review.enter": ["review.requested"],
  "review.submit": ["review.updated"],
  "review.resolve": ["review.resolved"],
  "review.status": ["review.state"],
  "patch.propose": ["patch.proposed"],
  "patch.apply": ["patch.applied"],
  "patch.reject": ["patch.rejected"],
  "patch.summary": ["patch.summary"],
  "task-graph.create": ["task-graph.created"],
  "task-graph.add-node": ["task-graph.node.added"],
  "task-graph.update-node": ["task-graph.node.updated", "task-graph.node.completed", "task-graph.node.failed"],
  "task-graph.advance": ["task-graph.advanced"],
  "task-graph.state": ["task-graph.state"],
  "sub-agent.list": ["sub-agent.list"],
  "sub-agent.get": ["sub-agent.get"],
  "harness.status": ["harness.status"],
  "background.list": ["background.list"],
  "background.get": ["background.get"],
  "background.history": ["background.history"],
  "background.stop": ["background.stopped"],
  "session.set_host_tools": ["session.host_tools_updated"],
  "host-tool.respond": ["host-tool.responded"],
  "mcp.list": ["mcp.list"],
};

const ERROR_ANSWERS = new Set(["error", "request.rejected"]);
const KNOWN_EVENTS: ReadonlySet<string> = new Set(EVENT_TYPES);

/** The major part of a `MAJOR.MINOR` version. */
export function protocolMajor(version: string): string {
  return String(version).split(".")[0] ?? "";
}

/** Serialises a command; a bigint given by a caller becomes a number. */
function encodeCommand(cmd: object): string {
  return JSON.stringify(cmd, (_k, v: unknown) => (typeof v === "bigint" ? Number(v) : v));
}

function errorFrom(env: KeelEvent): KeelError {
  const p = env.payload as Partial<ErrorPayload>;
  return new KeelError({
    code: p.code ?? "RUNTIME_INTERNAL_ERROR",
    message: p.message ?? "(no message)",
    details: p.details ?? {},
    retryable: p.retryable ?? false,
    eventType: env.type,
    requestId: env.requestId,
  });
}

/** Checks the envelope fields a client relies on; returns why a value is not one. */
function envelopeProblem(v: unknown): string | null {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return "not a JSON object";
  const e = v as Record<string, unknown>;
  if (typeof e.version !== "string") return "`version` is not a string";
  if (!(typeof e.sessionId === "string" || e.sessionId === null)) return "`sessionId` is not a string or null";
  if (typeof e.requestId !== "string" || e.requestId === "") return "`requestId` is not a non-empty string";
  if (typeof e.eventId !== "string") return "`eventId` is not a string";
  if (typeof e.type !== "string") return "`type` is not a string";
  if (typeof e.timestamp !== "number") return "`timestamp` is not a number";
  if (typeof e.source !== "string") return "`source` is not a string";
  if (!Number.isInteger(e.sequence) || (e.sequence as number) < 1) return "`sequence` is not an integer >= 1";
  if (typeof e.payload !== "object" || e.payload === null || Array.isArray(e.payload)) return "`payload` is not an object";
  if (e.meta !== undefined && (typeof e.meta !== "object" || e.meta === null)) return "`meta` is not an object";
  return null;
}

interface Deferred<T> {
  promise: Promise<T>;
  resolve: (v: T) => void;
  reject: (e: unknown) => void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

interface PendingCommand {
  type: CommandTypeName;
  requestId: string;
  answers: readonly string[] | null;
  resolve: (e: KeelEvent) => void;
  reject: (e: unknown) => void;
  timer: NodeJS.Timeout | null;
}

class RunTracker implements MessageRun {
  answer!: KeelEvent;
  readonly events: KeelEvent[] = [];
  readonly finished = deferred<KeelEvent>();
  done: Promise<KeelEvent> = this.finished.promise;

  constructor(readonly requestId: string) {
    // The host may never look at `done`; a failure must not become an unhandled rejection.
    this.finished.promise.catch(() => undefined);
  }

  add(env: KeelEvent): boolean {
    this.events.push(env);
    switch (env.type) {
      case "session.completed":
      case "request.cancelled":
        this.finished.resolve(env);
        return true;
      case "session.interrupted":
        // On a request's own stream, `session.interrupted` always ends that request.
        this.finished.resolve(env);
        return true;
      case "request.rejected":
        this.finished.reject(errorFrom(env));
        return true;
      default:
        return false;
    }
  }
}

interface ReplayCollector {
  events: KeelEvent[];
  want: number | null;
  complete: Deferred<void>;
}

/**
 * One session of a bridge. Session-scoped commands are sent through it; its events
 * are read with {@link events}.
 */
export class KeelSession {
  private readonly iterators = new Set<AsyncQueue<KeelEvent>>();
  private backlog: KeelEvent[] = [];
  private lastCursor: { requestId: string; sequence: number } | null = null;
  private isClosed = false;

  /** Review mode: `review.enter`, `review.submit`, `review.resolve`, `review.status`. */
  readonly review: ReviewCalls;
  /** Patch preview: `patch.propose`, `patch.apply`, `patch.reject`, `patch.summary`. */
  readonly patch: PatchCalls;
  /** The task graph: `task-graph.create`, `add-node`, `update-node`, `advance`, `state`. */
  readonly taskGraph: TaskGraphCalls;
  /** Sub-agents: `sub-agent.list`, `sub-agent.get`. */
  readonly subAgents: SubAgentCalls;
  /** Background tasks: `background.list`, `get`, `history`, `stop`. */
  readonly background: BackgroundCalls;
  /** The tools this host runs for the session (see {@link registerTool}). */
  readonly hostTools: HostTools;

  /** @internal Sessions are made by {@link KeelBridge}. */
  constructor(
    readonly bridge: KeelBridge,
    readonly id: string,
    private readonly backlogLimit: number,
  ) {
    const send = <K extends CommandTypeName>(type: K, payload: CommandPayloads[K], options?: SendOptions) =>
      this.send(type, payload, options);
    this.review = new ReviewCalls(send);
    this.patch = new PatchCalls(send);
    this.taskGraph = new TaskGraphCalls(send);
    this.subAgents = new SubAgentCalls(send);
    this.background = new BackgroundCalls(send);
    this.hostTools = new HostTools(send);
  }

  /** Whether `session.closed` was received (and no resume since). */
  get closed(): boolean {
    return this.isClosed;
  }

  /**
   * The last event of this session received from the runtime, as a resume cursor.
   * Bridge-level events (decode errors) are not part of the session's log and do not
   * move it.
   */
  get cursor(): { requestId: string; sequence: number } | null {
    return this.lastCursor === null ? null : { ...this.lastCursor };
  }

  /**
   * The session's events, in order, from now on, until `session.closed` or the end of
   * the bridge (an abnormal exit throws a {@link BridgeExitError}). Events that came
   * while no iterator was open are given first. Break out of the loop to stop.
   */
  events(): AsyncIterableIterator<KeelEvent> {
    const q: AsyncQueue<KeelEvent> = new AsyncQueue<KeelEvent>(() => this.iterators.delete(q));
    for (const e of this.backlog) q.push(e);
    this.backlog = [];
    const exit = this.bridge.exitInfo;
    if (exit !== null) {
      if (exit.abnormal) q.fail(new BridgeExitError(exit));
      else q.end();
      return q;
    }
    if (this.isClosed) {
      q.end();
      return q;
    }
    this.iterators.add(q);
    return q;
  }

  /** Sends a session command; see {@link KeelBridge.send}. */
  send<K extends CommandTypeName>(type: K, payload: CommandPayloads[K], options?: SendOptions): Promise<KeelEvent> {
    return this.bridge.send(type, payload, this.id, options);
  }

  /** Sends a user message; resolves once the runtime accepted, queued or steered it. */
  sendMessage(message: string, options: Omit<RequestSend, "message"> = {}, sendOptions: SendOptions = {}): Promise<MessageRun> {
    return this.bridge.sendMessage(this.id, message, options, sendOptions);
  }

  /** Answers an approval (`allow_once` by default). */
  approve(approvalId: string, decision: ApprovalDecision = "allow_once"): Promise<KeelEvent> {
    return this.send("approval.respond", { approvalId, decision });
  }

  /** Denies an approval. */
  deny(approvalId: string): Promise<KeelEvent> {
    return this.approve(approvalId, "deny");
  }

  /** Approves a plan; `mode` is the permission mode to continue in (the runtime's default is `ask`). */
  approvePlan(planId: string, mode?: PermissionMode): Promise<KeelEvent> {
    return this.send("plan.approve", mode === undefined ? { planId } : { planId, mode });
  }

  /** Rejects a plan, with optional feedback for the model. */
  rejectPlan(planId: string, feedback?: string): Promise<KeelEvent> {
    return this.send("plan.reject", feedback === undefined ? { planId } : { planId, feedback });
  }

  /** Answers a question of the model. */
  answer(askId: string, answer: string): Promise<KeelEvent> {
    return this.send("ask.respond", { askId, answer });
  }

  /** Interrupts the running request (answered with `session.interrupted`). */
  interrupt(): Promise<KeelEvent> {
    return this.send("request.interrupt", {});
  }

  /** Changes the permission mode. */
  setMode(mode: PermissionMode): Promise<KeelEvent> {
    return this.send("session.set_mode", { mode });
  }

  /** Gets the session's state. */
  state(): Promise<EventOf<"session.state">> {
    return this.send("session.state", {}) as Promise<EventOf<"session.state">>;
  }

  /** Closes the session. */
  close(): Promise<KeelEvent> {
    return this.send("session.close", {});
  }

  /**
   * Registers a tool that this host runs: the model is offered it, and when it calls
   * it (and the gate allows it) `handler` runs with the arguments; its result (or the
   * message of what it throws) goes back to the model. `signal` aborts on an
   * interrupt or when the call times out. Resolves once the runtime took the tool
   * (the session must be idle); rejects with a {@link KeelError} when it refuses it.
   */
  registerTool(definition: HostToolDefinition, handler: HostToolHandler): Promise<void> {
    return this.hostTools.register(definition, handler);
  }

  /** The session's MCP servers: state (`starting`, `ready`, `failed` + reason) and tools. */
  async mcpServers(): Promise<EventOf<"mcp.list">["payload"]["servers"]> {
    const ev = (await this.send("mcp.list", {})) as EventOf<"mcp.list">;
    return ev.payload.servers;
  }

  /** @internal */
  deliver(env: KeelEvent): void {
    this.hostTools.onEvent(env);
    if (env.source !== "bridge" && !this.isClosed) {
      this.lastCursor = { requestId: env.requestId, sequence: env.sequence };
    }
    if (env.type === "session.resumed") this.isClosed = false;
    if (this.iterators.size === 0) {
      if (this.backlogLimit > 0) {
        this.backlog.push(env);
        if (this.backlog.length > this.backlogLimit) this.backlog.shift();
      }
    } else {
      for (const q of this.iterators) q.push(env);
    }
    if (env.type === "session.closed") {
      this.isClosed = true;
      for (const q of [...this.iterators]) q.end();
    }
  }

  /** @internal */
  finish(info: ExitInfo): void {
    for (const q of [...this.iterators]) {
      if (info.abnormal) q.fail(new BridgeExitError(info));
      else q.end();
    }
  }
}

/**
 * A running `keel bridge` process.
 *
 * ```ts
 * const bridge = await KeelBridge.spawn({ binary, workspace });
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

  private readonly child: ChildProcessWithoutNullStreams;
  private readonly options: SpawnOptions;
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
  /** Lines received after `runtime.ready`, held until `spawn()` has returned. */
  private held: string[] | null = null;

  private constructor(child: ChildProcessWithoutNullStreams, options: SpawnOptions) {
    super();
    this.child = child;
    this.options = options;
    this.readyWait.promise.catch(() => undefined);

    child.stdout.on("data", (chunk: Buffer) => {
      for (const line of this.stdout.push(chunk)) this.take(line);
    });
    child.stdout.on("end", () => {
      const rest = this.stdout.flush();
      if (rest !== null) this.take(rest);
    });
    child.stderr.on("data", (chunk: Buffer) => {
      for (const line of this.stderr.push(chunk)) this.emit("stderr", line);
    });
    child.stderr.on("end", () => {
      const rest = this.stderr.end();
      if (rest !== null) this.emit("stderr", rest);
    });
    // Writing to a process that has gone away fails with EPIPE; the exit handler reports it.
    child.stdin.on("error", () => undefined);
    child.on("error", (err) => {
      this.spawnError = err;
      // A process that never started emits no `close` on some platforms.
      if (child.pid === undefined) this.onClose(null, null);
    });
    child.on("close", (code, signal) => this.onClose(code, signal));
    // `close` waits for stdout and stderr to end; a grandchild that inherited them
    // could hold them open, so the exit counts after a grace period regardless.
    child.on("exit", (code, signal) => {
      setTimeout(() => this.onClose(code, signal), EXIT_GRACE_MS).unref();
    });
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
    const bridge = new KeelBridge(child, options);
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
    // of the event loop, after the caller of `spawn()` has attached its listeners.
    setImmediate(() => bridge.release());
    return bridge;
  }

  /** The process id. */
  get pid(): number | undefined {
    return this.child.pid;
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
      this.child.stdin.write(`${encodeCommand(cmd)}\n`);
    });
  }

  /**
   * Writes one raw line to the bridge's stdin, as is (a newline is added). For tools
   * and tests; commands should go through {@link send}.
   */
  writeLine(line: string): void {
    this.child.stdin.write(`${line}\n`);
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
    const session = this.session(sessionId);
    const collector: ReplayCollector = { events: [], want: null, complete: deferred<void>() };
    collector.complete.promise.catch(() => undefined);
    this.replays.set(sessionId, collector);
    const afterSequence =
      cursor === undefined || cursor === null
        ? null
        : { requestId: cursor.requestId, sequence: Number(cursor.sequence) };
    if (afterSequence !== null) this.tracker.seed(afterSequence.requestId, Number(afterSequence.sequence));
    try {
      const resumed = (await this.send(
        "session.resume",
        afterSequence === null ? { sessionId } : { sessionId, afterSequence },
        null,
        options,
      )) as EventOf<"session.resumed">;
      collector.want = resumed.payload.replayed;
      if (collector.events.length >= collector.want) collector.complete.resolve();
      await collector.complete.promise;
      return { session, resumed, replayed: collector.events };
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
   * not within the shutdown timeout. Resolves with how it ended.
   */
  async shutdown(timeoutMs?: number): Promise<ExitInfo> {
    if (this.exitInfo !== null) return this.exitInfo;
    if (!this.shutdownSent) {
      this.send("runtime.shutdown", {}, null, { timeoutMs: 0 }).catch(() => undefined);
      this.child.stdin.end();
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

  /** Kills the process (SIGKILL by default) and resolves when it has ended. */
  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<ExitInfo> {
    if (this.exitInfo === null && this.child.pid !== undefined) {
      try {
        this.child.kill(signal);
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
    if (env.type === "runtime.stopped") this.sawStopped = true;

    if (env.sessionId !== null) {
      if (env.meta?.replay !== true) this.trackWaiting(env, env.sessionId);
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
    const info: ExitInfo = {
      code,
      signal,
      stopped: this.sawStopped,
      stderrTail: this.stderr.tail(),
      abnormal: code !== 0 || signal !== null || !this.sawStopped,
    };
    this.exitInfo = info;
    const error =
      this.spawnError !== null && this.child.pid === undefined
        ? this.spawnError
        : new BridgeExitError(info, info.abnormal ? "the Keel bridge exited abnormally" : "the Keel bridge stopped");
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

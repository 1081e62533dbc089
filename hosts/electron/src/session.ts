/**
 * One session as a client sees it: its commands, its events (an async iterator with a
 * backlog), its cursor, and the tracking of one user message to its end.
 */
import {
  type KnownApprovalDecision as ApprovalDecision,
  type CommandPayloads,
  type CommandTypeName,
  type EventTypeName,
  type KeelEvent,
  type KnownPermissionMode as PermissionMode,
  type RequestSend,
} from "./generated/protocol";
import type { KeelBridge } from "./bridge";
import { BackgroundCalls, PatchCalls, ReviewCalls, SubAgentCalls, TaskGraphCalls } from "./extensions";
import { BridgeExitError, type ExitInfo } from "./errors";
import { HostTools, type HostToolDefinition, type HostToolHandler } from "./hostTools";
import { AsyncQueue } from "./queue";
import { deferred, errorFrom, type Deferred } from "./wire";

/** The event of type `K`, with its payload narrowed. */
export type EventOf<K extends EventTypeName> = Extract<KeelEvent, { type: K }>;

/** A position in a session's log: the last event a host has. */
export interface EventCursor {
  requestId: string;
  sequence: number | bigint;
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

export class RunTracker implements MessageRun {
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

export interface ReplayCollector {
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

  /** The session's checkpoints, oldest first (empty with `disabledReason` when off). */
  async checkpoints(): Promise<EventOf<"checkpoint.list">["payload"]> {
    const ev = (await this.send("checkpoint.list", {})) as EventOf<"checkpoint.list">;
    return ev.payload;
  }

  /**
   * Rewinds files and/or the conversation to just before a request or a tool call
   * (exactly one of `toRequestId`, `toToolCallId`); refused while a request runs.
   */
  async rewind(target: {
    toRequestId?: string;
    toToolCallId?: string;
    files?: boolean;
    conversation?: boolean;
  }): Promise<EventOf<"session.rewound">["payload"]> {
    const ev = (await this.send("session.rewind", target)) as EventOf<"session.rewound">;
    return ev.payload;
  }

  /**
   * Forks the session (up to just before `atRequestId`, default all of it); the answer
   * names the new session (`sessionId`), open in the runtime: resume or watch it to follow it.
   */
  async fork(options: { atRequestId?: string; files?: boolean } = {}): Promise<EventOf<"session.forked">["payload"]> {
    const ev = (await this.send("session.fork", options)) as EventOf<"session.forked">;
    return ev.payload;
  }

  /** Asks a side question (no tools, not kept in the history), also while a request runs. */
  async side(message: string): Promise<string> {
    const ev = (await this.send("request.side", { message })) as EventOf<"side.answered">;
    return ev.payload.text;
  }

  /** @internal */
  deliver(env: KeelEvent): void {
    this.hostTools.onEvent(env);
    if (env.source !== "bridge" && !this.isClosed) {
      this.lastCursor = { requestId: env.requestId, sequence: env.sequence };
    }
    if (env.type === "session.resumed" || env.type === "session.watched") this.isClosed = false;
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

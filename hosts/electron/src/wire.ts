/**
 * The wire rules a client relies on: which events answer which command, what an
 * envelope must look like, and the small helpers around them.
 */
import {
  type CommandTypeName,
  type ErrorPayload,
  type KeelEvent,
} from "./generated/protocol";
import { KeelError } from "./errors";

/**
 * The event types that answer each command (docs/protocol.md, "Commands"). An `error`
 * or `request.rejected` with the command's requestId answers any command. A command
 * missing here is answered by the first event correlated with it.
 */
export const ANSWERS: Partial<Record<CommandTypeName, readonly string[]>> = {
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
  "session.watch": ["session.watched"],
  "session.unwatch": ["session.unwatched"],
  "checkpoint.list": ["checkpoint.list"],
  "session.rewind": ["session.rewound"],
  "session.fork": ["session.forked"],
  "request.side": ["side.answered"],
};

export const ERROR_ANSWERS = new Set(["error", "request.rejected"]);

/** The major part of a `MAJOR.MINOR` version. */
export function protocolMajor(version: string): string {
  return String(version).split(".")[0] ?? "";
}

/** Serialises a command; a bigint given by a caller becomes a number. */
export function encodeCommand(cmd: object): string {
  return JSON.stringify(cmd, (_k, v: unknown) => (typeof v === "bigint" ? Number(v) : v));
}

export function errorFrom(env: KeelEvent): KeelError {
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
export function envelopeProblem(v: unknown): string | null {
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

export interface Deferred<T> {
  promise: Promise<T>;
  resolve: (v: T) => void;
  reject: (e: unknown) => void;
}

export function deferred<T>(): Deferred<T> {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

import type { ErrorCode } from "./generated/protocol";

/** An `error` or `request.rejected` answer from the runtime. */
export class KeelError extends Error {
  override readonly name = "KeelError";
  /** The stable error code (`SESSION_NOT_FOUND`, `REQUEST_INVALID`, …). */
  readonly code: ErrorCode | string;
  /** Structured details from the payload. */
  readonly details: Record<string, unknown>;
  /** Whether the runtime says a retry may succeed. */
  readonly retryable: boolean;
  /** The event type that carried the error (`error` or `request.rejected`). */
  readonly eventType: string;
  /** The requestId of the command that failed. */
  readonly requestId: string;

  constructor(init: {
    code: ErrorCode | string;
    message: string;
    details?: Record<string, unknown>;
    retryable?: boolean;
    eventType: string;
    requestId: string;
  }) {
    super(`${init.code}: ${init.message}`);
    this.code = init.code;
    this.details = init.details ?? {};
    this.retryable = init.retryable ?? false;
    this.eventType = init.eventType;
    this.requestId = init.requestId;
  }
}

/** The runtime speaks a protocol major version this client does not. */
export class VersionMismatchError extends Error {
  override readonly name = "VersionMismatchError";
  readonly code = "VERSION_MISMATCH";
  constructor(
    /** The version this client speaks. */
    readonly expected: string,
    /** The version the runtime announced. */
    readonly got: string,
  ) {
    super(`the runtime speaks protocol ${got}; this client speaks ${expected}`);
  }
}

/** How the bridge process ended. */
export interface ExitInfo {
  /** The exit code, or null when a signal ended the process. */
  code: number | null;
  /** The signal that ended the process, or null. */
  signal: NodeJS.Signals | null;
  /** Whether `runtime.stopped` was received before the exit. */
  stopped: boolean;
  /** The last lines the process wrote to stderr (at most 8). */
  stderrTail: string[];
  /**
   * True unless the process exited with code 0 after `runtime.stopped` (over the
   * daemon's socket: unless the connection ended after `runtime.stopped` with a reason
   * other than `too_slow`).
   */
  abnormal: boolean;
  /** The reason of `runtime.stopped`, when it came (`shutdown`, `eof`, `disconnect`, `idle`, `too_slow`). */
  reason?: string | null;
}

/** The bridge process ended (or could not start) while something was still pending. */
export class BridgeExitError extends Error {
  override readonly name = "BridgeExitError";
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stderrTail: string[];
  readonly abnormal: boolean;
  constructor(info: ExitInfo, what = "the Keel bridge exited") {
    const how =
      info.signal !== null
        ? `signal ${info.signal}`
        : info.code !== null
          ? `code ${info.code}`
          : `reason ${info.reason ?? "none"}`;
    const tail = info.stderrTail.length > 0 ? `\n${info.stderrTail.join("\n")}` : "";
    super(`${what} (${how}${info.stopped ? "" : ", before runtime.stopped"})${tail}`);
    this.code = info.code;
    this.signal = info.signal;
    this.stderrTail = [...info.stderrTail];
    this.abnormal = info.abnormal;
  }
}

/** A wait ran out of time. */
export class KeelTimeoutError extends Error {
  override readonly name = "KeelTimeoutError";
  constructor(message: string) {
    super(message);
  }
}

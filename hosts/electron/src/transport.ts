/**
 * How a client reaches the runtime: the stdio of a `keel bridge` child process, a
 * connection to the `keel serve` daemon's socket, or a WebSocket to the daemon's
 * remote listener (`keel serve --listen`; see `websocket.ts`).
 */
import type { ChildProcessWithoutNullStreams } from "node:child_process";
import type { Socket } from "node:net";

/** How the client reaches the runtime. */
export interface Link {
  readonly kind: "process" | "socket" | "websocket";
  write(line: string): void;
  /** Ends the input the runtime reads. */
  end(): void;
  /** Ends it now: kills the process, or destroys the connection. */
  kill(signal: NodeJS.Signals): void;
  /** The process id, when the client owns the process. */
  readonly pid: number | undefined;
}

export function processLink(child: ChildProcessWithoutNullStreams): Link {
  return {
    kind: "process",
    write: (line) => child.stdin.write(line),
    end: () => child.stdin.end(),
    kill: (signal) => {
      if (child.pid !== undefined) child.kill(signal);
    },
    get pid() {
      return child.pid;
    },
  };
}

export function socketLink(socket: Socket): Link {
  return {
    kind: "socket",
    write: (line) => {
      if (!socket.destroyed) socket.write(line);
    },
    end: () => socket.end(),
    kill: () => socket.destroy(),
    pid: undefined,
  };
}

/**
 * The part of a WebSocket the client uses: what a browser's `WebSocket` and the `ws`
 * package's both have.
 */
export interface WebSocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: "open", listener: () => void): void;
  addEventListener(type: "message", listener: (ev: { data: unknown }) => void): void;
  addEventListener(type: "close", listener: (ev: { code: number; reason: string }) => void): void;
  addEventListener(type: "error", listener: (ev: unknown) => void): void;
}

/** `WebSocket.OPEN`. */
const OPEN = 1;

/**
 * A WebSocket: one command per text message (the line without its newline). Ending the
 * input does not close the WebSocket: a browser drops what arrives after its own close,
 * so the daemon closes it, after its `runtime.stopped`.
 */
export function webSocketLink(ws: WebSocketLike): Link {
  return {
    kind: "websocket",
    write: (line) => {
      if (ws.readyState === OPEN) ws.send(line.endsWith("\n") ? line.slice(0, -1) : line);
    },
    end: () => undefined,
    kill: () => ws.close(1000),
    pid: undefined,
  };
}

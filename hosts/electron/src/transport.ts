/**
 * How a client reaches the runtime: the stdio of a `keel bridge` child process, or a
 * connection to the `keel serve` daemon's socket.
 */
import type { ChildProcessWithoutNullStreams } from "node:child_process";
import type { Socket } from "node:net";

/** How the client reaches the runtime: a child process's stdio, or a socket. */
export interface Link {
  readonly kind: "process" | "socket";
  write(line: string): void;
  /** Ends the input the runtime reads. */
  end(): void;
  /** Ends it now: kills the process, or destroys the socket. */
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


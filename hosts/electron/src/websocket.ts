/**
 * The client over WebSocket: `connectWebSocket(url, token)` reaches the daemon's remote
 * listener (`keel serve --listen ws://…` or `wss://…`) and returns the same client as
 * {@link KeelBridge.connect}, doing what the token's role allows.
 *
 * In Node it uses the `ws` package and sends the token as `Authorization: Bearer …` on
 * the upgrade; in a browser (a global `WebSocket`, which cannot set headers) it sends
 * `{"type": "auth", "token": …}` as the first message. Either way one text message
 * carries one envelope or command.
 */
import { KeelBridge, type ClientOptions } from "./bridge";
import type { AuthMessage } from "./generated/protocol";
import { webSocketLink, type WebSocketLike } from "./transport";

/** The close code of a refused, revoked or expired token. */
export const CLOSE_UNAUTHORIZED = 4401;

/** A WebSocket class: the browser's global one, or the `ws` package's. */
export type WebSocketConstructor = new (url: string, ...rest: never[]) => WebSocketLike;

/** Options of {@link connectWebSocket}. */
export interface WebSocketOptions extends ClientOptions {
  /**
   * How the token travels: `header` (`Authorization: Bearer`, Node's `ws` only) or
   * `message` (a first `auth` message, as a browser must). Default: `message` with a
   * global `WebSocket`, `header` otherwise.
   */
  auth?: "header" | "message";
  /** The WebSocket class to use; default: the global `WebSocket`, else the `ws` package's. */
  WebSocket?: WebSocketConstructor;
  /** Node only: certificate authorities (PEM) to trust for `wss://`, e.g. for a self-signed certificate. */
  ca?: string | Buffer;
  /** Node only: an `Origin` header to send (a browser sends its page's own). */
  origin?: string;
}

/**
 * The daemon refused the connection: a missing, wrong, expired or revoked token, or an
 * origin not allowed. `reason` is the daemon's stable reason (`token_unknown`,
 * `token_expired`, `token_revoked`, `token_missing`, `auth_timeout`, `origin_refused`, …).
 */
export class ConnectionRefusedError extends Error {
  override readonly name = "ConnectionRefusedError";
  constructor(
    /** The daemon's reason. */
    readonly reason: string,
    /** The HTTP status of a refused upgrade (401, 403, 503), if that is how it was refused. */
    readonly status: number | null,
    /** The WebSocket close code (4401) of a refused first message, if that is how. */
    readonly closeCode: number | null,
    message: string,
  ) {
    super(message);
  }
}

interface NodeWs extends WebSocketLike {
  on(event: "unexpected-response", listener: (req: { destroy(): void }, res: NodeResponse) => void): void;
  terminate(): void;
}

interface NodeResponse {
  statusCode?: number;
  on(event: "data", listener: (chunk: Buffer) => void): void;
  on(event: "end", listener: () => void): void;
}

function globalWebSocket(): WebSocketConstructor | undefined {
  return (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
}

function nodeWebSocket(): WebSocketConstructor {
  // Loaded only when needed, so that a browser bundle needs no `ws`.
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require("ws") as WebSocketConstructor;
  } catch {
    throw new Error(
      "this WebSocket needs the `ws` package (a token in a header, ca or origin); a browser sends the token with auth: \"message\"",
    );
  }
}

function reasonOf(body: string): { reason: string; message: string } {
  try {
    const v = JSON.parse(body) as { reason?: unknown; message?: unknown };
    return {
      reason: typeof v.reason === "string" ? v.reason : "refused",
      message: typeof v.message === "string" ? v.message : body,
    };
  } catch {
    return { reason: "refused", message: body };
  }
}

/**
 * Connects to the daemon's remote listener at `url` with `token`, waits for
 * `runtime.ready` and checks the protocol version. Rejects with a
 * {@link ConnectionRefusedError} when the daemon refuses the token or the origin, with
 * the connection's error when nothing answers, and as {@link KeelBridge.connect}
 * otherwise. A command beyond the token's role rejects with a `KeelError` whose code is
 * `ROLE_FORBIDDEN` (`details.required` names the role it needs). The client's `exit`
 * reports `reason: "token_revoked"` or `"token_expired"` when the token stops being
 * valid while connected.
 */
export async function connectWebSocket(
  url: string,
  token: string,
  options: WebSocketOptions = {},
): Promise<KeelBridge> {
  const Global = globalWebSocket();
  // Headers, certificate authorities and an origin need the `ws` package.
  const wantsNode = options.auth === "header" || options.ca !== undefined || options.origin !== undefined;
  const Impl = options.WebSocket ?? (wantsNode ? undefined : Global) ?? nodeWebSocket();
  const browser = Global !== undefined && Impl === Global;
  const auth = options.auth ?? (browser ? "message" : "header");
  let ws: WebSocketLike;
  if (!browser) {
    const headers: Record<string, string> = {};
    if (auth === "header") headers.authorization = `Bearer ${token}`;
    if (options.origin !== undefined) headers.origin = options.origin;
    const nodeOptions: Record<string, unknown> = { headers };
    if (options.ca !== undefined) nodeOptions.ca = options.ca;
    ws = new (Impl as unknown as new (url: string, opts: Record<string, unknown>) => WebSocketLike)(url, nodeOptions);
  } else {
    ws = new Impl(url);
  }
  const { line, closed, failed, ready } = KeelBridge.overLink(webSocketLink(ws), options);
  let refused: ConnectionRefusedError | null = null;
  const node = ws as Partial<NodeWs>;
  if (typeof node.on === "function") {
    // `ws` reports an upgrade the server answered with an HTTP error here.
    node.on("unexpected-response", (req, res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => {
        const { reason, message } = reasonOf(Buffer.concat(chunks).toString("utf8"));
        const status = res.statusCode ?? 0;
        refused = new ConnectionRefusedError(reason, status, null, `the Keel daemon refused the connection: ${message} (${reason}, HTTP ${status})`);
        failed(refused);
        req.destroy();
        closed();
      });
    });
  }
  ws.addEventListener("open", () => {
    if (auth === "message") {
      const first: AuthMessage = { type: "auth", token };
      ws.send(JSON.stringify(first));
    }
  });
  ws.addEventListener("message", (ev) => {
    if (typeof ev.data === "string") line(ev.data);
    else if (ev.data instanceof Uint8Array) line(Buffer.from(ev.data).toString("utf8"));
  });
  ws.addEventListener("error", (ev) => {
    if (refused !== null) return;
    const err = (ev as { error?: unknown }).error;
    failed(err instanceof Error ? err : new Error(`the WebSocket to ${url} failed`));
  });
  ws.addEventListener("close", (ev) => {
    if (refused === null && ev.code === CLOSE_UNAUTHORIZED) {
      refused = new ConnectionRefusedError(
        ev.reason,
        null,
        ev.code,
        `the Keel daemon refused the connection: ${ev.reason} (close ${ev.code})`,
      );
      failed(refused);
    }
    closed();
  });
  return ready();
}

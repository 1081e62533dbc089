/**
 * Tools the host app defines and runs (docs/protocol.md, "Host tools"). A tool is
 * registered with its definition and a handler; the session sends the whole set with
 * `session.set_host_tools`, runs the handler when the model's call arrives
 * (`host-tool.requested`), and answers with `host-tool.respond`. The handler's
 * `signal` aborts when the call ends without its answer: an interrupt, the kernel's
 * time limit, or the session closing.
 */
import type {
  CommandPayloads,
  CommandTypeName,
  HostToolSpec,
  KeelEvent,
  KnownPermissionLevel as PermissionLevel,
} from "./generated/protocol";
import type { SendOptions } from "./session";

/** Sends one session command (the session's `send`). */
type Sender = <K extends CommandTypeName>(
  type: K,
  payload: CommandPayloads[K],
  options?: SendOptions,
) => Promise<KeelEvent>;

/** A host tool as the model sees it. */
export interface HostToolDefinition {
  /** Letters, digits, `_` and `-`, at most 64 characters. */
  name: string;
  /** What it does, for the model. */
  description: string;
  /** The JSON Schema of its arguments (an object schema). */
  inputSchema: Record<string, unknown>;
  /** `read` runs without approval (also in plan mode); the others ask in `ask` mode. */
  level: PermissionLevel;
  /** Overrides whether it asks (default: `never` for `read`, else `always`). */
  approval?: "always" | "never";
}

/** What a handler gets besides the arguments. */
export interface HostToolContext {
  /** Aborts when the call ends without the handler's answer. */
  signal: AbortSignal;
  /** The call (`toolCallId` of the tool.call.* events). */
  toolCallId: string;
  /** The request the call belongs to. */
  requestId: string;
}

/**
 * Runs one call: resolves with the result (any JSON; a string reaches the model as is)
 * or throws (the error's message reaches the model as the tool's failure).
 */
export type HostToolHandler = (args: unknown, context: HostToolContext) => unknown;

interface Registered {
  definition: HostToolDefinition;
  handler: HostToolHandler;
}

function spec(d: HostToolDefinition): HostToolSpec {
  return {
    name: d.name,
    description: d.description,
    inputSchema: d.inputSchema,
    level: d.level,
    approval: d.approval ?? null,
  };
}

function messageOf(err: unknown): string {
  if (err instanceof Error && err.message !== "") return err.message;
  const s = String(err);
  return s === "" ? "the host tool failed" : s;
}

/** The host tools of one session. */
export class HostTools {
  private readonly tools = new Map<string, Registered>();
  private readonly running = new Map<string, AbortController>();

  /** @internal */
  constructor(private readonly send: Sender) {}

  /** The names of the registered tools. */
  get names(): string[] {
    return [...this.tools.keys()];
  }

  /**
   * Registers (or replaces) a tool and sends the session's whole set
   * (`session.set_host_tools`, only while the session is idle). Rejects with a
   * {@link KeelError} when the runtime refuses it (a bad schema, a name taken,
   * `SESSION_BUSY`); the tool is then not registered.
   */
  async register(definition: HostToolDefinition, handler: HostToolHandler): Promise<void> {
    const previous = this.tools.get(definition.name);
    this.tools.set(definition.name, { definition, handler });
    try {
      await this.sync();
    } catch (err) {
      if (previous === undefined) this.tools.delete(definition.name);
      else this.tools.set(definition.name, previous);
      throw err;
    }
  }

  /** Removes a tool (and sends the new set). */
  async unregister(name: string): Promise<void> {
    const previous = this.tools.get(name);
    if (previous === undefined) return;
    this.tools.delete(name);
    try {
      await this.sync();
    } catch (err) {
      this.tools.set(name, previous);
      throw err;
    }
  }

  private async sync(): Promise<void> {
    const tools = [...this.tools.values()].map((t) => spec(t.definition));
    await this.send("session.set_host_tools", { tools });
  }

  /** @internal Follows the session's events: runs calls, aborts the ones that ended. */
  onEvent(env: KeelEvent): void {
    if (env.meta?.replay === true) return;
    switch (env.type) {
      case "host-tool.requested":
        void this.run(env.requestId, env.payload.toolCallId, env.payload.toolName, env.payload.arguments);
        break;
      case "tool.call.failed":
      case "tool.call.completed":
        this.abort(env.payload.toolCallId);
        break;
      case "session.interrupted":
      case "session.closed":
        for (const id of [...this.running.keys()]) this.abort(id);
        break;
      default:
        break;
    }
  }

  private abort(toolCallId: string): void {
    const c = this.running.get(toolCallId);
    if (c === undefined) return;
    this.running.delete(toolCallId);
    c.abort(new Error("the call ended before the host answered"));
  }

  private async run(requestId: string, toolCallId: string, name: string, args: unknown): Promise<void> {
    const tool = this.tools.get(name);
    const controller = new AbortController();
    this.running.set(toolCallId, controller);
    let answer: CommandPayloads["host-tool.respond"];
    try {
      if (tool === undefined) throw new Error(`this host has no handler for the tool ${name}`);
      const result = await tool.handler(args, { signal: controller.signal, toolCallId, requestId });
      answer = { toolCallId, result: result === undefined ? null : result, error: null };
    } catch (err) {
      answer = { toolCallId, result: null, error: { message: messageOf(err) } };
    }
    // A call that already ended (interrupt, time limit) takes no answer.
    if (controller.signal.aborted || this.running.get(toolCallId) !== controller) return;
    this.running.delete(toolCallId);
    try {
      await this.send("host-tool.respond", answer);
    } catch {
      // The call ended meanwhile (HOST_TOOL_CALL_NOT_FOUND) or the bridge is gone.
    }
  }
}

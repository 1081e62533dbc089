/**
 * Typed calls for the optional extensions of a session (docs/protocol.md, "Commands"):
 * review mode, patch preview, the task graph, sub-agents and background tasks. Each
 * call sends one command and resolves with its answering event; a refusal (`error`
 * or `request.rejected`) rejects with a {@link KeelError} carrying the stable code.
 */
import type {
  CommandPayloads,
  CommandTypeName,
  KeelEvent,
  NewTaskNode,
  NodeUpdates,
  ProposedFile,
  ReviewDecision,
} from "./generated/protocol";
import type { EventOf, SendOptions } from "./bridge";

/** Sends one session command (the session's `send`). */
type Sender = <K extends CommandTypeName>(
  type: K,
  payload: CommandPayloads[K],
  options?: SendOptions,
) => Promise<KeelEvent>;

/** A task-graph node to create: `dependsOn` and `metadata` may be left out. */
export type TaskNodeInput = Pick<NewTaskNode, "id" | "title"> &
  Partial<Pick<NewTaskNode, "description" | "dependsOn" | "metadata">>;

/** Changes to a task-graph node: every field may be left out. */
export type TaskNodeChanges = Partial<NodeUpdates>;

/** Options of {@link ReviewCalls.enter}. */
export interface ReviewEnterOptions {
  /** Refuse requests (`REVIEW_BLOCKING`) while the review is pending. */
  blocking?: boolean;
  /** Titles of checklist items. */
  checklist?: string[];
}

/** What {@link ReviewCalls.submit} adds to the review: a comment, a checklist change, or both. */
export interface ReviewSubmission {
  comment?: string;
  checklistItem?: { id: string; done?: boolean; note?: string };
}

function node(n: TaskNodeInput): NewTaskNode {
  return {
    id: n.id,
    title: n.title,
    description: n.description ?? null,
    dependsOn: n.dependsOn ?? [],
    metadata: n.metadata ?? null,
  };
}

/** Review mode (`review.*`). */
export class ReviewCalls {
  /** @internal */
  constructor(private readonly send: Sender) {}

  /** Enters review mode (answered with `review.requested`). */
  async enter(reason: string, options: ReviewEnterOptions = {}): Promise<EventOf<"review.requested">> {
    return (await this.send("review.enter", {
      reason,
      blocking: options.blocking ?? false,
      checklist: options.checklist ?? null,
    })) as EventOf<"review.requested">;
  }

  /** Comments on the review or updates a checklist item (answered with `review.updated`). */
  async submit(submission: ReviewSubmission): Promise<EventOf<"review.updated">> {
    const item = submission.checklistItem;
    return (await this.send("review.submit", {
      comment: submission.comment ?? null,
      checklistItem: item === undefined ? null : { id: item.id, done: item.done ?? true, note: item.note ?? null },
    })) as EventOf<"review.updated">;
  }

  /** Resolves the review (answered with `review.resolved`). */
  async resolve(decision: ReviewDecision, summary?: string): Promise<EventOf<"review.resolved">> {
    return (await this.send("review.resolve", { decision, summary: summary ?? null })) as EventOf<"review.resolved">;
  }

  /** The review state (answered with `review.state`; `review` is null when there is none). */
  async status(): Promise<EventOf<"review.state">> {
    return (await this.send("review.status", {})) as EventOf<"review.state">;
  }
}

/** Patch preview (`patch.*`). */
export class PatchCalls {
  /** @internal */
  constructor(private readonly send: Sender) {}

  /** Proposes a patch: files with their new content (null content deletes). */
  async propose(files: ProposedFile[], reason?: string): Promise<EventOf<"patch.proposed">> {
    return (await this.send("patch.propose", { files, reason: reason ?? null })) as EventOf<"patch.proposed">;
  }

  /** Writes a pending patch (`PATCH_CONFLICT` if a file changed since it was proposed). */
  async apply(patchId: string): Promise<EventOf<"patch.applied">> {
    return (await this.send("patch.apply", { patchId })) as EventOf<"patch.applied">;
  }

  /** Drops a pending patch. */
  async reject(patchId: string, reason?: string): Promise<EventOf<"patch.rejected">> {
    return (await this.send("patch.reject", { patchId, reason: reason ?? null })) as EventOf<"patch.rejected">;
  }

  /** Pending and resolved patches with totals. */
  async summary(): Promise<EventOf<"patch.summary">> {
    return (await this.send("patch.summary", {})) as EventOf<"patch.summary">;
  }
}

/** The persistent task graph (`task-graph.*`). */
export class TaskGraphCalls {
  /** @internal */
  constructor(private readonly send: Sender) {}

  /** Creates (or replaces) the session's graph (`CYCLE_DETECTED`, `INVALID_DEPENDENCY`, `DUPLICATE_NODE`). */
  async create(
    nodes: TaskNodeInput[],
    options: { title?: string; description?: string } = {},
  ): Promise<EventOf<"task-graph.created">> {
    return (await this.send("task-graph.create", {
      title: options.title ?? null,
      description: options.description ?? null,
      nodes: nodes.map(node),
    })) as EventOf<"task-graph.created">;
  }

  /** Adds a node. */
  async addNode(n: TaskNodeInput): Promise<EventOf<"task-graph.node.added">> {
    return (await this.send("task-graph.add-node", { node: node(n) })) as EventOf<"task-graph.node.added">;
  }

  /**
   * Changes a node; answered with `task-graph.node.completed` / `.failed` when the new
   * status is terminal, else `task-graph.node.updated`. `task-graph.completed`
   * follows on the same requestId when the graph became terminal.
   */
  async updateNode(
    nodeId: string,
    updates: TaskNodeChanges,
  ): Promise<EventOf<"task-graph.node.updated" | "task-graph.node.completed" | "task-graph.node.failed">> {
    const full: NodeUpdates = {
      ...updates,
      result: updates.result,
      error: updates.error,
      metadata: updates.metadata ?? null,
    };
    return (await this.send("task-graph.update-node", { nodeId, updates: full })) as EventOf<
      "task-graph.node.updated" | "task-graph.node.completed" | "task-graph.node.failed"
    >;
  }

  /** Marks every node whose dependencies are done as ready. */
  async advance(): Promise<EventOf<"task-graph.advanced">> {
    return (await this.send("task-graph.advance", {})) as EventOf<"task-graph.advanced">;
  }

  /** The graph (`graph` is null when there is none). */
  async state(): Promise<EventOf<"task-graph.state">> {
    return (await this.send("task-graph.state", {})) as EventOf<"task-graph.state">;
  }
}

/** Sub-agents of the session (`sub-agent.*`). */
export class SubAgentCalls {
  /** @internal */
  constructor(private readonly send: Sender) {}

  /** Running and recently finished sub-agents. */
  async list(): Promise<EventOf<"sub-agent.list">> {
    return (await this.send("sub-agent.list", {})) as EventOf<"sub-agent.list">;
  }

  /** One sub-agent (`SUB_AGENT_NOT_FOUND` for an unknown id). */
  async get(subAgentId: string): Promise<EventOf<"sub-agent.get">> {
    return (await this.send("sub-agent.get", { subAgentId })) as EventOf<"sub-agent.get">;
  }
}

/** Background tasks of the session (`background.*`). */
export class BackgroundCalls {
  /** @internal */
  constructor(private readonly send: Sender) {}

  /** The tasks. */
  async list(): Promise<EventOf<"background.list">> {
    return (await this.send("background.list", {})) as EventOf<"background.list">;
  }

  /** One task (`BACKGROUND_TASK_NOT_FOUND` for an unknown id). */
  async get(taskId: string): Promise<EventOf<"background.get">> {
    return (await this.send("background.get", { taskId })) as EventOf<"background.get">;
  }

  /** A task's output lines, oldest first. */
  async history(taskId: string): Promise<EventOf<"background.history">> {
    return (await this.send("background.history", { taskId })) as EventOf<"background.history">;
  }

  /** Stops a task. */
  async stop(taskId: string): Promise<EventOf<"background.stopped">> {
    return (await this.send("background.stop", { taskId })) as EventOf<"background.stopped">;
  }
}

export {
  KeelBridge,
  KeelSession,
  STDERR_TAIL_LINES,
  protocolMajor,
  type EventCursor,
  type EventOf,
  type InvalidLine,
  type KeelBridgeEvents,
  type MessageRun,
  type ResumeResult,
  type ClientOptions,
  type ConnectOptions,
  type SendOptions,
  type SpawnOptions,
  type WatchResult,
} from "./bridge";
export {
  BackgroundCalls,
  PatchCalls,
  ReviewCalls,
  SubAgentCalls,
  TaskGraphCalls,
  type ReviewEnterOptions,
  type ReviewSubmission,
  type TaskNodeChanges,
  type TaskNodeInput,
} from "./extensions";
export { HostTools, type HostToolContext, type HostToolDefinition, type HostToolHandler } from "./hostTools";
export { BridgeExitError, KeelError, KeelTimeoutError, VersionMismatchError, type ExitInfo } from "./errors";
export { LineRing, LineSplitter } from "./framing";
export { type WebSocketLike } from "./transport";
export {
  CLOSE_UNAUTHORIZED,
  ConnectionRefusedError,
  connectWebSocket,
  type WebSocketConstructor,
  type WebSocketOptions,
} from "./websocket";
export { AsyncQueue } from "./queue";
export { SequenceTracker, type SequenceGap, type Sequenced } from "./sequence";
export * from "./generated/protocol";

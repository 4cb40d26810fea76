/**
 * `troupe/testing`: what a project needs to test its agents without a model provider. The scripted
 * model server is an OpenAI-compatible HTTP server on loopback that answers by a script (text, tool
 * calls, errors, slow streams); `troupe demo` runs on it too.
 */
export {
  type RecordedRequest,
  type RequestMatch,
  ScriptedModelServer,
  type ScriptRule,
  type ServerQuirks,
} from "./scripted-model-server.js";
export type { ScriptedReply, ScriptedToolCall } from "./scripted-reply.js";

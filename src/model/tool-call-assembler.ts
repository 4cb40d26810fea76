import { randomBytes } from "node:crypto";
import type { ToolCall } from "./types.js";

/** An id for a call its server gave none: unique, as call ids key the tool journal. */
export function newCallId(): string {
  return `call_${randomBytes(12).toString("base64url")}`;
}

/** One streamed tool-call fragment, as the Chat Completions delta carries it. */
export interface ToolCallDelta {
  index?: number | undefined;
  id?: string | undefined;
  /** Arguments are a string of JSON by the API; some servers send the object itself. */
  function?: { name?: string | undefined; arguments?: string | object | undefined } | undefined;
}

/**
 * Builds whole tool calls from streamed fragments: arguments split over many chunks, several calls
 * interleaved by `index`, a whole call in one chunk, or servers that omit `index` (then a new `id`
 * starts a new call and anything else continues the last one). A fragment whose `id` differs from
 * the one its `index` holds starts a call of its own (servers that send every call at index 0).
 * A name is joined from its fragments (a name split across chunks), but a fragment that repeats the
 * whole name held so far is a resend, not more of it (gateways that send `id`, `type` and the name
 * with every argument fragment).
 */
export class ToolCallAssembler {
  #calls: Array<{ id: string; name: string; arguments: string }> = [];
  #byIndex = new Map<number, number>();

  add(delta: ToolCallDelta): void {
    let slot: number | undefined;
    if (delta.index !== undefined) {
      slot = this.#byIndex.get(delta.index);
      const held = slot === undefined ? undefined : this.#calls[slot]?.id;
      if (slot === undefined || (delta.id && held && delta.id !== held)) {
        slot = this.#open();
        this.#byIndex.set(delta.index, slot);
      }
    } else if (delta.id !== undefined && delta.id !== this.#calls.at(-1)?.id) {
      slot = this.#open();
    } else {
      slot = this.#calls.length > 0 ? this.#calls.length - 1 : this.#open();
    }
    const call = this.#calls[slot];
    if (!call) return;
    if (delta.id) call.id = delta.id;
    const name = delta.function?.name;
    if (name && name !== call.name) call.name += name;
    const args = delta.function?.arguments;
    if (typeof args === "string") call.arguments += args;
    else if (args && typeof args === "object") call.arguments += JSON.stringify(args);
  }

  get size(): number {
    return this.#calls.length;
  }

  /** The calls in the order they started. A call whose server gave no id gets one of its own. */
  calls(): ToolCall[] {
    for (const call of this.#calls) call.id ||= newCallId();
    return this.#calls.map((call) => ({
      id: call.id,
      type: "function",
      function: { name: call.name, arguments: call.arguments || "{}" },
    }));
  }

  #open(): number {
    this.#calls.push({ id: "", name: "", arguments: "" });
    return this.#calls.length - 1;
  }
}

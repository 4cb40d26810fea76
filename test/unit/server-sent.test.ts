import { describe, expect, it } from "vitest";
import { fromAStream, sentByTheServer } from "../../src/bus/server-sent.js";

/** A received message as nats.js gives one: `size()` counts subject, reply, headers and payload. */
function received(headerBytes: number, names: string[], reply?: string) {
  const subject = "troupe.evt.r1.a1.model.delta";
  const data = new Uint8Array(40);
  let read = 0;
  return {
    msg: {
      subject,
      ...(reply ? { reply } : {}),
      data,
      get headers() {
        read++;
        return { has: (name: string) => names.includes(name) };
      },
      size: () => subject.length + (reply?.length ?? 0) + headerBytes + data.length,
    },
    headersRead: () => read,
  };
}

describe("messages the server sent on someone's behalf", () => {
  it("takes a message with no more headers than a Troupe publish carries without decoding them", () => {
    const plain = received(53, ["Nats-Msg-Id"]);
    expect(fromAStream(plain.msg)).toBe(false);
    expect(plain.headersRead()).toBe(0);
  });

  it("finds a direct get's reply by its Nats-Stream header, which makes its headers bigger", () => {
    const copied = received(160, ["Nats-Stream", "Nats-Subject", "Nats-Sequence", "Nats-Time-Stamp"]);
    expect(fromAStream(copied.msg)).toBe(true);
    expect(sentByTheServer(copied.msg)).toBe(true);
    // Big headers of another kind are read, and are not a stream's.
    expect(fromAStream(received(160, ["X-Trace"]).msg)).toBe(false);
  });

  it("decodes the headers of a message that cannot say its size", () => {
    const { size: _size, ...bare } = received(160, ["Nats-Stream"]).msg;
    expect(fromAStream(bare)).toBe(true);
  });

  it("knows a push consumer's delivery by its $JS reply", () => {
    expect(sentByTheServer(received(0, [], "$JS.ACK.S.c.1.2.3.4.0").msg)).toBe(true);
    expect(sentByTheServer(received(53, ["Nats-Msg-Id"], "_INBOX.x").msg)).toBe(false);
  });
});

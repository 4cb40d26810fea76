import { describe, expect, it } from "vitest";
import { deliveryOf } from "../../src/bus/jetstream-ack.js";

const owner = "TROUPE_EVENTS.log_abc.";

describe("a push delivery read from its ack subject", () => {
  it("reads the form without a domain: delivered, stream seq, delivery seq, time, pending", () => {
    expect(deliveryOf(`$JS.ACK.${owner}1.4711.42.1767225600000000000.9`, owner)).toEqual({
      streamSeq: 4711,
      deliverySeq: 42,
      pending: 9,
    });
  });

  it("reads the form with a domain and an account hash, and the token after pending", () => {
    expect(deliveryOf(`$JS.ACK.hub.ACCHASH.${owner}3.4711.42.1767225600000000000.0.r4nd0m`, owner)).toEqual({
      streamSeq: 4711,
      deliverySeq: 42,
      pending: 0,
    });
    // The default domain is written `_`.
    expect(deliveryOf(`$JS.ACK._.ACCHASH.${owner}1.1.1.1.123456`, owner)).toEqual({
      streamSeq: 1,
      deliverySeq: 1,
      pending: 123456,
    });
  });

  it("reads numbers past 32 bits", () => {
    expect(deliveryOf(`$JS.ACK.${owner}1.9007199254740.8589934592.1.4294967296`, owner)).toEqual({
      streamSeq: 9007199254740,
      deliverySeq: 8589934592,
      pending: 4294967296,
    });
  });

  it("is not another consumer's delivery, in either form", () => {
    expect(deliveryOf("$JS.ACK.TROUPE_EVENTS.log_xyz.1.2.3.4.5", owner)).toBeUndefined();
    expect(deliveryOf("$JS.ACK.hub.ACCHASH.TROUPE_EVENTS.log_xyz.1.2.3.4.5.t", owner)).toBeUndefined();
    // A consumer whose name starts like this one's.
    expect(deliveryOf("$JS.ACK.TROUPE_EVENTS.log_abcd.1.2.3.4.5", owner)).toBeUndefined();
    expect(deliveryOf("$JS.ACK.OTHER_EVENTS.log_abc.1.2.3.4.5", owner)).toBeUndefined();
  });

  it("is nothing without a $JS.ACK reply", () => {
    expect(deliveryOf(undefined, owner)).toBeUndefined();
    expect(deliveryOf("", owner)).toBeUndefined();
    expect(deliveryOf(`_INBOX.${owner}1.2.3.4.5`, owner)).toBeUndefined();
    expect(deliveryOf(`$JS.FC.${owner}1.2.3.4.5`, owner)).toBeUndefined();
    expect(deliveryOf(`$JS.ACK.${owner}`, owner)).toBeUndefined();
    // Too short to hold either form.
    expect(deliveryOf("$JS.ACK.x", owner)).toBeUndefined();
  });

  it("is nothing with fewer than five numbers", () => {
    expect(deliveryOf(`$JS.ACK.${owner}1.2.3.4`, owner)).toBeUndefined();
    expect(deliveryOf(`$JS.ACK.hub.ACCHASH.${owner}1.2.3.4`, owner)).toBeUndefined();
  });

  it("is nothing with anything but digits in the five numbers", () => {
    expect(deliveryOf(`$JS.ACK.${owner}1.2x.3.4.5`, owner)).toBeUndefined();
    expect(deliveryOf(`$JS.ACK.${owner}1.2.3.4.-5`, owner)).toBeUndefined();
    expect(deliveryOf(`$JS.ACK.${owner}a.2.3.4.5`, owner)).toBeUndefined();
    expect(deliveryOf(`$JS.ACK.${owner}1.2.3.4 .5`, owner)).toBeUndefined();
  });
});

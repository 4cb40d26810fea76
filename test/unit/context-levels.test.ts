import { describe, expect, it } from "vitest";
import { ContextLevels, contextLevel } from "../../src/context/context-levels.js";
import { countMessagesTokens, estimateMessagesTokens } from "../../src/model/tokens.js";
import type { ChatMessage } from "../../src/model/types.js";

describe("context levels", () => {
  it("are ok below 60 %, warning from 60 %, critical from 80 %", () => {
    expect([0, 59, 60, 79, 80, 130].map(contextLevel)).toEqual([
      "ok",
      "ok",
      "warning",
      "warning",
      "critical",
      "critical",
    ]);
  });

  it("say each rise into a level once, and again after the context fell back", () => {
    const levels = new ContextLevels();
    const said = [10, 61, 70, 75, 30, 62, 64, 85, 90, 40, 95].map((p) => levels.next(p) ?? "-");
    expect(said).toEqual(["-", "warning", "-", "-", "-", "warning", "-", "critical", "-", "-", "critical"]);
  });
});

describe("estimateMessagesTokens", () => {
  it("takes a count already made, and a quarter of the bytes of a message never counted", () => {
    const words = "lorem ".repeat(400);
    const fresh: ChatMessage[] = [{ role: "user", content: words }];
    // 3 for the reply's priming, 4 for the message's framing.
    expect(estimateMessagesTokens(fresh)).toBe(3 + 4 + words.length / 4);
    const counted: ChatMessage[] = [{ role: "user", content: words }];
    const exact = countMessagesTokens(counted);
    expect(estimateMessagesTokens(counted)).toBe(exact);
    expect(exact).not.toBe(3 + 4 + words.length / 4);
  });
});

import { expect, it } from "vitest";
import { CHAT_COMMANDS, helpText, parseCommand } from "../../src/cli/chat-commands.js";

it("a / command is parsed with the rest of its line; an unknown one is one line with the closest", () => {
  expect(parseCommand("/steer  go left  now")).toEqual({ command: "/steer", rest: "go left now" });
  expect(parseCommand("/COST")).toEqual({ command: "/cost", rest: "" });
  expect(parseCommand("/agnets")).toEqual({
    unknown: 'unknown command /agnets (did you mean "/agents"?): /help lists them',
  });
  // What was typed is shown, never obeyed.
  expect(parseCommand("/\x1b[2Jx")).toEqual({ unknown: expect.not.stringContaining("\x1b") });
});

it("/help names every command, on lines that fit 100 columns", () => {
  const help = helpText();
  for (const name of Object.keys(CHAT_COMMANDS)) expect(help).toContain(`  ${name} `);
  for (const line of help.split("\n")) expect(line.length).toBeLessThanOrEqual(100);
});

import { expect, it } from "vitest";
import { CATALOGUE_LIMITS, type Skill, skillCatalogue, skippedLines } from "../../src/skills/skills.js";

/* ATTACK: a workspace's skills are an agent's to write: 10,000 SKILL.md files, or one description of
 * a megabyte, went whole into every later system prompt. The catalogue is bounded. */

const skill = (name: string, description: string) => ({ name, description }) as unknown as Skill;

it("lists at most 100 skills, each description cut at 200 characters, and says how many more there are", () => {
  const many = Array.from({ length: 10_000 }, (_, i) => skill(`s${i}`, "d".repeat(1_000_000)));
  const text = skillCatalogue(many) as string;
  const lines = text.split("\n");
  expect(lines.filter((line) => line.startsWith("- "))).toHaveLength(CATALOGUE_LIMITS.skills);
  expect(lines.at(-1)).toBe("(and 9900 more skills, not listed)");
  expect(text.length).toBeLessThan(100 * 220 + 300);
  expect(lines[1]).toBe(`- s0: ${"d".repeat(199)}…`);
});

it("keeps at most 20 lines on skipped skills, and one saying how many more", () => {
  const skipped = Array.from({ length: 5000 }, (_, i) => `skill ${i} skipped: a symbolic link`);
  const lines = skippedLines(skipped);
  expect(lines).toHaveLength(21);
  expect(lines.at(-1)).toBe("(and 4980 more skills skipped)");
  expect(skippedLines(skipped.slice(0, 3))).toEqual(skipped.slice(0, 3));
});

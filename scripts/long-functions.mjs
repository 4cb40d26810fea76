#!/usr/bin/env node
// Lists the functions, methods and arrow functions under a directory (default src/actors) longer than
// a number of lines (default 100), longest first; exits 1 when there is any.
import { readFileSync } from "node:fs";
import { relative } from "node:path";
import ts from "typescript";
import { tsModules } from "./ts-modules.mjs";

const [dir = "src/actors", limitArg = "100"] = process.argv.slice(2);
const limit = Number(limitArg);
const files = tsModules(dir);

const long = [];
for (const file of files) {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true);
  const visit = (node) => {
    if (ts.isFunctionLike(node) && "body" in node && node.body) {
      const start = source.getLineAndCharacterOfPosition(node.getStart()).line;
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = end - start + 1;
      if (lines > limit) {
        const name = node.name?.getText(source) ?? "(anonymous)";
        long.push({ where: `${relative(process.cwd(), file)}:${start + 1}`, name, lines });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
}
long.sort((a, b) => b.lines - a.lines);
for (const { where, name, lines } of long) process.stdout.write(`${lines} lines: ${name} at ${where}\n`);
process.stdout.write(
  `${long.length} function${long.length === 1 ? "" : "s"} over ${limit} lines in ${dir}\n`,
);
process.exit(long.length > 0 ? 1 : 0);

import type { LoadedConfig } from "../config/load.js";
import { YamlFile } from "../config/yaml-file.js";
import { visibleLine } from "../util/visible.js";

/** One rule of troupe.yaml's `permissions`, and where it is written. */
export interface ListedRule {
  kind: "allow" | "deny";
  pattern: string;
  /** `file:line` (troupe.yaml's), or "settings" for a config given in code. */
  where: string;
}

/** The rules in effect, deny rules first (they win over every allow), each where it is written. */
export function permissionsInEffect(config: LoadedConfig, cwd = process.cwd()): ListedRule[] {
  const file = config.file ? YamlFile.read(config.file, cwd) : undefined;
  const listed = (kind: ListedRule["kind"]) =>
    config.troupe.permissions[kind].map((pattern, at) => ({
      kind,
      pattern,
      where: file ? file.where(["permissions", kind, at]).replace(/:\d+$/, "") : "settings",
    }));
  return [...listed("deny"), ...listed("allow")];
}

/** `troupe permissions`: one rule a line, `FILE:LINE  deny|allow  PATTERN`; `--json` a list of them. */
export function runPermissions(config: LoadedConfig, json = false): number {
  const rules = permissionsInEffect(config);
  if (json) {
    process.stdout.write(`${JSON.stringify(rules)}\n`);
    return 0;
  }
  if (rules.length === 0) {
    process.stdout.write(
      `no permissions rules in ${config.file ? visibleLine(config.file) : "the config"}: the approval policy decides every call (docs/configuration.md, "permissions")\n`,
    );
    return 0;
  }
  const width = Math.max(...rules.map((rule) => rule.where.length));
  for (const rule of rules)
    process.stdout.write(
      `${visibleLine(rule.where.padEnd(width))}  ${rule.kind.padEnd(5)}  ${visibleLine(rule.pattern)}\n`,
    );
  return 0;
}

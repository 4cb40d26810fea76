import type { LoadedConfig } from "../config/load.js";
import { permissionsInEffect } from "../config/permissions-listed.js";
import { visibleLine } from "../util/visible.js";

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

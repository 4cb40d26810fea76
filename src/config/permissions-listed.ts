import type { LoadedConfig } from "./loaded.js";
import { YamlFile } from "./yaml-file.js";

/** One rule of troupe.yaml's `permissions`, and where it is written: what `troupe permissions` and the web console show. */
export interface ListedRule {
  kind: "allow" | "deny";
  pattern: string;
  /** `FILE:LINE` of troupe.yaml, or "settings" for a config given in code. */
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

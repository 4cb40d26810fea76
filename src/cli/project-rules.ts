import { realpathSync, writeFileSync } from "node:fs";
import { isMap, isSeq, parseDocument } from "yaml";
import type { ApprovalRequest } from "../approvals/approver.js";
import { changedFiles, digestConfig } from "../config/config-digest.js";
import { readConfigText } from "../config/config-file.js";
import { isTroupesOwn, type LoadedConfig } from "../config/load.js";
import { patternProblem } from "../config/permission-pattern.js";
import { troupeConfigSchema } from "../config/schema.js";
import { readTrustStore, trustStorePath, writeTrustStore } from "../config/trusted-configs.js";
import { YamlFile } from "../config/yaml-file.js";
import { UserError } from "../errors.js";
import { analyzeCommand } from "../safety/command-analysis.js";

/** The terminal's `A` (always, in this project): the allow rule for a request, saved in troupe.yaml. */
export interface ProjectRules {
  /** The allow rule `A` saves for this request; undefined when there is none to save (`A` is not offered). */
  ruleFor(request: ApprovalRequest): string | undefined;
  /**
   * Adds `rule` to troupe.yaml's `permissions.allow`, keeping the file's comments and layout, and
   * trusts the dir again with that one change. Throws `UserError` when the dir is no longer as
   * trusted (then nothing is written) or something else changed meanwhile.
   */
  save(rule: string): void;
  /** troupe.yaml, as the user would name it. */
  readonly file: string;
}

/**
 * The project's rules, when the config is the project's own trusted one: a troupe.yaml in a
 * config dir the user trusted (`troupe trust`), not Troupe's shipped config, and still as trusted.
 * Otherwise undefined: a config nobody vouched for is never written, and never trusted again.
 */
export function projectRules(
  config: LoadedConfig,
  env: NodeJS.ProcessEnv = process.env,
): ProjectRules | undefined {
  const file = config.file;
  if (!file || isTroupesOwn(config.dir)) return undefined;
  const dir = realpathSync(config.dir);
  const storePath = trustStorePath(env);
  const trusted = () => {
    const store = readTrustStore(storePath);
    const record = store.configs[dir];
    if (!record) return undefined;
    const now = digestConfig(dir, record.roots);
    return changedFiles(record.files, now).length === 0 ? { store, record } : undefined;
  };
  try {
    if (!trusted()) return undefined;
  } catch (error) {
    // A trust store that does not read, a dir too big to digest: no rule is saved, the run goes on.
    if (error instanceof UserError) return undefined;
    throw error;
  }
  return {
    file,
    ruleFor,
    save(rule) {
      const before = trusted();
      if (!before)
        throw new UserError(
          `${dir} changed since you trusted it: "${rule}" was not saved (look at it, then run troupe trust)`,
        );
      const text = readConfigText(file);
      const next = withAllowRule(text, rule);
      if (next === text) return;
      try {
        writeFileSync(file, next);
      } catch (error) {
        throw new UserError(`"${rule}" was not saved: ${(error as Error).message}`, { cause: error });
      }
      const after = digestConfig(dir, before.record.roots);
      const changed = changedFiles(before.record.files, after);
      if (changed.length !== 1 || changed[0] !== "troupe.yaml")
        throw new UserError(
          `"${rule}" was saved in ${file}, but ${changed.join(", ")} changed too: troupe run asks you to trust ${dir} again`,
        );
      before.store.configs[dir] = { ...before.record, trustedAt: new Date().toISOString(), files: after };
      writeTrustStore(storePath, before.store);
    },
  };
}

/** The allow rule for a request: a command's first word, and its second when that names a subcommand; another tool whole. */
export function ruleFor(request: ApprovalRequest): string | undefined {
  if (request.escalation !== undefined) return undefined;
  const rule = request.tool === "shell" ? commandRule(request.arguments) : request.tool;
  return rule !== undefined && patternProblem(rule) === undefined ? rule : undefined;
}

/**
 * `shell(git status *)` for `git status --short`, `shell(ls *)` for `ls -la`: as Claude Code saves
 * `Bash(git status:*)`. Only for one plain command known in full, with no glob character in its
 * words; a line of several (`a && b`) gets no rule, so `A` is not offered for it.
 */
function commandRule(raw: string): string | undefined {
  let command: unknown;
  try {
    command = (JSON.parse(raw) as { command?: unknown }).command;
  } catch {
    return undefined;
  }
  if (typeof command !== "string") return undefined;
  const analysis = analyzeCommand(command);
  const [only, ...more] = analysis.segments;
  if (!analysis.parsed || !only || more.length > 0) return undefined;
  if (only.argv.includes(null) || only.assigns > 0 || only.writes.length > 0) return undefined;
  const [program, second] = only.argv as string[];
  // One word each, as the rule's prefix is matched on the words joined by single spaces.
  if (!program || !/^[^\s*()]+$/.test(program)) return undefined;
  const prefix = second && /^[a-z][a-z0-9-]*$/.test(second) ? `${program} ${second}` : program;
  return `shell(${prefix} *)`;
}

/** troupe.yaml's text with `rule` added to `permissions.allow` (the same text when it is there). */
export function withAllowRule(text: string, rule: string): string {
  const doc = parseDocument(text);
  if (doc.errors.length > 0) throw new UserError(`troupe.yaml does not parse: ${doc.errors[0]?.message}`);
  const allow = doc.getIn(["permissions", "allow"]);
  if (isSeq(allow)) {
    if (allow.items.some((item) => String((item as { value?: unknown }).value ?? item) === rule)) return text;
    doc.addIn(["permissions", "allow"], rule);
  } else {
    if (doc.contents !== null && !isMap(doc.contents))
      throw new UserError("troupe.yaml is not a mapping of settings: the rule was not saved");
    doc.setIn(["permissions", "allow"], doc.createNode([rule]));
  }
  const next = doc.toString();
  const check = new YamlFile("troupe.yaml", next);
  check.validate(troupeConfigSchema);
  if (check.problems.length > 0)
    throw new UserError(`troupe.yaml would not load with "${rule}": ${check.problems[0]?.message}`);
  return next;
}

import { existsSync, readdirSync, realpathSync, statSync } from "node:fs";
import { basename, dirname, extname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { realPathOrUndefined } from "../util/paths.js";
import { agentSchema } from "./agent-schema.js";
import { checkAgents } from "./check-agents.js";
import { withEnv } from "./env.js";
import { type InlineConfig, inlineConfig } from "./inline.js";
import { linkOnTheWay } from "./linked-path.js";
import type { LoadedAgent, LoadedConfig } from "./loaded.js";
import { mcpServersOf } from "./mcp-servers-from.js";
import { ConfigError, type ConfigProblem } from "./problems.js";
import { type TroupeConfig, troupeConfigSchema } from "./schema.js";
import { assertTrusted } from "./trusted-configs.js";
import { YamlFile } from "./yaml-file.js";

export type { LoadedAgent, LoadedConfig };

export const CONFIG_FILE = "troupe.yaml";

/** The config/ shipped with Troupe: used when neither --config, TROUPE_CONFIG nor ./config is there. */
export const BUILTIN_CONFIG_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "../../config");

export interface LoadOptions {
  /** A config directory, or the path of its troupe.yaml. */
  config?: string | undefined;
  /** Settings and agents given in code, in place of a config directory. */
  inline?: InlineConfig;
  /** Agent files or directories to check along with the config's own agents. */
  extraAgents?: string[];
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /**
   * A config dir found from the working directory is used only when the user trusted it
   * (`troupe trust`); `read` reads one all the same, for a caller that starts nothing from it
   * (`agents validate`, `troupe trust` itself).
   */
  untrusted?: "refuse" | "read";
  /** The NATS URL chosen on the command line (`--nats`): over NATS_URL and troupe.yaml's. */
  natsUrl?: string | undefined;
}

/** Which config a command runs on, as its global options say (`--config`, `--nats`). */
export type ConfigChoice = Pick<LoadOptions, "config" | "natsUrl">;

/**
 * The config every runtime runs on, from a config directory or given inline, with the environment
 * applied over its settings the same way for both (`withEnv`).
 */
export function loadConfig(options: LoadOptions = {}): LoadedConfig {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const loaded = options.inline ? inlineConfig(options.inline, cwd) : loadConfigDir(options, env, cwd);
  const troupe = withEnv(loaded.troupe, env);
  if (options.natsUrl) troupe.nats = { ...troupe.nats, url: options.natsUrl };
  return {
    ...loaded,
    troupe,
    natsUrlChosen: Boolean(options.natsUrl) || Boolean(env.NATS_URL) || loaded.natsUrlChosen === true,
  };
}

/**
 * Loads troupe.yaml and every agent, checks each file and then the agents together (names,
 * subagent references, tools). Throws `ConfigError` with every problem found; nothing half-loaded
 * is ever returned.
 */
function loadConfigDir(options: LoadOptions, env: NodeJS.ProcessEnv, cwd: string): LoadedConfig {
  const problems: ConfigProblem[] = [];
  const given = options.config ?? env.TROUPE_CONFIG;
  const dir = resolveConfigDir(given, cwd);
  // Named by the user (--config, TROUPE_CONFIG) or Troupe's own: theirs to vouch for. Found here:
  // a workspace's, which an agent may have written.
  if (!given && options.untrusted !== "read" && !isTroupesOwn(dir)) assertTrusted(dir, cwd, env);
  const configPath = join(dir, CONFIG_FILE);

  let troupe: TroupeConfig | undefined;
  let configFile: YamlFile | undefined;
  if (existsSync(configPath)) {
    configFile = YamlFile.read(configPath, cwd);
    troupe = configFile.validate(troupeConfigSchema);
    problems.push(...configFile.problems);
  } else {
    troupe = troupeConfigSchema.parse({});
  }
  if (troupe) troupe = { ...troupe, mcpServers: mcpServersOf(troupe, configFile, dir, cwd, problems) };
  // With troupe.yaml in error, each agent file is still checked on its own, so that every problem is
  // told in one pass; the checks across files (tools, servers, subagents) would only repeat its.
  const settingsBroken = problems.length > 0;
  const settings = troupe ?? troupeConfigSchema.parse({});

  const agentFiles = new Map<string, string>();
  const agentsDir = resolve(dir, settings.agentsDir);
  if (existsSync(agentsDir))
    for (const file of yamlFilesIn(agentsDir)) agentFiles.set(realpathSync(file), file);
  for (const extra of options.extraAgents ?? []) {
    const path = resolve(cwd, extra);
    if (!existsSync(path))
      throw new ConfigError([
        { file: extra, line: 1, col: 1, path: "", message: "no such file or directory" },
      ]);
    const files = statSync(path).isDirectory() ? yamlFilesIn(path) : [path];
    for (const file of files) agentFiles.set(realpathSync(file), file);
  }

  const loaded: LoadedAgent[] = [];
  // A file that did not load is most likely the agent its name says (finder.yaml: finder), or the
  // one its `name:` says: others naming it are not told it is missing as well.
  const unloaded = new Set<string>();
  for (const path of agentFiles.values()) {
    const file = YamlFile.read(path, cwd);
    const definition = file.validate(agentSchema);
    problems.push(...file.problems);
    if (definition) loaded.push({ definition, file });
    else {
      unloaded.add(basename(path).replace(/\.ya?ml$/, ""));
      const named = (file.data as { name?: unknown } | undefined)?.name;
      if (typeof named === "string") unloaded.add(named);
    }
  }
  if (settingsBroken || !troupe) throw new ConfigError(problems);
  const agents = checkAgents(loaded, troupe, configFile, problems, unloaded);
  // A tool module runs at start: protected by its real path, it must be named by it too.
  for (const { definition, file } of loaded)
    definition.toolModules.forEach((path, i) => {
      const link = linkOnTheWay(dir, path);
      if (link)
        problems.push(
          file.problem(
            ["toolModules", i],
            `${path} goes through the symbolic link ${link}: name the file it leads to, which troupe protects, so that no command can swap the link`,
          ),
        );
    });
  if (problems.length > 0) throw new ConfigError(problems);
  const natsUrlChosen = (configFile?.data as { nats?: { url?: unknown } })?.nats?.url !== undefined;
  return { dir, file: configFile ? configPath : undefined, troupe, agents, natsUrlChosen };
}

/** Whether `dir` is the config shipped with Troupe (by real path: a checkout's ./config is it). */
export function isTroupesOwn(dir: string): boolean {
  return realPathOrUndefined(dir) === realPathOrUndefined(BUILTIN_CONFIG_DIR);
}

/** --config / TROUPE_CONFIG (a dir or its troupe.yaml), else ./config, else the built-in config. */
export function resolveConfigDir(given: string | undefined, cwd: string): string {
  if (given) {
    const path = resolve(cwd, given);
    if (!existsSync(path)) {
      throw new ConfigError([
        {
          file: given,
          line: 1,
          col: 1,
          path: "",
          message: "config path does not exist; pass a directory holding troupe.yaml",
        },
      ]);
    }
    if (!statSync(path).isDirectory()) return dirname(path);
    // A directory with nothing of a config in it is most likely not the one meant (the project
    // itself, or its parent): said, rather than run with the defaults.
    if (!existsSync(join(path, CONFIG_FILE)) && !existsSync(join(path, "agents")))
      throw new ConfigError([
        {
          file: given,
          line: 1,
          col: 1,
          path: "",
          message: `no ${CONFIG_FILE} and no agents/ in this directory: pass the config dir that holds them (docs/configuration.md shows one)`,
        },
      ]);
    return path;
  }
  const local = resolve(cwd, "config");
  return existsSync(join(local, CONFIG_FILE)) ? local : BUILTIN_CONFIG_DIR;
}

function yamlFilesIn(dir: string): string[] {
  return readdirSync(dir)
    .filter((name) => [".yaml", ".yml"].includes(extname(name)))
    .sort()
    .map((name) => join(dir, name));
}

import { stringify } from "yaml";
import { type AgentSettings, agentSchema } from "./agent-schema.js";
import { checkAgents } from "./check-agents.js";
import type { LoadedAgent, LoadedConfig } from "./loaded.js";
import { ConfigError, type ConfigProblem } from "./problems.js";
import { type TroupeSettings, troupeConfigSchema } from "./schema.js";
import { YamlFile } from "./yaml-file.js";

/** Settings and agents given in code (the library), as troupe.yaml and agents/*.yaml would hold them. */
export interface InlineConfig {
  settings?: TroupeSettings;
  agents: AgentSettings[];
  /** The names of the tools given in code: an agent may list them beside the built-in ones. */
  codeTools?: readonly string[];
}

/**
 * The config they make, with `cwd` for its directory (where `toolModules` and `skillsDir` are found),
 * checked as a config directory is: each problem a line naming `settings` or `agents[i]` and the key
 * (with a did-you-mean), every problem at once, thrown as one `ConfigError`.
 */
export function inlineConfig(inline: InlineConfig, cwd: string): LoadedConfig {
  const problems: ConfigProblem[] = [];
  const source = (name: string, value: unknown) => new YamlFile(name, stringify(value ?? {}), cwd);
  const settingsFile = source("settings", inline.settings ?? {});
  const troupe = settingsFile.validate(troupeConfigSchema);
  problems.push(...settingsFile.problems);
  const loaded: LoadedAgent[] = [];
  inline.agents.forEach((raw, i) => {
    const file = source(`agents[${i}]`, raw);
    const definition = file.validate(agentSchema);
    problems.push(...file.problems);
    if (definition) loaded.push({ definition, file });
  });
  if (!troupe || problems.length > 0) throw new ConfigError(problems);
  const agents = checkAgents(loaded, troupe, settingsFile, problems, new Set(), new Set(inline.codeTools));
  if (problems.length > 0) throw new ConfigError(problems);
  return {
    dir: cwd,
    file: undefined,
    troupe,
    agents,
    natsUrlChosen: inline.settings?.nats?.url !== undefined,
  };
}

import type { LoadedConfig } from "./loaded.js";
import { type AgentSettings, agentSchema, type TroupeSettings, troupeConfigSchema } from "./schema.js";
import { YamlFile } from "./yaml-file.js";

/** Settings and agents given in code (the library), as troupe.yaml and agents/*.yaml would hold them. */
export interface InlineConfig {
  settings?: TroupeSettings;
  agents: AgentSettings[];
}

/** The config they make, with `cwd` for its directory (where `toolModules` and `skillsDir` are found). */
export function inlineConfig(inline: InlineConfig, cwd: string): LoadedConfig {
  const settings = inline.settings ?? {};
  return {
    dir: cwd,
    file: undefined,
    troupe: troupeConfigSchema.parse(settings),
    agents: new Map(
      inline.agents.map((raw) => {
        const definition = agentSchema.parse(raw);
        return [definition.name, { definition, file: new YamlFile(`${definition.name}.yaml`, "") }];
      }),
    ),
    natsUrlChosen: settings.nats?.url !== undefined,
  };
}

import { agentSchema } from "../../src/config/agent-schema.js";
import type { LoadedConfig } from "../../src/config/load.js";
import { troupeConfigSchema } from "../../src/config/schema.js";
import { YamlFile } from "../../src/config/yaml-file.js";

/** A loaded config built in memory: troupe.yaml settings and agent definitions as plain objects. */
export function testConfig(
  troupe: Record<string, unknown>,
  agents: Array<Record<string, unknown>>,
): LoadedConfig {
  return {
    dir: "/nonexistent",
    file: undefined,
    troupe: troupeConfigSchema.parse(troupe),
    agents: new Map(
      agents.map((raw) => {
        const definition = agentSchema.parse(raw);
        return [definition.name, { definition, file: new YamlFile(`${definition.name}.yaml`, "") }];
      }),
    ),
  };
}

/** A SKILL.md: front matter with its name and description, then its body. */
export const skillFile = (name: string, description: string, body: string) =>
  `---\nname: ${name}\ndescription: ${description}\n---\n${body}\n`;

import type { AgentDefinition } from "./agent-schema.js";
import type { TroupeConfig } from "./schema.js";
import type { YamlFile } from "./yaml-file.js";

/** An agent definition and the file it came from (for problems reported at file:line:col). */
export interface LoadedAgent {
  definition: AgentDefinition;
  file: YamlFile;
}

/** troupe.yaml and the agents, checked: what every command and the runtime start from. */
export interface LoadedConfig {
  /** The directory the config came from. */
  dir: string;
  /** troupe.yaml, when there was one (otherwise every setting is its default). */
  file: string | undefined;
  troupe: TroupeConfig;
  agents: Map<string, LoadedAgent>;
  /** Whether NATS's URL was chosen (troupe.yaml's nats.url or NATS_URL), not the built-in default. */
  natsUrlChosen?: boolean;
}

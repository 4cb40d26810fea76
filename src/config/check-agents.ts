import { didYouMean } from "../util/did-you-mean.js";
import type { LoadedAgent } from "./loaded.js";
import type { ConfigProblem } from "./problems.js";
import type { TroupeConfig } from "./schema.js";
import {
  BUILTIN_TOOL_EFFECTS,
  builtinEffect,
  MCP_SEPARATOR,
  SANDBOXED_TOOLS,
  splitMcpToolName,
  type ToolEffect,
} from "./tool-catalog.js";
import type { YamlFile } from "./yaml-file.js";

/**
 * The checks that need every agent at once: unique names, subagent references that exist and do
 * not loop, tools that something provides, and subagents that only read. Problems are appended.
 */
export function checkAgents(
  loaded: LoadedAgent[],
  config: TroupeConfig,
  configFile: YamlFile | undefined,
  problems: ConfigProblem[],
  /** Agents whose files did not load (their problems are reported): no one is told they are missing. */
  unloaded: ReadonlySet<string> = new Set(),
  /** Tools given in code (the library's `tools`): listed as the built-in ones are. */
  codeTools: ReadonlySet<string> = new Set(),
): Map<string, LoadedAgent> {
  const agents = new Map<string, LoadedAgent>();
  for (const agent of loaded) {
    const { name } = agent.definition;
    const first = agents.get(name);
    if (first) {
      const also = first.file.where(["name"]);
      problems.push(
        agent.file.problem(["name"], `duplicate agent name "${name}" (also at ${also}); rename one`),
      );
    } else {
      agents.set(name, agent);
    }
  }

  const subagentNames = new Set<string>();
  for (const { definition, file } of agents.values()) {
    definition.subagents.forEach((child, i) => {
      if (agents.has(child)) subagentNames.add(child);
      else if (!unloaded.has(child))
        problems.push(
          file.problem(["subagents", i], `unknown agent "${child}"${didYouMean(child, agents.keys())}`),
        );
    });
  }
  problems.push(...findCycles(agents));

  for (const agent of agents.values()) {
    checkTools(agent, config, subagentNames.has(agent.definition.name), problems, codeTools);
    checkToolChoice(agent, problems);
  }

  if (
    config.defaultAgent !== undefined &&
    !agents.has(config.defaultAgent) &&
    !unloaded.has(config.defaultAgent) &&
    configFile
  ) {
    problems.push(
      configFile.problem(
        ["defaultAgent"],
        `unknown agent "${config.defaultAgent}"${didYouMean(config.defaultAgent, agents.keys())}`,
      ),
    );
  }
  return agents;
}

function checkTools(
  agent: LoadedAgent,
  config: TroupeConfig,
  isSubagent: boolean,
  problems: ConfigProblem[],
  codeTools: ReadonlySet<string>,
): void {
  const { definition, file } = agent;
  if (
    definition.sandbox !== undefined &&
    definition.sandbox !== "read-only" &&
    (definition.readOnly || isSubagent)
  ) {
    const why = definition.readOnly ? "a read-only agent" : "a subagent";
    problems.push(
      file.problem(
        ["sandbox"],
        `${why}'s commands always run in the read-only sandbox; remove "sandbox: ${definition.sandbox}" or set it to read-only`,
      ),
    );
  }
  const servers = Object.keys(config.mcpServers);
  const builtins = Object.keys(BUILTIN_TOOL_EFFECTS);
  definition.tools.forEach((tool, i) => {
    const at = ["tools", i];
    // A tool given in code comes with its effect declared in code, and is held to it where it runs.
    if (codeTools.has(tool)) return;
    const effect = builtinEffect(tool);
    if (effect !== undefined) {
      if (effect !== "read" && !SANDBOXED_TOOLS.has(tool) && (definition.readOnly || isSubagent)) {
        const why = definition.readOnly ? "a read-only agent" : "a subagent (every subagent is read-only)";
        problems.push(
          file.problem(
            at,
            `"${tool}" ${effect === "write" ? "writes" : "executes"}; ${why} may list read tools only: ${readTools().join(", ")}, and ${[...SANDBOXED_TOOLS].join(", ")} (run in the read-only sandbox)`,
          ),
        );
      }
      return;
    }
    const mcp = splitMcpToolName(tool);
    if (mcp) {
      if (!(mcp.server in config.mcpServers)) {
        const known = servers.length
          ? `configured: ${servers.join(", ")}`
          : "none is configured under mcpServers in troupe.yaml";
        problems.push(
          file.problem(
            at,
            `unknown MCP server "${mcp.server}" in "${tool}"${didYouMean(mcp.server, servers)} (${known})`,
          ),
        );
      }
      return;
    }
    const candidates = [...builtins, ...codeTools, ...servers.map((server) => `${server}${MCP_SEPARATOR}*`)];
    const hint =
      didYouMean(tool, candidates) ||
      (/ - /.test(tool)
        ? " (one list item indented under another reads as one name: put each `- item` at the same indentation)"
        : `; the tools are ${candidates.join(", ")}`);
    problems.push(file.problem(at, `unknown tool "${tool}"${hint}`));
  });
}

/** The choices of `toolChoice` that are not a tool's name. */
const TOOL_CHOICE_KEYWORDS = ["auto", "required", "none"];

/**
 * An agent's `toolChoice` is a keyword or one of its tools: one it lists (an MCP tool under a
 * `server__*` it lists too), or a subagent's `subagent_<name>`.
 */
function checkToolChoice(agent: LoadedAgent, problems: ConfigProblem[]): void {
  const { definition, file } = agent;
  const choice = definition.toolChoice;
  if (choice === undefined || TOOL_CHOICE_KEYWORDS.includes(choice)) return;
  const tools = [
    ...definition.tools.filter((tool) => !tool.endsWith("*")),
    ...definition.subagents.map((child) => `subagent_${child}`),
  ];
  const wildcards = definition.tools.filter((tool) => tool.endsWith("*")).map((tool) => tool.slice(0, -1));
  if (tools.includes(choice) || wildcards.some((prefix) => choice.startsWith(prefix))) return;
  const candidates = [...TOOL_CHOICE_KEYWORDS, ...tools];
  const hint = didYouMean(choice, candidates) || `; it is one of ${candidates.join(", ")}`;
  problems.push(
    file.problem(["toolChoice"], `toolChoice "${choice}" is not one of this agent's tools${hint}`),
  );
}

/**
 * What only a started server can tell: an MCP tool that a read-only agent or a subagent names, and
 * that may change things (its server is not marked `readOnly`, nor the tool `readOnlyHint`). Such a
 * tool is never offered to that agent, and a call of it is refused; this says so before a run.
 */
export function checkMcpToolEffects(
  agents: ReadonlyMap<string, LoadedAgent>,
  servers: ReadonlyMap<string, ReadonlyArray<{ name: string; effect: ToolEffect }>>,
): ConfigProblem[] {
  const subagents = new Set([...agents.values()].flatMap(({ definition }) => definition.subagents));
  const problems: ConfigProblem[] = [];
  for (const { definition, file } of agents.values()) {
    if (!definition.readOnly && !subagents.has(definition.name)) continue;
    const why = definition.readOnly ? "a read-only agent" : "a subagent (every subagent is read-only)";
    definition.tools.forEach((name, i) => {
      const mcp = splitMcpToolName(name);
      const tool = mcp && servers.get(mcp.server)?.find((offered) => offered.name === name);
      if (tool && tool.effect !== "read")
        problems.push(
          file.problem(
            ["tools", i],
            `"${name}" may change things (the server "${mcp.server}" does not mark it readOnlyHint, and its entry in mcpServers lacks readOnly: true); ${why} is never given it: remove it, or mark the server readOnly if it only reads`,
          ),
        );
    });
  }
  return problems;
}

function readTools(): string[] {
  return Object.entries(BUILTIN_TOOL_EFFECTS)
    .filter(([, effect]) => effect === "read")
    .map(([name]) => name);
}

/** Each cycle of subagent references once, reported at the reference that closes it. */
function findCycles(agents: Map<string, LoadedAgent>): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const state = new Map<string, "visiting" | "done">();
  const stack: string[] = [];
  const visit = (name: string) => {
    state.set(name, "visiting");
    stack.push(name);
    const agent = agents.get(name);
    agent?.definition.subagents.forEach((child, i) => {
      if (!agents.has(child)) return;
      if (state.get(child) === "visiting") {
        const cycle = [...stack.slice(stack.indexOf(child)), child].join(" → ");
        problems.push(
          agent.file.problem(
            ["subagents", i],
            `subagent cycle: ${cycle}; an agent cannot delegate to itself`,
          ),
        );
      } else if (!state.has(child)) {
        visit(child);
      }
    });
    stack.pop();
    state.set(name, "done");
  };
  for (const name of agents.keys()) if (!state.has(name)) visit(name);
  return problems;
}

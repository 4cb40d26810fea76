import { resolve } from "node:path";
import { answersNats, findNatsServer, NATS_INSTALL_HINT } from "../bus/embedded-nats.js";
import type { LoadedConfig } from "../config/load.js";
import { detectSandbox, type Sandbox } from "../sandbox/sandbox.js";
import { mcpConfinement, sandboxScope } from "../sandbox/scope.js";
import type { ServerProbe } from "../tools/mcp/mcp-probe.js";
import { visible, visibleLine } from "../util/visible.js";

interface Check {
  name: string;
  ok: boolean;
  says: string;
}

/**
 * What this machine gives Troupe, one line each: the command sandbox, NATS, the config, and each MCP
 * server (started once). Exit 0 when everything is there, 1 when something needs doing (each such
 * line says what).
 */
export async function runDoctor(config: LoadedConfig): Promise<number> {
  const checks: Check[] = [];
  checks.push({ name: "node", ok: true, says: process.version });
  const agents = [...config.agents.keys()];
  checks.push({
    name: "config",
    ok: true,
    says: `${config.dir} (${agents.length} agent${agents.length === 1 ? "" : "s"}: ${agents.join(", ")})`,
  });
  const sandbox = detectSandbox();
  checks.push(
    sandbox.unavailable
      ? {
          name: "sandbox",
          ok: false,
          says: `${sandbox.unavailable}; until then every shell command is asked for (denied under never-ask)`,
        }
      : { name: "sandbox", ok: true, says: `${sandbox.description}: commands run confined` },
  );
  const url = config.troupe.nats.url.split(",")[0]?.trim() ?? "";
  const { hostname, port } = new URL(url.includes("://") ? url : `nats://${url}`);
  const natsUp = await answersNats(hostname || "127.0.0.1", Number(port || 4222));
  const server = findNatsServer();
  checks.push(
    natsUp
      ? { name: "nats", ok: true, says: `${url} answers` }
      : server && config.troupe.nats.embedded
        ? { name: "nats", ok: true, says: `nothing at ${url}; the daemon will start ${server}` }
        : {
            name: "nats",
            ok: false,
            says: `nothing at ${url}, and no nats-server to start: ${NATS_INSTALL_HINT}`,
          },
  );
  for (const probe of await checkServers(config, sandbox))
    checks.push({ name: `mcp ${probe.server}`, ok: probe.ok, says: probe.says });
  // What a server said, a config dir's name: shown, never obeyed.
  for (const check of checks) check.name = visibleLine(check.name);
  const width = Math.max(...checks.map((check) => check.name.length));
  for (const check of checks)
    process.stdout.write(
      `${check.ok ? "ok  " : "fix "} ${check.name.padEnd(width)}  ${visible(check.says)}\n`,
    );
  return checks.every((check) => check.ok) ? 0 : 1;
}

/**
 * Starts each configured MCP server once (a sandboxed one in the sandbox, as a run would) and says
 * what it offers or why it did not start.
 */
export async function checkServers(
  config: LoadedConfig,
  sandbox: Sandbox = detectSandbox(),
  env: NodeJS.ProcessEnv = process.env,
): Promise<ServerProbe[]> {
  if (Object.keys(config.troupe.mcpServers).length === 0) return [];
  const { probeServers } = await import("../tools/mcp/mcp-probe.js");
  const { launchScope } = await import("../tools/mcp/mcp-launch.js");
  const workspace = resolve(config.troupe.workspace);
  const scope = sandboxScope(config, workspace, env);
  return probeServers(config.troupe.mcpServers, {
    launch: launchScope(config, workspace, env),
    confine: mcpConfinement(sandbox, scope, config.troupe.sandbox.network),
  });
}

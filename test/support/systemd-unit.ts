import { readFileSync } from "node:fs";

/** What a unit of deploy/systemd starts: its command, environment and working directory. */
export interface UnitCommand {
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd: string | undefined;
}

/**
 * Reads the `[Service]` of a systemd unit as the multi-host tests run it: `ExecStart` split on spaces
 * (the units quote nothing), each `Environment=` (later ones win, as a drop-in's would), and
 * `WorkingDirectory`. `moves` maps a path prefix of the unit (`/etc/troupe`) to where the test keeps
 * it, in every value; `set` puts what a drop-in would set (`NATS_NODE`).
 */
export function unitCommand(
  file: string,
  moves: Record<string, string> = {},
  set: Record<string, string> = {},
): UnitCommand {
  const move = (value: string) =>
    Object.entries(moves).reduce(
      (moved, [from, to]) =>
        moved === from || moved.startsWith(`${from}/`) ? to + moved.slice(from.length) : moved,
      value,
    );
  let section = "";
  let exec: string[] | undefined;
  let cwd: string | undefined;
  const env: Record<string, string> = {};
  for (const raw of readFileSync(file, "utf8").split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    if (line.startsWith("[")) {
      section = line;
      continue;
    }
    if (section !== "[Service]") continue;
    const eq = line.indexOf("=");
    const key = line.slice(0, eq);
    const value = line.slice(eq + 1);
    if (key === "ExecStart") exec = value.split(/\s+/).map(move);
    else if (key === "WorkingDirectory") cwd = move(value);
    else if (key === "Environment") {
      const at = value.indexOf("=");
      env[value.slice(0, at)] = move(value.slice(at + 1));
    }
  }
  const [command, ...args] = exec ?? [];
  if (!command) throw new Error(`${file} has no ExecStart`);
  return { command: move(command), args, env: { ...env, ...set }, cwd };
}

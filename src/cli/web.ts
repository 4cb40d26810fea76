import { readFileSync } from "node:fs";
import { type ConfigChoice, loadConfig } from "../config/load.js";
import { dataDir } from "../config/paths.js";
import { webLoginFile } from "../web/web-login.js";

/** `troupe web`: prints a login URL of the running daemon's web console, from its data dir. */
export function printWebLogin(where: ConfigChoice): number {
  const config = loadConfig(where);
  const file = webLoginFile(dataDir(config.troupe.dataDir));
  let url: string;
  try {
    url = readFileSync(file, "utf8").trim();
  } catch {
    process.stderr.write(
      `troupe: no web console is running for this data dir (${file} is missing): start one with troupe daemon --web\n`,
    );
    return 1;
  }
  process.stdout.write(`${url}\n`);
  return 0;
}

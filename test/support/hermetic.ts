import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";

/*
 * Every test file runs with a HOME, XDG dirs and data dir of its own: nothing a test does reads the
 * machine's ~/.bashrc, ~/.gitconfig or data directories, or leaves anything there. Processes the
 * tests spawn (the CLI, hooks, MCP servers) inherit it.
 */
const home = mkdtempSync(join(tmpdir(), "troupe-test-home-"));
process.env.HOME = home;
process.env.XDG_CONFIG_HOME = join(home, ".config");
process.env.XDG_DATA_HOME = join(home, ".local", "share");
process.env.XDG_CACHE_HOME = join(home, ".cache");
process.env.TROUPE_DATA_DIR = join(home, "troupe-data");
process.env.GIT_CONFIG_NOSYSTEM = "1";
for (const name of ["TROUPE_CONFIG", "BASH_ENV", "ENV"]) delete process.env[name];
afterAll(() => rmSync(home, { recursive: true, force: true }));

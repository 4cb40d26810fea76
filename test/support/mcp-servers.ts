import { type ChildProcess, spawn } from "node:child_process";
import { createRequire } from "node:module";
import { createConnection } from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { exited } from "./cli.js";
import { waitFor } from "./wait.js";

const require = createRequire(import.meta.url);
const bin = (pkg: string) => join(dirname(require.resolve(`${pkg}/package.json`)), "dist", "index.js");

/** The entry points of the real MCP servers the tests run (devDependencies), and the project's fixture. */
export const FILESYSTEM = bin("@modelcontextprotocol/server-filesystem");
export const EVERYTHING = bin("@modelcontextprotocol/server-everything");
export const FIXTURE = resolve(dirname(fileURLToPath(import.meta.url)), "mcp-fixture-server.mjs");

/** server-everything over HTTP on `port`: `streamableHttp` serves `/mcp`, `sse` (the legacy transport) `/sse`. */
export interface HttpEverything {
  child: ChildProcess;
  /** Kills it with a real signal, by pid, and waits until it is gone. */
  kill(): Promise<void>;
}

export async function startEverything(mode: "streamableHttp" | "sse", port: number): Promise<HttpEverything> {
  const child = spawn(process.execPath, [EVERYTHING, mode], {
    env: { ...process.env, PORT: String(port) },
    stdio: "ignore",
  });
  await waitFor(`server-everything (${mode}) on port ${port}`, () => answers(port), 15_000);
  return {
    child,
    async kill() {
      const gone = exited(child);
      process.kill(child.pid as number, "SIGKILL");
      await gone;
    },
  };
}

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

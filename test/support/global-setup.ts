import { accessSync, constants, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import type { TestProject } from "vitest/node";
import { findNatsServer, NATS_INSTALL_HINT, NatsServerProcess } from "../../src/bus/embedded-nats.js";
import { detectSandbox } from "../../src/sandbox/sandbox.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** A JetStream-enabled NATS server the integration tests share (unique prefixes keep them apart). */
    natsUrl: string;
  }
}

/**
 * Finds a JetStream-enabled NATS for the tests: NATS_URL if set, else 127.0.0.1:4222 if it answers
 * with JetStream, else a nats-server started here from PATH (stopped at the end).
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // The safety tests run commands under the real sandbox: say at once, in one line, when it is missing.
  const sandbox = detectSandbox();
  if (sandbox.unavailable) throw new Error(`no command sandbox for the tests: ${sandbox.unavailable}`);
  const tools = {
    git: "git",
    rg: "ripgrep",
    openssl: "openssl",
    tmux: "tmux",
    script: "util-linux",
    ip: "iproute2",
    chromium: "chromium",
  };
  const missing = Object.entries(tools).filter(([command]) => !onPath(command));
  if (missing.length > 0)
    throw new Error(
      `the tests need ${missing.map(([command]) => command).join(", ")}: apt-get install ${missing.map(([, pkg]) => pkg).join(" ")}`,
    );
  const candidates = process.env.NATS_URL ? [process.env.NATS_URL] : ["nats://127.0.0.1:4222"];
  for (const url of candidates) {
    if (await hasJetStream(url)) {
      project.provide("natsUrl", url);
      return async () => {};
    }
  }
  if (process.env.NATS_URL)
    throw new Error(`NATS_URL=${process.env.NATS_URL} does not answer with JetStream on`);
  if (!findNatsServer()) throw new Error(`no NATS server for the tests: ${NATS_INSTALL_HINT}`);
  const storeDir = mkdtempSync(join(tmpdir(), "troupe-test-nats-"));
  const server = await NatsServerProcess.start({ storeDir });
  project.provide("natsUrl", server.url);
  return async () => {
    await server.stop();
    rmSync(storeDir, { recursive: true, force: true });
  };
}

async function hasJetStream(url: string): Promise<boolean> {
  try {
    const nc = await connect({ servers: url, timeout: 1000, maxReconnectAttempts: 0 });
    try {
      await (await jetstreamManager(nc)).getAccountInfo();
      return true;
    } finally {
      await nc.close();
    }
  } catch {
    return false;
  }
}

function onPath(command: string): boolean {
  return (process.env.PATH ?? "").split(delimiter).some((dir) => {
    try {
      accessSync(join(dir, command), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

import { spawn } from "node:child_process";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { freePort } from "../../src/bus/embedded-nats.js";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { exited, TROUPE_BIN, tempTree, withoutNatsUrl } from "../support/cli.js";
import { waitFor } from "../support/wait.js";

/*
 * The daemon's own nats-server, as a person meets it in a terminal: Ctrl-C reaches the daemon's
 * process group, not the server's, so the daemon drains before it stops the server; a daemon killed
 * with SIGKILL leaves its server running, and the next daemon of the data dir adopts it.
 */
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function setup() {
  const port = await freePort();
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": `nats:\n  url: nats://127.0.0.1:${port}\n  prefix: ${uniquePrefix()}\n`,
    "config/agents/a.yaml": "name: a\ndescription: A.\n",
  });
  cleanups.push(dispose);
  const daemon = () => {
    // Its own process group, as a shell's job is: a signal to the group is what Ctrl-C sends.
    const child = spawn(process.execPath, [TROUPE_BIN, "--config", join(dir, "config"), "daemon"], {
      cwd: dir,
      env: withoutNatsUrl({ ...process.env, TROUPE_DATA_DIR: join(dir, ".data"), OPENAI_API_KEY: "" }),
      stdio: ["ignore", "ignore", "pipe"],
      detached: true,
    });
    let stderr = "";
    child.stderr?.on("data", (chunk) => (stderr += chunk));
    cleanups.push(() => void child.kill("SIGKILL"));
    return { child, exit: exited(child), stderr: () => stderr };
  };
  return { daemon };
}

const serverPid = (stderr: string) => Number(/nats-server pid (\d+)/.exec(stderr)?.[1]);

it("Ctrl-C stops the daemon first and then its nats-server, with no reconnect noise", async () => {
  const { daemon } = await setup();
  const first = daemon();
  await waitFor("ready", () => first.stderr().includes("troupe daemon ready"), 20_000);
  const pid = serverPid(first.stderr());
  cleanups.push(() => void (alive(pid) && process.kill(pid, "SIGKILL")));
  process.kill(-(first.child.pid as number), "SIGINT");
  expect(await first.exit).toBe(0);
  expect(first.stderr()).not.toMatch(/disconnected|reconnect/i);
  expect(alive(pid)).toBe(false);
});

it("a daemon killed with SIGKILL leaves its server running; the next one adopts it and stops it on exit", async () => {
  const { daemon } = await setup();
  const first = daemon();
  await waitFor("ready", () => first.stderr().includes("troupe daemon ready"), 20_000);
  const pid = serverPid(first.stderr());
  cleanups.push(() => void (alive(pid) && process.kill(pid, "SIGKILL")));
  first.child.kill("SIGKILL");
  await first.exit;
  await new Promise((resolve) => setTimeout(resolve, 500));
  expect(alive(pid)).toBe(true);
  const second = daemon();
  await waitFor("ready", () => second.stderr().includes("troupe daemon ready"), 20_000);
  expect(second.stderr()).toContain(`nats-server pid ${pid} adopted`);
  second.child.kill("SIGTERM");
  expect(await second.exit).toBe(0);
  await waitFor("the adopted server to stop", () => !alive(pid), 10_000);
});

it("a second daemon on the same data dir refuses in one line, naming the first, whose server it leaves alone", async () => {
  const { daemon } = await setup();
  const first = daemon();
  await waitFor("ready", () => first.stderr().includes("troupe daemon ready"), 20_000);
  const pid = serverPid(first.stderr());
  cleanups.push(() => void (alive(pid) && process.kill(pid, "SIGKILL")));
  const second = daemon();
  expect(await second.exit).toBe(2);
  expect(second.stderr().trim().split("\n")).toEqual([
    expect.stringContaining(`another troupe daemon (pid ${first.child.pid}) uses the data dir`),
  ]);
  expect(alive(pid)).toBe(true);
  // The first goes on as before, and stops its server itself.
  expect(first.child.exitCode).toBe(null);
  first.child.kill("SIGTERM");
  expect(await first.exit).toBe(0);
  expect(first.stderr()).not.toMatch(/reconnect/i);
  await waitFor("its server to stop", () => !alive(pid), 10_000);
  // Its record is gone with it: the next daemon starts.
  const third = daemon();
  await waitFor("ready", () => third.stderr().includes("troupe daemon ready"), 20_000);
  const thirdServer = serverPid(third.stderr());
  cleanups.push(() => void (alive(thirdServer) && process.kill(thirdServer, "SIGKILL")));
  third.child.kill("SIGTERM");
  expect(await third.exit).toBe(0);
  expect(alive(thirdServer)).toBe(false);
});

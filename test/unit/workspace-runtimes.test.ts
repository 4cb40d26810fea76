import { describe, expect, it } from "vitest";
import type { Runtime } from "../../src/actors/runtime.js";
import { RequestRefusedError } from "../../src/bus/bus.js";
import { WorkspaceRuntimes } from "../../src/daemon/workspace-runtimes.js";
import { silentLogger } from "../../src/log.js";

/** A runtime that says when it is closed, and whose close ends only when `finishClose` is called. */
interface Fake {
  workspace: string;
  closed: boolean;
  finishClose: () => void;
}

/** What `WorkspaceRuntimes` is given: runtimes it makes (in order) and the log of what happened. */
function maker() {
  const made: Fake[] = [];
  const happened: string[] = [];
  const make = async (workspace: string) => {
    happened.push(`open ${workspace}`);
    let finish = () => {};
    const done = new Promise<void>((resolve) => (finish = resolve));
    const fake: Fake = { workspace, closed: false, finishClose: finish };
    made.push(fake);
    const runtime = {
      workspace,
      close: async () => {
        happened.push(`closing ${workspace}`);
        fake.closed = true;
        await done;
        happened.push(`closed ${workspace}`);
      },
    };
    return runtime as unknown as Runtime;
  };
  return { made, happened, make };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("WorkspaceRuntimes", () => {
  it("makes one runtime per workspace for the runs there, and closes it when the last lease is let go", async () => {
    const { made, make } = maker();
    const runtimes = new WorkspaceRuntimes(make, 8, silentLogger);
    const [one, two] = await Promise.all([runtimes.lease("/ws/a"), runtimes.lease("/ws/a")]);
    expect(made).toHaveLength(1);
    expect(one.runtime).toBe(two.runtime);
    one.release();
    one.release(); // a second release of one lease counts once
    await settle();
    expect(made[0]?.closed).toBe(false);
    two.release();
    await settle();
    expect(made[0]?.closed).toBe(true);
    expect(runtimes.size).toBe(0);
  });

  it("a lease asked for while its workspace's runtime closes gets a new one, made once that close is over", async () => {
    const { made, happened, make } = maker();
    const runtimes = new WorkspaceRuntimes(make, 8, silentLogger);
    (await runtimes.lease("/ws/a")).release();
    await settle();
    const next = runtimes.lease("/ws/a");
    await settle();
    expect(happened).toEqual(["open /ws/a", "closing /ws/a"]);
    made[0]?.finishClose();
    const lease = await next;
    expect(happened).toEqual(["open /ws/a", "closing /ws/a", "closed /ws/a", "open /ws/a"]);
    expect(made).toHaveLength(2);
    expect(made[1]?.closed).toBe(false);
    lease.release();
  });

  it("a run that ends while another's lease waits for the runtime being made leaves it open for that one", async () => {
    let open = () => {};
    const opened = new Promise<void>((resolve) => (open = resolve));
    const { made, make } = maker();
    const runtimes = new WorkspaceRuntimes(
      async (workspace) => {
        await opened;
        return make(workspace);
      },
      8,
      silentLogger,
    );
    const first = runtimes.lease("/ws/a");
    const second = runtimes.lease("/ws/a");
    open();
    (await first).release();
    await settle();
    expect(made[0]?.closed).toBe(false);
    (await second).release();
    await settle();
    expect(made[0]?.closed).toBe(true);
  });

  it("refuses a workspace past the most at once, but not a run resumed as the daemon starts; a runtime not made is forgotten", async () => {
    const { make } = maker();
    const runtimes = new WorkspaceRuntimes(
      async (workspace) => {
        if (workspace === "/ws/bad") throw new Error("its MCP servers collide");
        return make(workspace);
      },
      2,
      silentLogger,
    );
    await expect(runtimes.lease("/ws/bad")).rejects.toThrow("its MCP servers collide");
    expect(runtimes.size).toBe(0);
    const a = await runtimes.lease("/ws/a");
    await runtimes.lease("/ws/b");
    await expect(runtimes.lease("/ws/c")).rejects.toThrow(RequestRefusedError);
    await expect(runtimes.lease("/ws/c")).rejects.toThrow(
      "the daemon has runs in 2 other workspaces, its most at once (daemon.maxWorkspaces in its troupe.yaml)",
    );
    // Leased again, an open one is no new workspace.
    (await runtimes.lease("/ws/a")).release();
    await runtimes.lease("/ws/c", true);
    expect(runtimes.size).toBe(3);
    a.release();
    expect(runtimes.size).toBe(2);
    await expect(runtimes.lease("/ws/bad")).rejects.toThrow(RequestRefusedError);
  });

  it("close closes every runtime, those still leased too, and waits for those being closed", async () => {
    const { made, make } = maker();
    const runtimes = new WorkspaceRuntimes(make, 8, silentLogger);
    (await runtimes.lease("/ws/a")).release();
    await runtimes.lease("/ws/b");
    await settle();
    let over = false;
    const closing = runtimes.close().then(() => (over = true));
    await settle();
    expect(made.map((m) => m.closed)).toEqual([true, true]);
    expect(over).toBe(false);
    for (const m of made) m.finishClose();
    await closing;
    expect(runtimes.size).toBe(0);
  });
});

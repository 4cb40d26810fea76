import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { decideCall } from "../../src/approvals/decide-call.js";
import type { SandboxSettings } from "../../src/approvals/policy.js";
import type { ApprovalPolicy } from "../../src/config/policy-schemas.js";
import { HostPlanner, SANDBOX_HOME } from "../../src/sandbox/host-plan.js";
import { beyond, bwrapArgs, type SandboxPlan } from "../../src/sandbox/plan.js";

/* The sandbox's policy as data: which calls run where, and what bubblewrap is told. Nothing spawns here. */

const available: SandboxSettings = { network: false, readOnly: false };
/** The decision on a shell call (without the rule that made it: test/unit/decide-call.test.ts holds those). */
const shell = (policy: ApprovalPolicy, settings: SandboxSettings, judgement = {}) => {
  const { rule: _, ...decision } = decideCall(
    { tool: "shell", effect: "execute", sandboxed: true, judgement: { safe: false, ...judgement } },
    { policy, sandbox: settings },
  );
  return decision;
};

describe("where a sandboxed call runs, by policy", () => {
  it.each([
    ["never-ask", "allow", "read-only"],
    ["auto-edit", "allow", "workspace-write"],
    ["ask", "ask", "workspace-write"],
    ["yolo", "allow", "off"],
  ] as const)("%s: %s, in %s, whatever the command's text", (policy, decision, mode) => {
    expect(shell(policy, available)).toEqual({ decision, sandbox: { mode, network: mode === "off" } });
    // Not known read-only, not even parsed: the sandbox, not the text, is the boundary.
    expect(shell(policy, available, { understood: false })).toMatchObject({ decision, sandbox: { mode } });
  });

  it("a dangerous command is denied under every policy but yolo", () => {
    for (const policy of ["never-ask", "auto-edit", "ask"] as const)
      expect(shell(policy, available, { dangerous: "rm -r of /" }).decision).toBe("deny");
    expect(shell("yolo", available, { dangerous: "rm -r of /" }).decision).toBe("allow");
  });

  it("a configured mode replaces the policy's; off is asked for unless yolo", () => {
    expect(shell("auto-edit", { ...available, mode: "read-only" })).toMatchObject({
      decision: "allow",
      sandbox: { mode: "read-only" },
    });
    expect(shell("yolo", { ...available, mode: "workspace-write" })).toMatchObject({
      decision: "allow",
      sandbox: { mode: "workspace-write", network: false },
    });
    expect(shell("auto-edit", { ...available, mode: "off" })).toMatchObject({
      decision: "ask",
      reason: "the sandbox is off",
    });
    expect(shell("never-ask", { ...available, mode: "off" }).decision).toBe("deny");
  });

  it("leaving the sandbox is its own approval: the network, or no sandbox at all", () => {
    expect(shell("auto-edit", available, { escalate: "network" })).toEqual({
      decision: "ask",
      reason: "it asks for network access",
      sandbox: { mode: "workspace-write", network: true },
    });
    expect(shell("auto-edit", available, { escalate: "unsandboxed" })).toEqual({
      decision: "ask",
      reason: "it asks to run outside the sandbox",
      sandbox: { mode: "off", network: true },
    });
    expect(shell("never-ask", available, { escalate: "network" }).decision).toBe("deny");
    expect(shell("yolo", { ...available, mode: "read-only" }, { escalate: "network" })).toMatchObject({
      decision: "allow",
      sandbox: { mode: "read-only", network: true },
    });
    // With the network configured on, asking for it changes nothing.
    expect(shell("auto-edit", { ...available, network: true }, { escalate: "network" })).toEqual({
      decision: "allow",
      sandbox: { mode: "workspace-write", network: true },
    });
  });

  it("without a sandbox, commands are asked for, never allowed unasked", () => {
    const none = { ...available, unavailable: "bubblewrap (bwrap) is not installed" };
    expect(shell("auto-edit", none)).toEqual({
      decision: "ask",
      reason: "it cannot be sandboxed: bubblewrap (bwrap) is not installed",
      sandbox: { mode: "off", network: true },
    });
    expect(shell("never-ask", none).decision).toBe("deny");
    expect(shell("ask", none).decision).toBe("ask");
    expect(shell("yolo", none).decision).toBe("allow");
  });

  it("a read-only agent's commands run read-only without asking, and never leave the sandbox", () => {
    const readOnly = { ...available, readOnly: true, mode: "workspace-write" as const };
    for (const policy of ["ask", "auto-edit", "never-ask", "yolo"] as const)
      expect(shell(policy, readOnly)).toEqual({
        decision: "allow",
        sandbox: { mode: "read-only", network: false },
      });
    // Its escalation is refused before anyone is asked, under every policy, with what to do instead.
    for (const policy of ["ask", "auto-edit", "never-ask", "yolo"] as const)
      for (const escalate of ["network", "unsandboxed"] as const)
        expect(shell(policy, readOnly, { escalate })).toMatchObject({
          decision: "deny",
          reason: expect.stringContaining("never leave the read-only sandbox"),
          next: expect.stringContaining("without escalate"),
        });
    expect(shell("ask", { ...readOnly, unavailable: "no bwrap" }).decision).toBe("deny");
    // The network configured on for every command is the sandbox's, not an escalation.
    expect(shell("ask", { ...readOnly, network: true })).toEqual({
      decision: "allow",
      sandbox: { mode: "read-only", network: true },
    });
  });
});

it("a confinement beyond a limit says what it would give too much of", () => {
  const limit = { mode: "read-only", network: false } as const;
  expect(beyond({ mode: "read-only", network: false }, limit)).toBeUndefined();
  expect(beyond({ mode: "read-only", network: true }, limit)).toBe("network access");
  expect(beyond({ mode: "workspace-write", network: false }, limit)).toBe("the workspace-write sandbox");
  expect(beyond({ mode: "off", network: false }, limit)).toBe("no sandbox");
  expect(beyond({ mode: "off", network: true }, { mode: "off", network: false })).toBe("network access");
  expect(beyond({ mode: "read-only", network: true }, { ...limit, network: true })).toBeUndefined();
});

describe("bubblewrap's arguments", () => {
  const plan = (over: Partial<SandboxPlan> = {}): SandboxPlan => ({
    mounts: [
      { kind: "read", path: "/usr" },
      { kind: "symlink", path: "/bin", target: "usr/bin" },
      { kind: "hide-file", path: "/etc/shadow" },
      { kind: "tmpfs", path: "/tmp" },
      { kind: "dir", path: SANDBOX_HOME },
      { kind: "write", path: "/ws" },
      { kind: "read", path: "/ws/.git" },
      { kind: "tmpfs", path: "/ws/.data", readOnly: true },
    ],
    network: false,
    cwd: "/ws",
    ...over,
  });

  it("makes every namespace, drops every capability, mounts in order, then the command", () => {
    expect(bwrapArgs(plan(), ["bash", "-c", "ls"])).toEqual([
      "--new-session",
      "--die-with-parent",
      "--unshare-user-try",
      "--unshare-ipc",
      "--unshare-pid",
      "--unshare-uts",
      "--unshare-cgroup-try",
      "--unshare-net",
      "--cap-drop",
      "ALL",
      "--ro-bind",
      "/usr",
      "/usr",
      "--symlink",
      "usr/bin",
      "/bin",
      "--ro-bind",
      "/dev/null",
      "/etc/shadow",
      "--tmpfs",
      "/tmp",
      "--dir",
      SANDBOX_HOME,
      "--bind",
      "/ws",
      "/ws",
      "--ro-bind",
      "/ws/.git",
      "/ws/.git",
      "--tmpfs",
      "/ws/.data",
      "--remount-ro",
      "/ws/.data",
      "--dev",
      "/dev",
      "--proc",
      "/proc",
      "--remount-ro",
      "/proc",
      "--remount-ro",
      "/",
      "--chdir",
      "/ws",
      "--",
      "bash",
      "-c",
      "ls",
    ]);
  });

  it("keeps the network namespace only when the plan allows the network", () => {
    expect(bwrapArgs(plan({ network: true }), ["true"])).not.toContain("--unshare-net");
  });

  it("reads a seccomp filter from the fd the plan names", () => {
    const args = bwrapArgs(plan({ seccompFd: 3 }), ["true"]);
    expect(args.slice(args.indexOf("--seccomp"), args.indexOf("--seccomp") + 2)).toEqual(["--seccomp", "3"]);
    expect(bwrapArgs(plan(), ["true"])).not.toContain("--seccomp");
  });
});

describe("the plan for this machine", () => {
  let root: string;
  let ws: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), "troupe-plan-"));
    ws = join(root, "ws");
    for (const dir of [
      "ws/.git",
      "ws/vendor/lib/.git",
      "ws/deep/a/b/.GIT",
      "ws/.troupe",
      "ws/config",
      "ws/.data",
    ])
      mkdirSync(join(root, dir), { recursive: true });
    mkdirSync(join(root, "ws/sub"), { recursive: true });
    writeFileSync(join(root, "ws/sub/.git"), "gitdir: ../.git/modules/sub\n");
    mkdirSync(join(root, "elsewhere"));
    symlinkSync(join(root, "elsewhere"), join(ws, "linked"));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it("workspace-write: the workspace writable, every .git and .troupe at any depth read-only, the config dir too, the data dir hidden", () => {
    const { mounts, cwd, network } = new HostPlanner().plan({
      mode: "workspace-write",
      network: false,
      workspace: ws,
      protectedDirs: [join(ws, "config")],
      hiddenDirs: [join(ws, ".data")],
    });
    expect(cwd).toBe(ws);
    expect(network).toBe(false);
    const after = mounts.slice(mounts.findIndex((m) => m.kind === "write" && m.path === ws) + 1);
    expect(
      after
        .filter((m) => m.kind === "read")
        .map((m) => m.path)
        .sort(),
    ).toEqual(
      [".git", ".troupe", "config", "deep/a/b/.GIT", "sub/.git", "vendor/lib/.git"].map((p) => join(ws, p)),
    );
    expect(after.at(-1)).toEqual({ kind: "tmpfs", path: join(ws, ".data"), readOnly: true });
    // The system is an allow-list: no home directory, no /root, no /var.
    const visible = mounts.filter((m) => m.kind === "read" || m.kind === "write").map((m) => m.path);
    expect(visible).toContain("/usr");
    expect(visible.some((path) => path === "/home" || path === "/root" || path === "/var")).toBe(false);
    expect(mounts).toContainEqual({ kind: "tmpfs", path: "/tmp" });
    expect(mounts).toContainEqual({ kind: "dir", path: SANDBOX_HOME });
  });

  it("pins every directory above a covered path, so no command can move a .git away with its parent", () => {
    const { mounts } = new HostPlanner().plan({
      mode: "workspace-write",
      network: false,
      workspace: ws,
      hiddenDirs: [join(ws, ".data")],
    });
    const pinned = mounts.filter((m) => m.kind === "write" && m.path !== ws).map((m) => m.path);
    expect([...pinned].sort()).toEqual(
      ["deep", "deep/a", "deep/a/b", "sub", "vendor", "vendor/lib"].map((p) => join(ws, p)),
    );
    expect(pinned.map((path) => path.length)).toEqual(
      pinned.map((path) => path.length).sort((a, b) => a - b),
    );
    // Pinned first, then what they hold: a later mount covers an earlier one.
    const last = Math.max(...pinned.map((path) => mounts.findIndex((m) => m.path === path)));
    expect(mounts.findIndex((m) => m.path === join(ws, "vendor/lib/.git"))).toBeGreaterThan(last);
  });

  it("hides a hidden dir wherever a mount shows it: under the workspace or under a read path", () => {
    mkdirSync(join(root, "tools/state"), { recursive: true });
    const { mounts } = new HostPlanner().plan({
      mode: "read-only",
      network: false,
      workspace: ws,
      readPaths: [join(root, "tools")],
      hiddenDirs: [join(root, "tools/state"), join(root, "elsewhere")],
    });
    expect(mounts).toContainEqual({ kind: "tmpfs", path: join(root, "tools/state"), readOnly: true });
    // A read path under the host's /tmp comes after the sandbox's own /tmp, or it would be covered.
    const at = (path: string) => mounts.findIndex((m) => m.path === path);
    expect(at(join(root, "tools"))).toBeGreaterThan(at("/tmp"));
    expect(() =>
      new HostPlanner().plan({ mode: "read-only", network: false, workspace: ws, readPaths: [homedir()] }),
    ).toThrow(/^sandbox\.readPaths: .* holds the home directory/);
    // Not mounted at all, so nothing to hide.
    expect(mounts.some((m) => m.path === join(root, "elsewhere"))).toBe(false);
  });

  it("refuses a workspace that holds the whole disk, the home directory or /tmp", () => {
    const planner = new HostPlanner();
    const plan = (workspace: string) => () => planner.plan({ mode: "read-only", network: false, workspace });
    expect(plan("/")).toThrow(/is the root directory/);
    expect(plan(homedir())).toThrow(/holds the home directory/);
    expect(plan(dirname(homedir()))).toThrow(/holds the home directory/);
    // (Here HOME is itself under /tmp: either reason refuses it.)
    expect(plan("/tmp")).toThrow(/the workspace \/tmp holds .*; run troupe in a project directory/);
  });

  it("read-only: the workspace read-only and nothing writable bound over it", () => {
    const { mounts } = new HostPlanner().plan({ mode: "read-only", network: false, workspace: ws });
    expect(mounts).toContainEqual({ kind: "read", path: ws });
    expect(mounts.some((m) => m.kind === "write")).toBe(false);
  });

  it("a .git made after the last plan is found by the next one", () => {
    const planner = new HostPlanner();
    const plan = () =>
      planner.plan({ mode: "workspace-write", network: false, workspace: ws }).mounts.map((m) => m.path);
    expect(plan()).not.toContain(join(ws, "vendor/new/.git"));
    mkdirSync(join(ws, "vendor/new/.git"), { recursive: true });
    expect(plan()).toContain(join(ws, "vendor/new/.git"));
  });
});

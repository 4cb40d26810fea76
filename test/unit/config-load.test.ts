import { afterEach, describe, expect, it } from "vitest";
import { BUILTIN_CONFIG_DIR, type LoadOptions, loadConfig } from "../../src/config/load.js";
import { dataDir } from "../../src/config/paths.js";
import { ConfigError } from "../../src/config/problems.js";
import { tempTree, trustConfig } from "../support/cli.js";

/**
 * Reads the config found in `cwd` as `agents validate` and `troupe trust` do, without asking whether
 * it is trusted: these tests are about what a config says; test/unit/config-trust.test.ts about trust.
 */
const readConfig = (options: LoadOptions) => loadConfig({ untrusted: "read", ...options });

const disposers: Array<() => void> = [];
afterEach(() => {
  for (const dispose of disposers.splice(0)) dispose();
});

function tree(files: Record<string, string>) {
  const t = tempTree(files);
  disposers.push(t.dispose);
  return t.dir;
}

describe("loadConfig", () => {
  it("falls back to the shipped config when there is no ./config", () => {
    const cwd = tree({});
    const config = loadConfig({ cwd, env: {} });
    expect(config.dir).toBe(BUILTIN_CONFIG_DIR);
    expect([...config.agents.keys()].sort()).toEqual([
      "architect",
      "assistant",
      "debugger",
      "explorer",
      "investigator",
      "reviewer",
      "test-planner",
    ]);
    expect(config.agents.get("explorer")?.definition.readOnly).toBe(true);
  });

  it("reads the sandbox settings: the short form, on and off, and an agent's own mode", () => {
    const load = (troupeYaml: string) =>
      readConfig({
        cwd: tree({
          "config/troupe.yaml": troupeYaml,
          "config/agents/a.yaml": "name: a\ndescription: A.\nsandbox: read-only\ntools: [shell]\n",
        }),
        env: {},
      });
    expect(load("{}\n").troupe.sandbox).toEqual({ network: false, readPaths: [], readHardLinks: false });
    expect(load("sandbox: workspace-write\n").troupe.sandbox).toMatchObject({
      mode: "workspace-write",
      network: false,
    });
    expect(load("sandbox:\n  network: on\n  readPaths: [tools]\n").troupe.sandbox).toMatchObject({
      network: true,
      readPaths: ["tools"],
    });
    expect(load("sandbox: { network: off }\n").troupe.sandbox.network).toBe(false);
    expect(load("{}\n").agents.get("a")?.definition.sandbox).toBe("read-only");
  });

  it("says where a sandbox setting is wrong and what it may be, the short form too", () => {
    const problems = (troupeYaml: string, agentYaml = "name: a\ndescription: A.\n") => {
      const cwd = tree({ "config/troupe.yaml": troupeYaml, "config/agents/a.yaml": agentYaml });
      try {
        readConfig({ cwd, env: {} });
      } catch (error) {
        if (error instanceof ConfigError) return error.message;
        throw error;
      }
      return "";
    };
    expect(problems("sandbox:\n  mode: locked\n")).toBe(
      'config/troupe.yaml:2:9: sandbox.mode: must be one of "read-only", "workspace-write", "off"; got "locked"',
    );
    expect(problems("sandbox: locked\n")).toBe(
      'config/troupe.yaml:1:10: sandbox.mode: must be one of "read-only", "workspace-write", "off"; got "locked"',
    );
    expect(problems("sandbox:\n  network: maybe\n")).toBe(
      'config/troupe.yaml:2:12: sandbox.network: must be on or off; got "maybe"',
    );
    expect(problems("{}\n", "name: a\ndescription: A.\nsandbox: sometimes\n")).toBe(
      'config/agents/a.yaml:3:10: sandbox: must be one of "read-only", "workspace-write", "off"; got "sometimes"',
    );
  });

  it("reads daemon.keepFinished as a duration, and says where one is not", () => {
    const load = (troupeYaml: string) => {
      const cwd = tree({
        "config/troupe.yaml": troupeYaml,
        "config/agents/a.yaml": "name: a\ndescription: A.\n",
      });
      try {
        return readConfig({ cwd, env: {} }).troupe.daemon.keepFinished;
      } catch (error) {
        if (error instanceof ConfigError) return error.message;
        throw error;
      }
    };
    expect(load("{}\n")).toBe(7 * 86_400_000);
    expect(load("daemon:\n  keepFinished: 90s\n")).toBe(90_000);
    expect(load("daemon:\n  keepFinished: 12h\n")).toBe(12 * 3_600_000);
    expect(load("daemon:\n  keepFinished: 0\n")).toBe(0);
    expect(load("daemon:\n  keepFinished: a week\n")).toBe(
      'config/troupe.yaml:2:17: daemon.keepFinished: must be a duration such as "90s", "15m", "12h" or "7d"',
    );
  });

  it("reads nats.stream and nats.kv: durations, sizes, replicas and storage, and says where one is wrong", () => {
    const load = (troupeYaml: string) => {
      const cwd = tree({
        "config/troupe.yaml": troupeYaml,
        "config/agents/a.yaml": "name: a\ndescription: A.\n",
      });
      try {
        const { stream, kv } = readConfig({ cwd, env: {} }).troupe.nats;
        return { stream, kv };
      } catch (error) {
        if (error instanceof ConfigError) return error.message;
        throw error;
      }
    };
    expect(load("{}\n")).toEqual({ stream: undefined, kv: undefined });
    expect(
      load(
        "nats:\n  stream:\n    maxAge: 30d\n    maxBytes: 10GB\n    replicas: 3\n    storage: memory\n  kv:\n    replicas: 3\n    ttl: 90d\n",
      ),
    ).toEqual({
      stream: { maxAge: 30 * 86_400_000, maxBytes: 10 * 2 ** 30, replicas: 3, storage: "memory" },
      kv: { replicas: 3, ttl: 90 * 86_400_000 },
    });
    expect(load("nats:\n  stream:\n    maxBytes: 512mb\n")).toEqual({
      stream: { maxBytes: 512 * 2 ** 20 },
      kv: undefined,
    });
    expect(load("nats:\n  stream:\n    maxBytes: lots\n")).toBe(
      'config/troupe.yaml:3:15: nats.stream.maxBytes: must be a size such as "512MB" or "10GB"',
    );
    expect(load("nats:\n  kv:\n    replicas: 7\n")).toMatch(
      /^config\/troupe.yaml:3:15: nats.kv.replicas: .*5/,
    );
    expect(load("nats:\n  stream:\n    storage: disk\n")).toMatch(
      /^config\/troupe.yaml:3:14: nats.stream.storage: .*"file".*"memory"/,
    );
  });

  it("prefers ./config in the working directory", () => {
    const cwd = tree({
      "config/troupe.yaml": "defaultModel: local-model\n",
      "config/agents/a.yaml": "name: a\ndescription: A.\n",
    });
    trustConfig(cwd);
    const config = loadConfig({ cwd, env: {} });
    expect(config.troupe.defaultModel).toBe("local-model");
    expect([...config.agents.keys()]).toEqual(["a"]);
  });

  it("fills defaults for everything a file leaves out", () => {
    const cwd = tree({ "config/troupe.yaml": "{}\n", "config/agents/a.yaml": "name: a\ndescription: A.\n" });
    const { troupe, agents } = readConfig({ cwd, env: {} });
    expect(troupe.nats).toEqual({ url: "nats://127.0.0.1:4222", prefix: "troupe", embedded: true });
    expect(troupe.approval).toEqual({ policy: "ask", timeoutMs: 300_000 });
    expect(troupe.subagents).toEqual({ maxDepth: 2, maxConcurrent: 4 });
    expect(troupe.providers.openai?.apiKeyEnv).toBe("OPENAI_API_KEY");
    expect(agents.get("a")?.definition).toEqual({
      name: "a",
      description: "A.",
      fallbackModels: [],
      tools: [],
      subagents: [],
      budget: {},
      readOnly: false,
      toolModules: [],
      onToolError: "continue",
    });
  });

  it("lets NATS_URL, OPENAI_BASE_URL and TROUPE_DATA_DIR override the file and settings given in code alike", () => {
    const cwd = tree({
      "config/troupe.yaml":
        "nats:\n  url: nats://elsewhere:4222\nproviders:\n  openai:\n    baseURL: https://api.openai.com/v1\ndataDir: /tmp/file\n",
      "config/agents/a.yaml": "name: a\ndescription: A.\n",
    });
    const settings = {
      nats: { url: "nats://elsewhere:4222" },
      providers: { openai: { baseURL: "https://api.openai.com/v1" } },
      dataDir: "/tmp/file",
    };
    const env = {
      NATS_URL: "nats://127.0.0.1:5222",
      OPENAI_BASE_URL: "http://127.0.0.1:9999/v1",
      TROUPE_DATA_DIR: "/tmp/x",
    };
    const inline = { settings, agents: [{ name: "a", description: "A." }] };
    for (const { troupe, natsUrlChosen } of [readConfig({ cwd, env }), readConfig({ cwd, env, inline })]) {
      expect(troupe.nats.url).toBe("nats://127.0.0.1:5222");
      expect(troupe.providers.openai?.baseURL).toBe("http://127.0.0.1:9999/v1");
      expect(dataDir(troupe.dataDir, env)).toBe("/tmp/x");
      expect(natsUrlChosen).toBe(true);
    }
    const { troupe } = readConfig({ cwd, env: {}, inline });
    expect([troupe.nats.url, troupe.providers.openai?.baseURL]).toEqual([
      "nats://elsewhere:4222",
      "https://api.openai.com/v1",
    ]);
    expect(dataDir(troupe.dataDir, {})).toBe("/tmp/file");
  });

  it("tells a NATS URL someone chose (troupe.yaml or NATS_URL) from the built-in default", () => {
    const plain = tree({ "config/troupe.yaml": "nats:\n  prefix: p\n" });
    const named = tree({ "config/troupe.yaml": "nats:\n  url: nats://127.0.0.1:4222\n" });
    expect(readConfig({ cwd: plain, env: {} }).natsUrlChosen).toBe(false);
    expect(readConfig({ cwd: plain, env: { NATS_URL: "nats://127.0.0.1:4222" } }).natsUrlChosen).toBe(true);
    expect(readConfig({ cwd: named, env: {} }).natsUrlChosen).toBe(true);
  });

  it("takes --nats (natsUrl) over NATS_URL and troupe.yaml, as a chosen URL, and leaves the environment alone", () => {
    const named = tree({ "config/troupe.yaml": "nats:\n  url: nats://elsewhere:4222\n" });
    const env = { NATS_URL: "nats://127.0.0.1:5222" };
    const config = readConfig({ cwd: named, env, natsUrl: "nats://127.0.0.1:6222" });
    expect(config.troupe.nats.url).toBe("nats://127.0.0.1:6222");
    expect(config.natsUrlChosen).toBe(true);
    expect(env).toEqual({ NATS_URL: "nats://127.0.0.1:5222" });
    const plain = tree({ "config/troupe.yaml": "nats:\n  prefix: p\n" });
    expect(readConfig({ cwd: plain, env: {}, natsUrl: "nats://127.0.0.1:6222" }).natsUrlChosen).toBe(true);
  });

  it("reads TROUPE_CONFIG as a directory or as the troupe.yaml in it", () => {
    const dir = tree({
      "elsewhere/troupe.yaml": "agentsDir: defs\n",
      "elsewhere/defs/b.yml": "name: b\ndescription: B.\n",
    });
    for (const given of [`${dir}/elsewhere`, `${dir}/elsewhere/troupe.yaml`]) {
      const config = readConfig({ cwd: "/", env: { TROUPE_CONFIG: given } });
      expect([...config.agents.keys()]).toEqual(["b"]);
    }
  });

  it("throws one ConfigError holding every problem of every file, in file order", () => {
    const cwd = tree({
      "config/troupe.yaml": "{}\n",
      "config/agents/b.yaml": "name: b\ndescription: B.\ntools: [nope]\n",
      "config/agents/a.yaml": "name: a\ndescription: 3\nbudget: {maxTurns: 0}\n",
    });
    const error = (() => {
      try {
        readConfig({ cwd, env: {} });
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems.map((p) => `${p.file}:${p.line}:${p.col} ${p.path}`);
    expect(problems).toEqual([
      "config/agents/a.yaml:2:14 description",
      "config/agents/a.yaml:3:20 budget.maxTurns",
      "config/agents/b.yaml:3:9 tools[0]",
    ]);
  });

  it("says how to mend the YAML mistakes people make, once a place, and blames no other file for one", () => {
    const problems = (files: Record<string, string>) => {
      try {
        readConfig({ cwd: tree(files), env: {} });
        return [];
      } catch (error) {
        return (error as ConfigError).message.split("\n");
      }
    };
    const lead = {
      "config/troupe.yaml": "{}\n",
      "config/agents/lead.yaml": "name: lead\ndescription: Leads.\nsubagents: [finder]\n",
    };
    expect(
      problems({ ...lead, "config/agents/finder.yaml": "name: finder\ndescription: Finds: things\n" }),
    ).toEqual([
      'config/agents/finder.yaml:2:14: a value holds ": ", or this line is indented under a plain value: put the value in quotes ("a: b"), or line the key up with the ones above',
    ]);
    expect(
      problems({
        ...lead,
        "config/agents/finder.yaml": "name: finder\ndescription: Finds.\n\ttools: [read_file]\n",
      }),
    ).toEqual(["config/agents/finder.yaml:3:1: a tab indents this line: YAML indents with spaces only"]);
    expect(
      problems({
        ...lead,
        "config/agents/finder.yaml": "name: finder\ndescription: Finds.\ntools:\n- read_file\n  - grep\n",
      }),
    ).toEqual([
      'config/agents/finder.yaml:4:3: tools[0]: unknown tool "read_file - grep" (one list item indented under another reads as one name: put each `- item` at the same indentation)',
    ]);
  });
});

describe("an agent's toolChoice", () => {
  const load = (agentYaml: string) =>
    readConfig({
      cwd: tree({
        "config/troupe.yaml": "mcpServers:\n  docs:\n    command: node\n",
        "config/agents/a.yaml": agentYaml,
      }),
      env: {},
    });
  const problems = (agentYaml: string) => {
    try {
      load(agentYaml);
      return [];
    } catch (error) {
      return (error as ConfigError).message.split("\n");
    }
  };
  const agent = "name: a\ndescription: A.\ntools: [read_file, grep, docs__*]\n";

  it("is a keyword or one of the agent's tools", () => {
    for (const choice of ["auto", "required", "none", "grep", "docs__search"])
      expect(load(`${agent}toolChoice: ${choice}\n`).agents.get("a")?.definition.toolChoice).toBe(choice);
    expect(load(agent).agents.get("a")?.definition.toolChoice).toBeUndefined();
  });

  it("naming no tool of the agent's is one line with where and the likely one meant", () => {
    expect(problems(`${agent}toolChoice: read_fiel\n`)).toEqual([
      'config/agents/a.yaml:4:13: toolChoice: toolChoice "read_fiel" is not one of this agent\'s tools (did you mean "read_file"?)',
    ]);
    expect(problems(`${agent}toolChoice: shell\n`)).toEqual([
      'config/agents/a.yaml:4:13: toolChoice: toolChoice "shell" is not one of this agent\'s tools; it is one of auto, required, none, read_file, grep',
    ]);
  });
});

describe("budget durations", () => {
  const load = (agentYaml: string, troupeYaml = "") => {
    const cwd = tree({ "config/troupe.yaml": troupeYaml, "config/agents/a.yaml": agentYaml });
    return readConfig({ cwd, env: {} });
  };

  it("takes maxWallMs as milliseconds or as a duration like other keys (5m, 90s)", () => {
    const config = load(
      "name: a\ndescription: A.\nbudget:\n  maxWallMs: 5m\n",
      "defaults:\n  budget:\n    maxWallMs: 90s\n",
    );
    expect(config.agents.get("a")?.definition.budget.maxWallMs).toBe(300_000);
    expect(config.troupe.defaults.budget.maxWallMs).toBe(90_000);
    expect(
      load("name: a\ndescription: A.\nbudget:\n  maxWallMs: 1500\n").agents.get("a")?.definition.budget
        .maxWallMs,
    ).toBe(1500);
  });

  it("refuses a wall of nothing, in one line naming where", () => {
    expect(() => load("name: a\ndescription: A.\nbudget:\n  maxWallMs: 0m\n")).toThrow(
      /config\/agents\/a\.yaml:4:\d+: budget\.maxWallMs/,
    );
  });
});

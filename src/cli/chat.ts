import { createInterface, type Interface } from "node:readline";
import { PassThrough } from "node:stream";
import { RemoteError } from "../bus/bus.js";
import type { LoadedConfig } from "../config/load.js";
import { APPROVAL_POLICIES } from "../config/policies.js";
import type { ApprovalPolicy } from "../config/policy-schemas.js";
import type { Logger } from "../log.js";
import type { SandboxMode } from "../sandbox/plan.js";
import { visible, visibleLine } from "../util/visible.js";
import { agentsText, costText, helpText, parseCommand } from "./chat-commands.js";
import type { Conversation } from "./conversation.js";
import { newestRun, openConversation } from "./follow-up.js";
import { InputBlock, type Output } from "./input-block.js";
import { type TtyApprover, ttyApprover } from "./tty-approver.js";

export interface ChatFlags {
  local?: boolean;
  agent?: string;
  workspace?: string;
  /** Go on with this run, or the newest (`true`). */
  continue?: string | true;
  approval?: ApprovalPolicy;
  sandbox?: SandboxMode;
  waitDaemon?: string;
}

const PROMPT = "› ";
const MORE = "… ";

/**
 * `troupe chat`: a prompt on this terminal whose first line starts a run and each next one, once the
 * turn ended, goes on with it; each turn shown as `troupe run` shows a run, its approvals asked here.
 * Lines typed while a turn runs steer it, or answer the approval question open then. Read from a
 * pipe, each line waits for the turn before it.
 */
export async function runChat(config: LoadedConfig, flags: ChatFlags, log: Logger): Promise<number> {
  const terminal = process.stdin.isTTY === true && process.stderr.isTTY === true;
  // The approver reads its answers from here: the lines typed while its question is open.
  const answers = new PassThrough();
  let asker: TtyApprover | undefined;
  // On a terminal, a turn's output goes above the prompt and what is typed while it runs.
  const block = terminal ? new InputBlock(process.stdout, PROMPT, () => !asker?.asking()) : undefined;
  const runId = flags.continue === true ? await newestRun(config, flags, log) : flags.continue;
  const conversation = await openConversation(
    config,
    runId,
    {
      local: flags.local,
      agent: flags.agent,
      workspace: flags.workspace,
      approval: flags.approval,
      sandbox: flags.sandbox,
      waitDaemon: flags.waitDaemon,
      screen: block && {
        out: block.around(process.stdout),
        err: block.around(process.stderr),
        status: (text) => block.status(text),
      },
      asker: terminal
        ? (shown) => {
            asker = ttyApprover(shown, answers, process.stderr);
            return asker;
          }
        : undefined,
    },
    log,
  );
  if (runId && flags.approval) conversation.setApproval(flags.approval);
  const rl = createInterface({
    input: process.stdin,
    output: block?.readlineOutput() ?? process.stdout,
    terminal: process.stdin.isTTY === true,
    historySize: 500,
    prompt: PROMPT,
  });
  block?.attach(rl);
  try {
    await new ChatSession(conversation, rl, terminal, () => asker, answers, block).run();
  } finally {
    rl.close();
    await conversation.close();
  }
  const id = conversation.runId;
  if (id)
    process.stderr.write(
      `troupe: run ${id} stays: troupe chat --continue ${id} goes on with it (or troupe follow-up ${id} "…")\n`,
    );
  return 0;
}

/** The prompt's loop: lines become turns, steers, answers or commands; it ends when the person leaves. */
class ChatSession {
  /** The turn going on, if any. */
  #turn: Promise<void> | undefined;
  /** Lines that ended in `\`: the start of the message being typed. */
  #pending: string[] = [];
  /** Lines read from a pipe while a turn ran: the next turns. */
  #queued: string[] = [];
  #left!: () => void;
  #closed = false;

  constructor(
    private readonly conversation: Conversation,
    private readonly rl: Interface,
    private readonly terminal: boolean,
    private readonly asker: () => TtyApprover | undefined,
    private readonly answers: PassThrough,
    private readonly block: InputBlock | undefined,
  ) {
    this.#out = block?.around(process.stdout) ?? process.stdout;
    this.#err = block?.around(process.stderr) ?? process.stderr;
  }

  /** stdout and stderr, kept above the prompt while a turn runs. */
  readonly #out: Output;
  readonly #err: Output;

  run(): Promise<void> {
    const left = new Promise<void>((resolve) => {
      this.#left = resolve;
    });
    this.rl.on("line", (line) => {
      this.block?.entered(line);
      this.#line(line);
    });
    // After readline's own handling of the key: what it typed is shown below the turn's output.
    if (this.block) process.stdin.on("keypress", () => this.block?.typed());
    this.rl.on("SIGINT", () => this.#interrupt());
    this.rl.on("close", () => {
      this.#closed = true;
      // Ctrl-D or the end of a pipe: the turn going on (and what a pipe gave after it) is seen through.
      if (!this.#turn) this.#leave();
    });
    if (this.terminal)
      this.#err.write(
        `troupe chat: ${this.conversation.runId ? `going on with run ${this.conversation.runId}` : "the first line starts a run"} (${this.conversation.where}); /help lists the commands\n`,
      );
    this.#prompt();
    return left;
  }

  #line(line: string): void {
    // Lines typed while the conversation is compacted wait for it, each the next.
    if (this.#compacting) return void this.#queued.push(line);
    if (this.#turn) {
      if (!this.terminal) this.#queued.push(line);
      else if (this.asker()?.asking()) this.answers.write(`${line}\n`);
      else if (line.trim().startsWith("/")) void this.#command(line);
      else if (line.trim()) void this.#steer(line);
      return;
    }
    if (line.endsWith("\\")) {
      this.#pending.push(line.slice(0, -1));
      this.#prompt();
      return;
    }
    const text = [...this.#pending.splice(0), line].join("\n");
    if (!text.trim()) return void this.#prompt();
    if (text.trim().startsWith("/")) void this.#command(text).then(() => this.#next());
    else this.#start(text);
  }

  /** A turn with `text`; the prompt comes back once it has ended. */
  #start(text: string): void {
    this.rl.setPrompt("");
    this.block?.start();
    this.#turn = this.conversation
      .turn(text)
      .then(
        (reason) => {
          if (reason !== "done") this.#err.write(`troupe: this turn stopped (${reason})\n`);
        },
        (error: unknown) => say(error, this.#err),
      )
      .finally(() => {
        this.block?.end();
        this.#turn = undefined;
        this.#next();
      });
  }

  /** Once a turn or a command is done: the next line that waited, else the prompt (or leaving). */
  #next(): void {
    const next = this.#queued.shift();
    if (next !== undefined) this.#line(next);
    else if (this.#closed) this.#left();
    else this.#prompt();
  }

  /** The conversation compacted now, between turns: one line with its tokens before and after. */
  async #compact(): Promise<void> {
    if (this.#turn) return void this.#err.write("a turn is going on: /compact once it has ended\n");
    this.#compacting = this.conversation.compact().then(
      ({ tokensBefore, tokensAfter }) =>
        void this.#out.write(
          tokensAfter < tokensBefore
            ? `context compacted: ${tokensBefore} → ${tokensAfter} tokens\n`
            : `context compacted: ${tokensBefore} → ${tokensAfter} tokens (nothing before the last turn to summarise)\n`,
        ),
      (error: unknown) => say(error, this.#err),
    );
    await this.#compacting;
    this.#compacting = undefined;
  }

  /** A compaction going on (`/compact`): lines wait for it. */
  #compacting: Promise<void> | undefined;

  async #command(line: string): Promise<void> {
    const parsed = parseCommand(line);
    if ("unknown" in parsed) return void this.#err.write(`${parsed.unknown}\n`);
    const { command, rest } = parsed;
    const { conversation } = this;
    switch (command) {
      case "/help":
        return void this.#err.write(`${helpText()}\n`);
      case "/exit":
        return this.#leave();
      case "/steer":
        if (!rest) return void this.#err.write("/steer TEXT: say what to tell the agent\n");
        return this.#steer(rest);
      case "/abort":
        if (!this.#turn) return void this.#err.write("no turn is going on\n");
        return this.#abort();
      case "/compact":
        return this.#compact();
      case "/cost":
        return void this.#out.write(`${costText(conversation.tree, conversation.runId)}\n`);
      case "/agents":
        return void this.#out.write(`${agentsText(conversation.tree, conversation.runId)}\n`);
      case "/approval": {
        const policy = APPROVAL_POLICIES.find((name) => name === rest);
        if (!policy)
          return void this.#err.write(`/approval POLICY: one of ${APPROVAL_POLICIES.join(", ")}\n`);
        conversation.setApproval(policy);
        return void this.#err.write(`the next turns ask as ${policy} does\n`);
      }
      case "/model":
        if (!rest) return void this.#err.write("/model NAME: say which model\n");
        conversation.setModel(rest);
        return void this.#err.write(`the next turns are on ${visibleLine(rest)}\n`);
    }
  }

  async #steer(text: string): Promise<void> {
    if (!this.#turn)
      return void this.#err.write("no turn is going on: the line itself is the next message\n");
    await this.conversation.steer(text).then(
      () => this.#err.write("(steering sent: the agent reads it after its current tool batch)\n"),
      (error) => say(error, this.#err),
    );
  }

  async #abort(): Promise<void> {
    this.#err.write("\naborting this turn… (the run stays: the next line goes on with it)\n");
    await this.conversation.abort().catch((error) => say(error, this.#err));
  }

  /** Ctrl-C: stops the turn going on; at the prompt, clears what was typed, or leaves when nothing was. */
  #interrupt(): void {
    if (this.#turn) return void this.#abort();
    if (this.rl.line === "" && this.#pending.length === 0) return void this.#leave();
    this.#pending = [];
    this.rl.write(null, { ctrl: true, name: "e" });
    this.rl.write(null, { ctrl: true, name: "u" });
    this.#out.write("\n");
    this.#prompt();
  }

  #prompt(): void {
    if (this.#closed || !this.terminal) return;
    this.rl.setPrompt(this.#pending.length > 0 ? MORE : PROMPT);
    this.rl.prompt();
  }

  /** Leaves once the turn going on (if any) has stopped: it is aborted. */
  #leave(): void {
    this.#closed = true;
    // A compaction is seen through: it stops by itself.
    if (this.#compacting) return;
    const turn = this.#turn;
    if (turn) {
      void this.#abort();
      return void turn.then(() => this.#left());
    }
    if (this.terminal) this.#out.write("\n");
    this.#left();
  }
}

/** What went wrong in a turn or a command: one line, and the session goes on. */
function say(error: unknown, err: Output = process.stderr): void {
  const refused = error instanceof RemoteError && error.remoteName === "RequestRefusedError";
  const message = refused
    ? error.message.slice(error.subject.length + 2)
    : error instanceof Error
      ? error.message
      : String(error);
  err.write(`troupe: ${visible(message)}\n`);
}

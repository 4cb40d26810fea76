import type { Runtime } from "../actors/runtime.js";
import { RequestRefusedError } from "../bus/bus.js";
import type { Logger } from "../log.js";

/** A workspace's runtime, held for one run (or one resume being tried) until `release`. */
export interface RuntimeLease {
  readonly runtime: Runtime;
  /** The run is over (or never started): once its last lease goes, the runtime is closed. Idempotent. */
  release(): void;
}

interface Held {
  /** The leases not yet released. */
  users: number;
  runtime: Promise<Runtime>;
}

/**
 * The runtimes of the workspaces other than the daemon's own (`troupe run -w DIR`), each with its
 * MCP servers. One is made when the first run there starts and closed when the last run there ends:
 * a client naming one directory after another leaves no servers behind. At most `max` are open at
 * once; a run in yet another workspace is refused until one's runs end. A workspace whose runtime
 * is being closed gets its next one once that close is over, never two at once.
 */
export class WorkspaceRuntimes {
  readonly #open = new Map<string, Held>();
  readonly #closing = new Map<string, Promise<void>>();

  constructor(
    private readonly make: (workspace: string) => Promise<Runtime>,
    private readonly max: number,
    private readonly log: Logger,
  ) {}

  /** How many workspaces have a runtime open or being opened. */
  get size(): number {
    return this.#open.size;
  }

  /**
   * The runtime of `workspace`, made when it has none. `admitted`: a run an earlier daemon took,
   * resumed as this one starts, is not refused for the bound (refusing it would leave it running
   * nowhere). Throws `RequestRefusedError` past the bound, or what making the runtime threw.
   */
  async lease(workspace: string, admitted = false): Promise<RuntimeLease> {
    let held = this.#open.get(workspace);
    if (!held) {
      if (!admitted && this.#open.size >= this.max)
        throw new RequestRefusedError(
          `the daemon has runs in ${this.#open.size} other workspaces, its most at once (daemon.maxWorkspaces in its troupe.yaml): wait for one's runs to end, or run in one of those`,
        );
      held = this.#made(workspace);
    }
    // Counted before the wait: a run that ends meanwhile does not close it under this one.
    held.users += 1;
    const runtime = await held.runtime;
    let released = false;
    const lease = held;
    return {
      runtime,
      release: () => {
        if (released) return;
        released = true;
        this.#release(workspace, lease);
      },
    };
  }

  /** Closes every runtime (the daemon stops), those in use too, and waits for those being closed. */
  async close(): Promise<void> {
    const open = [...this.#open.values()];
    this.#open.clear();
    await Promise.all([
      ...open.map((held) =>
        held.runtime.then(
          (runtime) => runtime.close(),
          () => {},
        ),
      ),
      ...this.#closing.values(),
    ]);
  }

  /** A new runtime for `workspace`, once its last one is closed; forgotten if it cannot be made. */
  #made(workspace: string): Held {
    const runtime = (this.#closing.get(workspace) ?? Promise.resolve()).then(() => this.make(workspace));
    const held: Held = { users: 0, runtime };
    this.#open.set(workspace, held);
    runtime.catch(() => {
      if (this.#open.get(workspace) === held) this.#open.delete(workspace);
    });
    return held;
  }

  #release(workspace: string, held: Held): void {
    held.users -= 1;
    if (held.users > 0 || this.#open.get(workspace) !== held) return;
    this.#open.delete(workspace);
    const closed = held.runtime
      .then((runtime) => runtime.close())
      .then(
        () => this.log.info({ workspace }, "closed a workspace's runtime: its last run ended"),
        (error: unknown) => this.log.warn({ workspace, err: error }, "a workspace's runtime did not close"),
      )
      .finally(() => {
        if (this.#closing.get(workspace) === closed) this.#closing.delete(workspace);
      });
    this.#closing.set(workspace, closed);
  }
}

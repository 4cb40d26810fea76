/**
 * Sandboxed commands of one workspace, taken in turn: any number that only read at once, a writing
 * one alone. A command that can write could otherwise swap a directory for a symlink while another
 * command's sandbox is being set up, and have a bind mount of that directory pick up what the link
 * leads to outside the workspace; and the check after a writing command must see only its work.
 * Waiters go first come, first served, so a writer is not starved by a stream of readers.
 */
export class WorkspaceLock {
  #readers = 0;
  #writer = false;
  readonly #queue: Array<{ write: boolean; go: () => void }> = [];

  async hold<T>(write: boolean, work: () => Promise<T>): Promise<T> {
    await this.#acquire(write);
    try {
      return await work();
    } finally {
      if (write) this.#writer = false;
      else this.#readers--;
      this.#wake();
    }
  }

  #acquire(write: boolean): Promise<void> {
    if (this.#queue.length === 0 && this.#free(write)) {
      this.#take(write);
      return Promise.resolve();
    }
    return new Promise((go) => this.#queue.push({ write, go }));
  }

  #free(write: boolean): boolean {
    return write ? !this.#writer && this.#readers === 0 : !this.#writer;
  }

  #take(write: boolean): void {
    if (write) this.#writer = true;
    else this.#readers++;
  }

  #wake(): void {
    for (let next = this.#queue[0]; next && this.#free(next.write); next = this.#queue[0]) {
      this.#queue.shift();
      this.#take(next.write);
      next.go();
    }
  }
}

const locks = new Map<string, WorkspaceLock>();

/** The lock of a workspace (by its real path), shared by every sandboxed command of this process. */
export function workspaceLock(workspace: string): WorkspaceLock {
  let lock = locks.get(workspace);
  if (!lock) {
    lock = new WorkspaceLock();
    locks.set(workspace, lock);
  }
  return lock;
}

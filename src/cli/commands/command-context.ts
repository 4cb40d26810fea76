/* What every command of `troupe` is given by `main`: the global options, the config, a logger, the exit code. */
import type { ConfigChoice } from "../../config/load.js";
import type { LOG_LEVELS, Logger } from "../../log.js";

/** The options of `troupe` itself, before the command. */
export interface GlobalOptions {
  config?: string;
  nats?: string;
  logLevel: (typeof LOG_LEVELS)[number];
}

export interface CommandContext {
  /** The global options as given; read when a command runs, once commander has parsed them. */
  globals(): GlobalOptions;
  /** The config every command runs on: `--config`, and `--nats` over NATS_URL and troupe.yaml's. */
  where(): ConfigChoice;
  /** A logger for one command; secrets of the environment never reach its lines. */
  log(component: string): Logger;
  /** The code `main` returns once the command is done. */
  exit(code: number): void;
}

#!/usr/bin/env node
// Runs the compiled CLI: no TypeScript loader at run time keeps `troupe --help` fast.
import { main } from "../dist/cli/main.js";

const code = await main(process.argv);
// Leave as soon as the command is done (idle keep-alive sockets would hold the process open),
// once what was written to stdout and stderr has been handed over.
process.stdout.write("", () => process.stderr.write("", () => process.exit(code)));

#!/usr/bin/env node
// Runs the compiled CLI: no TypeScript loader at run time keeps `troupe --help` fast.
import { main } from "../dist/cli/main.js";

process.exitCode = await main(process.argv);

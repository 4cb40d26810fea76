/**
 * `bin/troupe.js` for the bench: the same few lines over the CLI compiled with the bench (the same
 * sources, the same compiler options), so `npm run bench` needs one compile, not two.
 */
import { main } from "../src/cli/main.js";

const code = await main(process.argv);
process.stdout.write("", () => process.stderr.write("", () => process.exit(code)));

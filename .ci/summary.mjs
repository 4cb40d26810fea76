// Prints vitest's JSON report as the plain closing line "N passed, N failed".
import { readFileSync } from "node:fs";

try {
  const report = JSON.parse(readFileSync(process.argv[2], "utf8"));
  console.log(`${report.numPassedTests} passed, ${report.numFailedTests} failed`);
} catch (error) {
  console.log(`0 passed, 1 failed (no test report: ${error.message})`);
}

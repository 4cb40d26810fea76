import { existsSync } from "node:fs";
import { type Browser, chromium } from "playwright-core";
import { afterAll, beforeAll } from "vitest";

/** Debian's Chromium, or the one CHROMIUM_PATH names. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/**
 * Headless Chromium for the browser tests, with the flags a closed machine needs (no background
 * networking, no updates). Throws in one line when it is not installed.
 */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(
      `the browser tests need Chromium at ${CHROMIUM}: apt-get install chromium (or set CHROMIUM_PATH)`,
    );
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

/**
 * Chromium for one test file: launched before its tests, closed after them. Call the function
 * returned, inside a test, for the browser.
 */
export function chromiumPerFile(): () => Browser {
  let browser: Browser | undefined;
  beforeAll(async () => {
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
  });
  return () => {
    if (!browser) throw new Error("Chromium is launched before the file's tests: ask for it inside one");
    return browser;
  };
}

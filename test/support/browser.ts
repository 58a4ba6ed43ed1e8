// Headless Chromium for browser tests and the bench: Debian's `chromium` package (scripts/pretest.sh
// installs it; no browser is ever downloaded), driven by playwright-core. A missing Chromium fails
// the test with what to do, it is never skipped.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { chromium, type Browser, type Page } from "playwright-core";
import type { TranscriptEvent } from "../../src/core/spec/spec.js";
import { renderTranscriptHtml } from "../../src/web/html.js";

export const CHROMIUM = process.env.PATCHBAY_CHROMIUM ?? "/usr/bin/chromium";

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `no Chromium at ${CHROMIUM}: apt-get install -y chromium (scripts/pretest.sh does it as root), or set PATCHBAY_CHROMIUM`,
    );
  }
  // --no-sandbox: the tests run as root, where Chromium's own sandbox cannot start.
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
}

/**
 * A browser context's state holding the dashboard's cookie for `url`: what opening the dashboard
 * once with ?token= leaves behind (every page needs the token, reads too). For newPage/newContext.
 */
export function signedIn(url: string, token: string) {
  const host = new URL(url).hostname;
  return {
    storageState: {
      cookies: [
        {
          name: "patchbay_dashboard",
          value: encodeURIComponent(token),
          domain: host,
          path: "/",
          expires: -1,
          httpOnly: true,
          secure: false,
          sameSite: "Strict" as const,
        },
      ],
      origins: [],
    },
  };
}

/** What a page did that it should not have: dialogs, page errors, console errors, requests. */
export function recordPage(page: Page) {
  const rec = {
    dialogs: [] as string[],
    pageErrors: [] as string[],
    consoleErrors: [] as string[],
    requests: [] as string[],
  };
  page.on("dialog", (d) => {
    rec.dialogs.push(`${d.type()}: ${d.message()}`);
    void d.dismiss().catch(() => {});
  });
  page.on("pageerror", (e) => rec.pageErrors.push(e.message));
  page.on("console", (m) => m.type() === "error" && rec.consoleErrors.push(m.text()));
  page.on("request", (r) => rec.requests.push(r.url()));
  return rec;
}

/**
 * The static view (`patchbay view`'s page) of `events`, rendered in Chromium: fn gets the page once
 * it has rendered, what the page did, and the file's URL (the one request it should make).
 */
export async function inView(
  events: TranscriptEvent[],
  fn: (page: Page, rec: ReturnType<typeof recordPage>, url: string) => Promise<void>,
): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "pb-view-"));
  const browser = await launchBrowser();
  try {
    const file = join(dir, "t.html");
    writeFileSync(file, renderTranscriptHtml(events));
    const page = await browser.newPage();
    const rec = recordPage(page);
    await page.goto(pathToFileURL(file).href);
    await page.locator("body[data-rendered]").waitFor();
    await fn(page, rec, pathToFileURL(file).href);
  } finally {
    await browser.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

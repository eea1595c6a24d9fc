// Drives a sandbox's Chromium from outside through sbx's port proxy with
// Playwright's chromium.connectOverCDP (playwright-core: no browser of its
// own; executablePath is never used). Usage:
//   node cdp.mjs ENDPOINT [TOKEN] < steps.json
// ENDPOINT: the CDP HTTP URL (.../ports/9222, or a signed URL's, then no
// TOKEN); steps.json: {"page": URL, "click": SELECTOR, "blocked": [URL...]}.
// Prints one JSON line: the title before and after the click, the
// screenshot (PNG, base64), each blocked URL's navigation error (null if it
// loaded), the browser's version.
import { chromium } from "playwright-core";

const [endpoint, token] = process.argv.slice(2);
let input = "";
for await (const chunk of process.stdin) input += chunk;
const steps = JSON.parse(input);
const out = {};
const opts = { timeout: 60000 };
if (token) opts.headers = { Authorization: "Bearer " + token };
let browser;
try {
  browser = await chromium.connectOverCDP(endpoint, opts);
  out.version = browser.version();
  const context = browser.contexts()[0] ?? (await browser.newContext());
  const page = await context.newPage();
  await page.goto(steps.page, { timeout: 30000 });
  out.title = await page.title();
  if (steps.click) {
    await page.click(steps.click);
    await page.waitForFunction((t) => document.title !== t, out.title, { timeout: 10000 });
    out.clicked = await page.title();
  }
  out.screenshot = (await page.screenshot({ type: "png" })).toString("base64");
  out.blocked = {};
  for (const url of steps.blocked ?? []) {
    try {
      await page.goto(url, { timeout: 15000 });
      out.blocked[url] = null;
    } catch (e) {
      out.blocked[url] = String(e.message).split("\n")[0];
    }
  }
  await page.close();
} catch (e) {
  out.error = String(e.message).split("\n")[0];
} finally {
  // connectOverCDP's close() disconnects; the sandbox's browser keeps running
  if (browser) await browser.close().catch(() => {});
}
console.log(JSON.stringify(out));

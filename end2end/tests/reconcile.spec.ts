import { readFileSync } from "node:fs";

import { expect, test, type Page } from "@playwright/test";
import { expectHydrated, signIn, waitForRunToFinish } from "./helpers";

/** Presses an apply form's button and waits for its bulk resolve to finish. */
async function applyAndFinish(page: Page, button: RegExp) {
  const reconciliation = page.url().replace(/\?.*$/, "");
  await page.getByRole("button", { name: button }).click();
  await expect(page).toHaveURL(/\/redrives\/\d+\?answer=/);
  await expect(page.locator("h1")).toContainText("Bulk resolve #");
  await waitForRunToFinish(page, 60_000);
  await expect(page.locator(".fields")).toContainText("reconciliation #");
  await page.goto(reconciliation);
}

test("an operator downloads the provider's message log, reconciles it, applies what it proves and the unknown outcomes are settled", async ({ page }) => {
  await signIn(page, "operator");
  await page.goto("/reconcile");
  await expectHydrated(page);

  // The demo's email provider offers its message log for the open incident.
  const downloading = page.waitForEvent("download");
  await page.getByRole("link", { name: "Download the message log" }).click();
  const download = await downloading;
  const file = await download.path();
  const log = readFileSync(file, "utf8");
  expect(log.split("\n")[0]).toBe("message_id,idempotency_key,event,timestamp");
  expect(log).toContain(",dispatched,");

  // Unknown outcomes of the reminders before the loop.
  await page.goto("/unknown?consumer=reminders");
  const before = await page.locator("table tbody tr").count();
  expect(before).toBeGreaterThan(0);

  await page.goto("/reconcile");
  const form = page.locator("form.reconcile-form");
  await form.getByLabel("Consumer").selectOption("reminders");
  await form.getByLabel("Provider latency bound (seconds)").fill("0");
  // Downloaded a moment ago: it covers every call up to now.
  await form.getByLabel("The export covers every call up to now").check();
  await form.getByLabel("Export file").setInputFiles({ name: "email-provider-messages.csv", mimeType: "text/csv", buffer: Buffer.from(log) });
  const reconciledAt = new Date().toISOString();
  await form.getByRole("button", { name: "Reconcile" }).click();

  await expect(page).toHaveURL(/\/reconciliations\/\d+$/);
  await expect(page.locator("h1")).toContainText("Reconciliation #");
  await expect(page.locator(".fields")).toContainText("email-provider-messages.csv");
  const accepted = page.locator("section#unknown-accepted");
  const absent = page.locator("section#unknown-absent");
  await expect(accepted.locator("h2")).toContainText("Unknown here, accepted there");
  // Each row links to its key.
  const firstKey = accepted.locator("tbody tr a.key").first();
  await expect(firstKey).toBeVisible();
  await expect(page.locator("section#sent-absent h2")).toContainText("(0)");

  const reconciled = [
    ...(await accepted.locator("tbody tr a.key").allTextContents()),
    ...(await absent.locator("tbody tr a.key").allTextContents()),
  ];
  expect(reconciled.length).toBeGreaterThan(0);
  await applyAndFinish(page, /Resolve these \d+ as sent/);
  await expect(accepted).toContainText("Applied by Bulk resolve #");
  if (await absent.getByRole("button", { name: /Mark these \d+ failed and retry/ }).count()) {
    await applyAndFinish(page, /Mark these \d+ failed and retry/);
    await expect(absent).toContainText("Applied by Bulk resolve #");
  }

  // A settled key links back to the reconciliation that justified it.
  await accepted.locator("tbody tr a.key").first().click();
  await expect(page.locator(".timeline")).toContainText("resolve:sent");
  await expect(page.locator(".timeline a", { hasText: /^reconciliation #\d+$/ }).first()).toBeVisible();

  // What the export covered is settled: no outcome of the reminders that
  // became unknown before the reconciliation is unknown any more. (The
  // open incident keeps losing a response now and then, so the whole list
  // may hold one that happened since.)
  await page.goto(`/unknown?consumer=reminders&to=${encodeURIComponent(reconciledAt)}`);
  await expect(page.locator(".window-note")).toContainText("for consumer reminders");
  await expect(page.locator(".count-line")).toContainText(/^0 unknown/);
  await expect(page.locator("table tbody tr")).toHaveCount(0);
  await page.goto("/unknown?consumer=reminders");
  const left = await page.locator("table tbody tr a.key").allTextContents();
  expect(left.filter((key) => reconciled.includes(key))).toEqual([]);
  expect(left.length).toBeLessThan(before);
});

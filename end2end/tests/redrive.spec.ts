import { expect, test } from "@playwright/test";
import { expectHydrated, signIn } from "./helpers";

test("an operator redrives the open incident's rate-limited reminders and reads how each went", async ({ page }) => {
  await signIn(page, "operator");
  await page.goto("/dead-letters");
  await expectHydrated(page);
  // The demo's open incident rate-limited reminders into the dead-letter
  // queue; nobody has replayed them yet.
  const filters = page.locator("form.filters");
  await filters.getByLabel("Consumer").fill("reminders");
  await filters.getByLabel("Last error contains").fill("429");
  await filters.getByRole("button", { name: "Filter" }).click();
  await expect(page).toHaveURL(/consumer=reminders&error=429/);
  await expect(page.locator("table tbody tr").first()).toBeVisible();
  for (const error of await page.locator("table tbody td.error-text").allInnerTexts()) expect(error).toContain("429");
  const counted = await page.locator(".count-line").innerText();
  const total = Number(counted.replace(/[^0-9]/g, ""));
  expect(total).toBeGreaterThanOrEqual(4);
  const consumer = "reminders";

  const redrive = page.locator(".action-form", { hasText: "Each dead letter is replayed in turn" });
  await redrive.getByRole("button", { name: /^Redrive / }).click();
  await expect(page).toHaveURL(/\/redrives\/\d+\?answer=/);
  await expect(page.locator(".outcome.done")).toContainText(`dead letter${total === 1 ? "" : "s"} to go through`);
  await expect(page.locator(".fields")).toContainText(`open dead letters of ${consumer}`);

  // The server paces it in the background; the page follows it to its end.
  await expect(async () => {
    await page.reload();
    await expect(page.locator(".fields")).toContainText("finished", { timeout: 1_000 });
  }).toPass({ timeout: 45_000 });
  await expect(page.locator(".fields")).toContainText(/\d+ replayed, \d+ skipped, 0 waiting/);
  await expect(page.getByRole("button", { name: "Stop the redrive" })).toHaveCount(0);
  const outcomes = await page.locator("table tbody tr td:nth-child(4)").allInnerTexts();
  expect(outcomes.length).toBe(Math.min(total, 500));
  for (const outcome of outcomes) expect(["replayed", "skipped"]).toContain(outcome.trim());
  // A skipped one says why; a replayed one leads to its dead letter, now replayed.
  for (const row of await page.locator("table tbody tr", { hasText: "skipped" }).all()) {
    await expect(row.locator("td").nth(4)).not.toBeEmpty();
  }
  // The incident's reminders are still pending: safe, so replayed.
  expect(outcomes.filter((o) => o.trim() === "replayed").length).toBeGreaterThanOrEqual(4);
  await page.locator("table tbody tr", { hasText: "replayed" }).first().locator("a").first().click();
  await expect(page.locator(".fields")).toContainText("replayed");
});

import { expect, test } from "@playwright/test";
import { consumerSql, deadLetters, expectHydrated, signIn, waitForRunToFinish } from "./helpers";

test("an operator redrives a list that grew after the page was drawn, and sees what really happened", async ({ page }) => {
  const consumer = "e2e-grown";
  deadLetters(consumer, "grown", 1, 3, 10);
  await signIn(page, "operator");
  const list = `/dead-letters?consumer=${consumer}&error=grown`;
  await page.goto(list);
  await expectHydrated(page);
  const redrive = page.locator(".action-form", { hasText: "Each dead letter is replayed in turn" });
  await expect(redrive.getByRole("button")).toHaveText("Redrive these 3");

  // Two more arrive while the operator reads the page.
  deadLetters(consumer, "grown", 4, 2, 0);
  await redrive.getByRole("button").click();
  await expect(page).toHaveURL(/\/redrives\/\d+\?answer=/);
  await expect(page.locator(".outcome.done")).toContainText("started: 3 dead letters to go through");
  await waitForRunToFinish(page);
  await expect(page.locator(".fields")).toContainText("3 replayed, 0 skipped, 0 waiting");
  const keys = await page.locator("table tbody tr td:nth-child(3)").allInnerTexts();
  expect(keys.map((k) => k.trim()).sort()).toEqual(["grown:1", "grown:2", "grown:3"]);

  // The two that arrived later are still open, offered by the page drawn
  // again (the list itself may be read from a cache up to two seconds old;
  // the button never is).
  await page.goto(list);
  await expect(redrive.getByRole("button")).toHaveText("Redrive these 2");
  await expect(async () => {
    await page.reload();
    await expect(page.locator(".count-line")).toContainText("2 dead letters", { timeout: 1_000 });
  }).toPass({ timeout: 15_000 });
  // Someone handles one of them before the operator presses: nothing starts,
  // and the list says so and offers what is left.
  consumerSql(`UPDATE dead_letters SET state = 'discarded', resolved_by = 'pete' WHERE consumer = '${consumer}' AND idempotency_key = 'grown:4';`);
  await redrive.getByRole("button").click();
  await expect(page).toHaveURL(/\/dead-letters\?.*answer=/);
  await expect(page.locator(".outcome.refused")).toContainText(
    "The list changed after the page was drawn: it offered 2 dead letters, and now 1 matches. Nothing was started",
  );
  await expect(redrive.getByRole("button")).toHaveText("Redrive this one");
});

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
  await waitForRunToFinish(page, 45_000);
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

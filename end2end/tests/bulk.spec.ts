import { expect, test } from "@playwright/test";
import { expectHydrated, signIn, unknownOutcomes, waitForRunToFinish } from "./helpers";

test("an operator pastes the provider's references and the unknown outcomes they prove are resolved as sent", async ({ page }) => {
  const consumer = "e2e-bulk";
  unknownOutcomes(consumer, "pay", 3);
  await signIn(page, "operator");
  await page.goto("/checks/unknown-past-objective");
  await expectHydrated(page);
  const form = page.locator(".action-form", { hasText: "Resolve as sent, with the provider's references" });
  await expect(form).toBeVisible();

  // A line without its reference: nothing starts, and the page names the line.
  await form.getByLabel("Keys and references").fill(`consumer,key,reference\n${consumer},pay:1,ch_e2e_1\n${consumer},pay:2\n`);
  await form.getByRole("button", { name: "Resolve as sent" }).click();
  await expect(page).toHaveURL(/\/checks\/unknown-past-objective\?answer=/);
  await expect(page.locator(".outcome")).toContainText("line 3: expected 3 fields (consumer,key,reference), found 2");

  // Fixed: the two keys are resolved, each with its own reference; the third is left alone.
  await form.getByLabel("Keys and references").fill(`${consumer},pay:1,ch_e2e_1\n${consumer},pay:2,ch_e2e_2\n`);
  await form.getByLabel("Reason").fill("in the provider's message log");
  await form.getByRole("button", { name: "Resolve as sent" }).click();
  await expect(page).toHaveURL(/\/redrives\/\d+\?answer=/);
  await expect(page.locator("h1")).toContainText("Bulk resolve #");
  await expect(page.locator(".outcome.done")).toContainText("2 unknown outcomes to go through");
  await waitForRunToFinish(page);
  await expect(page.locator(".fields")).toContainText("2 resolved, 0 skipped, 0 waiting");
  await expect(page.locator(".fields")).toContainText("in the provider's message log");
  await expect(page.locator("table tbody tr td:nth-child(4)")).toHaveText(["ch_e2e_1", "ch_e2e_2"]);

  await page.locator("table tbody tr a.key", { hasText: "pay:2" }).click();
  await expect(page.locator("h1 code.key")).toHaveText("pay:2");
  await expect(page.locator("main")).toContainText("ch_e2e_2");
  await page.goto(`/keys/${consumer}/pay%3A3`);
  await expect(page.locator(".timeline")).toContainText("Outcome unknown since");
});

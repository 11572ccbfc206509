import { expect, test } from "@playwright/test";
import { deadLetters, signIn } from "./helpers";

// `payments-oncall` is the demo's operator of the payments team only
// (order-events is payments', reminders growth's).
const keyPage = (consumer: string, key: string) =>
  `/keys/${encodeURIComponent(consumer)}/${encodeURIComponent(key)}`;

test("an operator of payments finds growth's key answered as a missing one, and acts on payments'", async ({ page }) => {
  deadLetters("reminders", "e2e-teams-growth", 1, 1, 5);
  deadLetters("order-events", "e2e-teams-payments", 1, 1, 5);
  await signIn(page, "payments-oncall");
  await expect(page.locator(".account")).toContainText("(operator of payments)");

  // Growth's key answers exactly as a key nobody wrote: the same status,
  // the same words, nothing of its story or its team.
  const missing = await page.goto(keyPage("reminders", "e2e-teams-nobody:1"));
  expect(missing?.status()).toBe(404);
  const missingText = (await page.locator("main").innerText()).replaceAll("e2e-teams-nobody:1", "KEY");
  const refused = await page.goto(keyPage("reminders", "e2e-teams-growth:1"));
  expect(refused?.status()).toBe(404);
  const refusedText = (await page.locator("main").innerText()).replaceAll("e2e-teams-growth:1", "KEY");
  expect(refusedText).toBe(missingText);
  // Past the key pam typed, nothing names growth.
  expect(refusedText).not.toContain("growth");
  await expect(page.locator("main")).not.toContainText("503 e2e");

  // Lists keep to payments' consumers: growth's dead letter is not listed.
  await page.goto("/dead-letters");
  await expect(page.locator("main")).toContainText("e2e-teams-payments:1");
  await expect(page.locator("main")).not.toContainText("e2e-teams-growth:1");
  await expect(page.locator("main tbody")).not.toContainText("reminders");

  // Payments' own key: its dead letter can be replayed.
  const own = await page.goto(keyPage("order-events", "e2e-teams-payments:1"));
  expect(own?.status()).toBe(200);
  const form = page.locator(".action-form", { hasText: "Replay dead letter" });
  await expect(form.getByRole("button", { name: "Replay with the same key" })).toBeVisible();

  // The SLO board holds payments' objectives, none of the fleet's or growth's.
  await page.goto("/slo");
  await expect(page.locator("h2.slo-group")).toHaveText(["Team payments"]);
});

import { expect, test } from "@playwright/test";
import { expectHydrated, signIn } from "./helpers";

test.beforeEach(async ({ page }) => signIn(page, "viewer"));

test("the consumer table sorts worst first, narrows to a team and leads to a consumer's lists", async ({ page }) => {
  await page.goto("/");
  await page.getByRole("link", { name: "Consumers", exact: true }).click();
  await expect(page).toHaveURL(/\/consumers$/);
  await expect(page.locator("h1")).toHaveText("Consumers");
  await expectHydrated(page);

  // The demo's catalogue: eight consumers of three teams, each with its contract.
  const table = page.locator("table.consumer-table");
  const row = (name: string) => table.locator("tbody tr", { has: page.getByRole("link", { name, exact: true }) });
  // (Other tests may add consumers of their own, not in the catalogue.)
  for (const name of ["payment-webhooks", "order-events", "invoices", "reminders", "push-notifications",
    "reminders-rabbitmq", "shipments", "stock-levels"]) {
    await expect(row(name)).toHaveCount(1);
  }
  await expect(row("shipments")).toContainText("fulfilment");
  await expect(row("payment-webhooks")).toContainText("payments");
  await expect(row("payment-webhooks")).toContainText("honours the key");
  await expect(row("reminders")).toContainText("growth");
  await expect(row("reminders")).toContainText("keeps a durable reference");

  // Worst first by open unknown outcomes: the demo's open incident is first.
  await table.getByRole("link", { name: "Open unknown", exact: true }).click();
  await expect(page).toHaveURL(/sort=unknown/);
  const counts = await table.locator("tbody tr td:nth-child(6)").allInnerTexts();
  const numbers = counts.map((c) => Number(c.replace(/[^0-9]/g, "")));
  expect(numbers[0]).toBeGreaterThan(0);
  expect(numbers).toEqual([...numbers].sort((a, b) => b - a));

  // One team's consumers only, still worst first.
  await page.getByLabel("Team").selectOption("growth");
  await page.getByRole("button", { name: "Show" }).click();
  await expect(page).toHaveURL(/team=growth/);
  await expect(page).toHaveURL(/sort=unknown/);
  const teams = await table.locator("tbody tr td:nth-child(2)").allInnerTexts();
  // reminders, push-notifications and reminders-rabbitmq.
  expect(teams.length).toBe(3);
  for (const team of teams) expect(team.trim()).toBe("growth");

  // A consumer's page: its entry, and its own list of unknown outcomes.
  await row("reminders").getByRole("link", { name: "reminders", exact: true }).click();
  await expect(page.locator("h1")).toHaveText("Consumer reminders");
  await expect(page.locator("dl.fields")).toContainText("Sends renewal reminders");
  await expect(page.locator("dl.fields")).toContainText("look the call up by its reference");
  await page.getByRole("link", { name: /open unknown outcomes/ }).click();
  await expect(page).toHaveURL(/\/unknown\?consumer=reminders$/);
  const consumers = await page.locator("table tbody tr td:nth-child(2)").allInnerTexts();
  for (const consumer of consumers) expect(consumer.trim()).toBe("reminders");
});

import { expect, test } from "@playwright/test";
import { signIn } from "./helpers";

test("the SLO page lists every objective and opens one with its alert tiers", async ({ page }) => {
  await signIn(page, "viewer");
  await page.goto("/slo");
  await expect(page.getByRole("heading", { name: "Service level objectives" })).toBeVisible();
  const rows = page.locator(".slo-table tbody tr");
  await expect(rows).toHaveCount(8);
  // The demo's history has traffic: the delivery SLOs have an SLI, not "no data".
  const delivered = rows.filter({ hasText: "not-dead-lettered" });
  await expect(delivered.locator("td").nth(3)).toHaveText(/^\d+\.\d+%$/);
  await delivered.getByRole("link", { name: "not-dead-lettered" }).click();
  await expect(page).toHaveURL(/\/slo\/not-dead-lettered$/);
  await expect(page.getByRole("heading", { name: "Alert tiers" })).toBeVisible();
  await expect(page.locator(".chart-svg title")).toHaveText("not-dead-lettered: SLI over 28d");
  await expect(page.locator(".chart figcaption")).toContainText("intervals with traffic");
  await expect(page.locator("table tbody tr")).toHaveCount(4);
  await expect(page.locator("tbody")).toContainText("13.44×");
});

test("the overview links each SLO tile to its page", async ({ page }) => {
  await signIn(page, "viewer");
  await page.goto("/");
  const tiles = page.locator(".slo-tiles .tile");
  await expect(tiles).toHaveCount(8);
  await tiles.filter({ hasText: "queue-age-60s" }).getByRole("link").click();
  await expect(page).toHaveURL(/\/slo\/queue-age-60s$/);
  await expect(page.getByRole("heading", { name: "queue-age-60s" })).toBeVisible();
});

test("changing the chart range changes the address and the chart", async ({ page }) => {
  await signIn(page, "viewer");
  await page.goto("/");
  const section = page.locator(".chart-section");
  await expect(section.locator(".chart-svg title")).toHaveText("Duplicate delays, last 24h");
  await section.getByRole("link", { name: "6h", exact: true }).click();
  await expect(page).toHaveURL(/\?range=6h$/);
  await expect(section.locator(".chart-svg title")).toHaveText("Duplicate delays, last 6h");
  await expect(section.locator("figcaption")).toContainText("arrived more than five minutes after");
});

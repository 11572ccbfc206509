import { expect, test } from "@playwright/test";
import { expectHydrated, signIn } from "./helpers";

test.beforeEach(async ({ page }) => signIn(page, "viewer"));

test("the consistency checks lead from a count to the keys behind it", async ({ page }) => {
  await page.goto("/");
  await page.getByRole("link", { name: "Checks", exact: true }).click();
  await expect(page).toHaveURL(/\/checks$/);
  await expect(page.locator("h1")).toHaveText("Consistency checks");
  await expectHydrated(page);

  // The demo's open incident leaves unknown outcomes nobody resolved in time
  // (the other tour keys are replayed or resolved by the action tests).
  const row = page.locator("table.check-table tbody tr", { hasText: "Unknown outcomes past their objective" });
  await expect(row).toHaveClass(/has-findings/);
  const count = Number((await row.locator("td.num").innerText()).replace(/[^0-9]/g, ""));
  expect(count).toBeGreaterThan(0);
  await row.getByRole("link").click();
  await expect(page).toHaveURL(/\/checks\/unknown-past-objective$/);
  await expect(page.locator("#findings-heading")).toHaveText("Unknown outcomes past their objective");
  await expect(page.locator(".check-findings .count-line")).toContainText("found · oldest first");

  const first = page.locator(".check-findings tbody tr a.key").first();
  const key = (await first.innerText()).trim();
  await first.click();
  await expect(page.locator("h1 code.key")).toHaveText(key);
  await expect(page.locator(".timeline")).toContainText("Outcome unknown since");
});

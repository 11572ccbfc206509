import { expect, test } from "@playwright/test";
import { expectHydrated, signIn } from "./helpers";

test.beforeEach(async ({ page }) => signIn(page, "viewer"));

test("the consistency checks lead from a count to the dead letter safe to discard", async ({ page }) => {
  await page.goto("/");
  await page.getByRole("link", { name: "Checks", exact: true }).click();
  await expect(page).toHaveURL(/\/checks$/);
  await expect(page.locator("h1")).toHaveText("Consistency checks");
  await expectHydrated(page);

  // The tour's `ship:EU/2026/K-2210` was redriven by the team's own tooling
  // and sent, and its dead letter is still open.
  const row = page.locator("table.check-table tbody tr", { hasText: "Dead letters for keys already sent" });
  await expect(row.locator("td.num")).not.toHaveText("0");
  await row.getByRole("link").click();
  await expect(page).toHaveURL(/\/checks\/dead-letter-already-sent$/);
  await expect(page.locator("#findings-heading")).toHaveText("Dead letters for keys already sent");

  const finding = page.locator(".check-findings tbody tr", { hasText: "ship:EU/2026/K-2210" });
  await expect(finding).toHaveCount(1);
  await expect(finding).toContainText("Dead letter #");
  await finding.locator("a.key").click();
  await expect(page.locator("h1 code.key")).toHaveText("ship:EU/2026/K-2210");
  await expect(page.locator(".flags")).toContainText("Dead letter for a key already sent");
});

import { expect, test } from "@playwright/test";
import { expectHydrated, signIn } from "./helpers";

test("the audit log shows a sign-in and narrows to one actor and action through its form", async ({ page }) => {
  await signIn(page, "operator");
  await page.getByRole("link", { name: "Audit", exact: true }).click();
  await expect(page).toHaveURL(/\/audit$/);
  await expect(page.getByRole("heading", { name: "Audit log" })).toBeVisible();
  await expectHydrated(page);
  const rows = page.locator("table.audit tbody tr");
  await expect(rows.first()).toBeVisible();

  await page.getByLabel("Actor").fill("operator");
  await page.getByLabel("Action").selectOption("login");
  await page.getByRole("button", { name: "Filter" }).click();
  await expect(page).toHaveURL(/\/audit\?actor=operator&action=login/);
  await expect(rows.first()).toContainText("operator operator");
  const count = await rows.count();
  for (let i = 0; i < count; i++) {
    await expect(rows.nth(i).locator("td").nth(1)).toContainText("operator");
    await expect(rows.nth(i).locator("td").nth(2)).toHaveText("login");
  }
  // The filters stay filled in, and an actor no one is matches nothing.
  await expect(page.getByLabel("Actor")).toHaveValue("operator");
  await page.getByLabel("Actor").fill("nobody-at-all");
  await page.getByRole("button", { name: "Filter" }).click();
  await expect(page.getByText("No audit entry matches.")).toBeVisible();
});

import { expect, test } from "@playwright/test";
import { consumerSql, expectHydrated, signIn } from "./helpers";

// A worker took the lease on a charge, called the provider and died: the
// claim stays pending with its lease long expired. The runbook says: ask
// the provider with the key, then resolve it on the key's page.
test("an operator follows an abandoned lease from the checks to its resolution", async ({ page }) => {
  const key = `charge:e2e-${Date.now()} / 50% #🔒`;
  // Leased three days ago, before anything of the demo's day, so it is
  // the oldest finding and first on the list.
  const micros = (Date.now() - 3 * 24 * 3_600_000) * 1000;
  consumerSql(
    "INSERT INTO claims (consumer, idempotency_key, status, status_at, first_delivery_at, last_delivery_at, " +
      "delivery_count, attempts, lease_until) " +
      `VALUES ('payments', '${key}', 'pending', ${micros}, ${micros}, ${micros}, 1, 1, ${micros + 30_000_000});`,
  );

  await signIn(page, "operator");
  await page.goto("/checks");
  const row = page.locator("table.check-table tbody tr", { hasText: "Abandoned leases" });
  await expect(row).toHaveClass(/has-findings/);
  await row.getByRole("link").click();
  await expect(page).toHaveURL(/\/checks\/abandoned-lease$/);
  await page.locator(".check-findings tbody tr a.key", { hasText: key }).click();
  await expect(page.locator("h1 code.key")).toHaveText(key);
  await expectHydrated(page);
  await expect(page.locator(".flags")).toContainText("Ask the provider with the key, then resolve it below");

  const form = page.locator("#resolve");
  await expect(form).toContainText("Resolve the abandoned attempt");
  await form.getByLabel("acted: mark sent, with its reference").check();
  await form.getByLabel("Provider reference").fill("ch_3Nx_confirmed");
  await form.getByRole("button", { name: "Record the outcome" }).click();
  await expect(page.locator(".outcome.done")).toContainText("sent (provider reference ch_3Nx_confirmed");
  await expect(page.locator(".timeline")).toContainText("pending, lease expired");

  // The finding is gone from the check (once the list's two-second read
  // cache has turned over).
  await expect(async () => {
    await page.goto("/checks/abandoned-lease");
    await expect(page.locator(".check-findings")).not.toContainText(key, { timeout: 1_000 });
  }).toPass({ timeout: 15_000 });
});

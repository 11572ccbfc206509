// The README's screenshots, from the demo at a fixed seed: `make screenshots`
// writes them to docs/screenshots/. Not part of the test suite.
import { expect, test, type Page } from "@playwright/test";
import { expectHydrated } from "../tests/helpers";

const out = (name: string) => `../docs/screenshots/${name}.png`;
const keyPage = (consumer: string, key: string) =>
  `/keys/${encodeURIComponent(consumer)}/${encodeURIComponent(key)}`;

test.use({ viewport: { width: 1280, height: 860 } });

async function shoot(page: Page, path: string, name: string) {
  await page.goto(path);
  await expectHydrated(page);
  await page.screenshot({ path: out(name) });
}

test("screenshots for the README", async ({ page }) => {
  test.setTimeout(240_000);
  // global-setup.ts waited for the demo's history; the hourly rollups the
  // SLO pages read start once it is written: give them a moment.
  await page.waitForTimeout(5_000);

  // The alert-link flow: an alert's link, signed out, goes through sign-in
  // and lands on the key.
  // A key with two open dead letters: the page shows both, and the replay form.
  const alertLink = keyPage("order-events", "refund:EU/2026/Ø-1843");
  await page.goto(alertLink);
  await expect(page).toHaveURL(/\/login\?next=/);
  await page.getByLabel("Name").fill("operator");
  await page.screenshot({ path: out("alert-link-sign-in") });
  await page.getByLabel("Password").fill("operator");
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.locator("h1 code.key")).toHaveText("refund:EU/2026/Ø-1843");
  await expectHydrated(page);
  await page.screenshot({ path: out("key") });

  await shoot(page, "/", "overview");
  // The overview's charts, the day's incidents in them.
  await page.locator(".chart-section").first().scrollIntoViewIfNeeded();
  await page.evaluate(() => document.querySelector(".chart-section")?.scrollIntoView());
  await page.screenshot({ path: out("charts") });
  await shoot(page, "/unknown", "unknown");
  // The consumer table, worst first by open unknown outcomes: one team's
  // incident while the other team's consumers are healthy.
  await shoot(page, "/consumers?sort=unknown", "consumers");
  await shoot(page, "/slo", "slos");
  // One team's objectives: each of its consumers its own.
  await shoot(page, "/slo?team=payments", "slo-team");
  // One SLO's page: its burn rates against their thresholds, the retry
  // storm and the provider outage standing out.
  await page.goto("/slo/duplicate-claim-rate");
  await expectHydrated(page);
  await page.getByRole("heading", { name: "Alert tiers" }).scrollIntoViewIfNeeded();
  await page.locator(".chart-svg").first().scrollIntoViewIfNeeded();
  await page.screenshot({ path: out("slo") });
});

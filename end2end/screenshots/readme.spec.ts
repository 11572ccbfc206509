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
  // The demo writes its two days of history while it already serves. The
  // last thing it writes is the incident still open at its end: six
  // reminders to accounts numbered from 5,000,000 whose responses were lost,
  // the last twelve minutes before the end. Wait for all six, then a little.
  await page.goto("/login");
  await page.getByLabel("Name").fill("viewer");
  await page.getByLabel("Password").fill("viewer");
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect
    .poll(
      async () => {
        await page.goto("/unknown");
        const keys = await page.locator("table tbody tr a.key").allInnerTexts();
        return keys.filter((key) => /^renewal:account-5\d{6}:/.test(key)).length;
      },
      { timeout: 200_000, intervals: [5_000] },
    )
    .toBe(6);
  await page.waitForTimeout(5_000);
  await page.context().clearCookies();

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
  await shoot(page, "/slo", "slos");
});

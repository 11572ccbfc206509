import { expect, test, type Page } from "@playwright/test";
import { expectHydrated, signIn, watchConsole } from "./helpers";

test.beforeEach(async ({ page }) => signIn(page, "viewer"));

// The demo writes its history in the background; wait until the overview lists something.
async function openOverviewWithUnknowns(page: Page) {
  await expect(async () => {
    await page.goto("/");
    await expect(page.locator("#unknown-heading ~ table tbody tr a.key").first()).toBeVisible({ timeout: 1_000 });
  }).toPass({ timeout: 45_000 });
}

test("from the overview, an unknown outcome's link opens that key's page", async ({ page }) => {
  const errors = watchConsole(page);
  await openOverviewWithUnknowns(page);
  await expectHydrated(page);

  const link = page.locator("#unknown-heading ~ table tbody tr a.key").first();
  const key = (await link.innerText()).trim();
  await link.click();

  await expect(page).toHaveURL(/\/keys\/[^/]+\/[^/]+$/);
  await expect(page.locator("h1 code.key")).toHaveText(key);
  await expect(page.locator("#claim-heading .badge")).toHaveText("unknown");
  await expectHydrated(page);
  expect(errors).toEqual([]);
});

test("a deep link built with encodeURIComponent opens a key with slashes and non-ASCII characters", async ({ page }) => {
  const errors = watchConsole(page);
  const consumer = "order-events";
  const key = "refund:EU/2026/Ø-1842";
  await expect(async () => {
    const response = await page.goto(`/keys/${encodeURIComponent(consumer)}/${encodeURIComponent(key)}`);
    expect(response?.status()).toBe(200);
  }).toPass({ timeout: 45_000 });

  await expect(page.locator("h1 code.key")).toHaveText(key);
  await expect(page.locator(".key-consumer strong")).toHaveText(consumer);
  await expectHydrated(page);
  // Hydration re-reads the key from the address bar: still byte-exact.
  await expect(page.locator("h1 code.key")).toHaveText(key);
  expect(errors).toEqual([]);
});

test("a key with /, %, # and a non-ASCII character opens by deep link, decoded once", async ({ page }) => {
  // In the demo's tour. "%25" must stay "%", "%2F" must stay "/", "%23" must not become a fragment.
  const key = "return:DK/2026/Ø-PO #7 50%";
  await expect(async () => {
    const response = await page.goto(`/keys/order-events/${encodeURIComponent(key)}`);
    expect(response?.status()).toBe(200);
  }).toPass({ timeout: 45_000 });
  await expect(page.locator("h1 code.key")).toHaveText(key);
  await expectHydrated(page);
  await expect(page.locator("h1 code.key")).toHaveText(key);

  const missing = await page.goto(`/keys/order-events/${encodeURIComponent("a%2Fb")}`);
  expect(missing?.status()).toBe(404);
  await expect(page.getByRole("alert")).toContainText("“a%2Fb”");
});

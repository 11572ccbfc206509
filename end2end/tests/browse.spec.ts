import { expect, test, type Page } from "@playwright/test";
import { signIn } from "./helpers";

test.beforeEach(async ({ page }) => signIn(page, "viewer"));

async function waitForDemo(page: Page) {
  await expect(async () => {
    await page.goto("/unknown");
    await expect(page.locator("table tbody tr a.key").first()).toBeVisible({ timeout: 1_000 });
  }).toPass({ timeout: 45_000 });
}

test("from the unknown-outcome list to a key page and back", async ({ page }) => {
  await waitForDemo(page);
  await expect(page.locator("html")).toHaveAttribute("data-hydrated", "true");
  const link = page.locator("table tbody tr a.key").first();
  const key = (await link.innerText()).trim();
  await link.click();
  await expect(page.locator("h1 code.key")).toHaveText(key);
  await expect(page.locator(".timeline")).toContainText("Outcome unknown since");
  await page.goBack();
  await expect(page).toHaveURL(/\/unknown$/);
  await expect(page.locator("table tbody tr a.key").first()).toHaveText(key);
});

test("a prefix search pages forward twice without repeating a key", async ({ page }) => {
  await waitForDemo(page);
  await page.goto("/keys?q=renewal%3A&limit=5");
  await expect(page.locator(".count-line")).toContainText("keys start with this text");
  const seen: string[] = [];
  for (let pageNumber = 0; pageNumber < 3; pageNumber++) {
    const keys = await page.locator("table tbody tr a.key").allInnerTexts();
    expect(keys.length).toBe(5);
    for (const key of keys) {
      expect(key.startsWith("renewal:")).toBe(true);
      expect(seen).not.toContain(key);
      seen.push(key);
    }
    if (pageNumber < 2) await page.getByRole("link", { name: "Next page →" }).click();
  }
  expect(page.url()).toContain("cursor=");
  await expect(page.getByRole("link", { name: "First page" })).toBeVisible();
});

test("switching the time zone changes the times on the page", async ({ page }) => {
  await waitForDemo(page);
  const time = page.locator("table tbody tr time").first();
  await expect(time).toContainText("UTC");
  const iso = await time.getAttribute("datetime");
  const before = await time.innerText();

  await page.locator("#zone-select").selectOption("Asia/Kolkata");
  await expect(page.locator("#zone-select")).toHaveValue("Asia/Kolkata");
  const after = page.locator(`table tbody tr time[datetime="${iso}"]`).first();
  await expect(after).toContainText("IST");
  expect(await after.innerText()).not.toBe(before);

  // Back to UTC for the other tests.
  await page.locator("#zone-select").selectOption("UTC");
  await expect(page.locator("table tbody tr time").first()).toContainText("UTC");
});

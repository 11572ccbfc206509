// Before any test: wait once for the demo to have written its history.
//
// Playwright starts the server on an empty database, and the demo writes
// its day (or two) of history while it already serves: 35 s for a day here,
// longer on a busy machine. Tests that each waited for "their" key spent
// their own time budget on it, and a slow start failed whichever came
// first. The last thing the history holds is the incident still open at its
// end: six reminders to accounts numbered from 5,000,000 whose responses
// were lost, the last twelve minutes before the end. When all six are on
// /unknown, the history is written.
import { chromium, expect, type FullConfig } from "@playwright/test";

export default async function waitForDemoHistory(config: FullConfig) {
  const { baseURL, launchOptions } = config.projects[0].use;
  const browser = await chromium.launch(launchOptions);
  try {
    const page = await browser.newPage({ baseURL });
    await expect(async () => {
      await page.goto("/login");
      await page.getByLabel("Name").fill("viewer");
      await page.getByLabel("Password").fill("viewer");
      await page.getByRole("button", { name: "Sign in" }).click();
      await expect(page.locator(".account")).toContainText("Signed in as viewer");
    }).toPass({ timeout: 60_000 });
    await expect
      .poll(
        async () => {
          await page.goto("/unknown");
          const keys = await page.locator("table tbody tr a.key").allInnerTexts();
          return keys.filter((key) => /^renewal:account-5\d{6}:/.test(key)).length;
        },
        { message: "the demo's history is written", timeout: 240_000, intervals: [2_000] },
      )
      .toBe(6);
  } finally {
    await browser.close();
  }
}

// Sign-in through the company's identity provider: a real OpenID provider
// (end2end/oidc-provider.mjs, oidc-provider from npm) on 127.0.0.1, with
// its own login and consent pages. `oncall` is in the `sre` group, which
// Idem maps to operator (Makefile, E2E_OIDC).
import { expect, test, type Page } from "@playwright/test";

const provider = `http://${process.env.OIDC_PROVIDER_ADDR ?? "127.0.0.1:3951"}`;
const consumer = "order-events";
const key = "refund:EU/2026/Ø-1842";
const deep = `/keys/${encodeURIComponent(consumer)}/${encodeURIComponent(key)}?from=alert`;

/** At the provider: log in as `login` (any password) and allow Idem. */
async function atProvider(page: Page, login: string) {
  await expect(page).toHaveURL(new RegExp(`^${provider}/`));
  await page.locator("input[name=login]").fill(login);
  await page.locator("input[name=password]").fill("any password");
  await page.getByRole("button", { name: "Sign-in" }).click();
  await page.getByRole("button", { name: "Continue" }).click();
}

/** The directory's administrator changes `account`'s groups. */
async function setGroups(page: Page, account: string, groups: string[]) {
  const answer = await page.request.post(`${provider}/test/groups`, {
    data: { account, groups },
  });
  expect(answer.ok()).toBeTruthy();
}

test("an alert link signs in through the company's provider and lands on that key's page as an operator", async ({ page }) => {
  await page.goto(deep);
  await expect(page).toHaveURL(/\/login\?next=/);
  await page.getByRole("link", { name: "Sign in with Example SSO" }).click();
  await atProvider(page, "oncall");
  await expect(page).toHaveURL(new RegExp(`${deep.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`));
  await expect(page.locator("h1 code.key")).toHaveText(key);
  await expect(page.locator(".account")).toContainText("Signed in as oncall@example.com (operator)");
});

test("a group removed at the provider drops the role at the next sign-in and ends the earlier session", async ({ browser }) => {
  const laptop = await browser.newPage();
  try {
    await laptop.goto("/login");
    await laptop.getByRole("link", { name: "Sign in with Example SSO" }).click();
    await atProvider(laptop, "oncall");
    await expect(laptop.locator(".account")).toContainText("(operator)");

    await setGroups(laptop, "oncall", ["payments"]);
    // She signs in again on her phone (another browser).
    const fresh = await browser.newContext();
    const other = await fresh.newPage();
    await other.goto("/login");
    await other.getByRole("link", { name: "Sign in with Example SSO" }).click();
    await atProvider(other, "oncall");
    await expect(other.locator(".account")).toContainText("Signed in as oncall@example.com (viewer)");

    await laptop.reload();
    await expect(laptop).toHaveURL(/\/login/);
    await fresh.close();
  } finally {
    await setGroups(laptop, "oncall", ["sre"]);
    await laptop.close();
  }
});

test("signing out here and at the provider ends both sessions", async ({ page }) => {
  await page.goto("/login");
  await page.getByRole("link", { name: "Sign in with Example SSO" }).click();
  await atProvider(page, "oncall");
  await expect(page.locator(".account")).toContainText("oncall@example.com");

  await page.getByRole("button", { name: "Sign out here and at your identity provider" }).click();
  await expect(page).toHaveURL(new RegExp(`^${provider}/session/end`));
  await page.getByRole("button", { name: "Yes, sign me out" }).click();
  await expect(page).toHaveURL(/\/login$/);

  // The provider asks who you are again: its session ended too.
  await page.getByRole("link", { name: "Sign in with Example SSO" }).click();
  await expect(page.locator("input[name=login]")).toBeVisible();
});

test("a declined consent ends on a page that says so and offers to start again", async ({ page }) => {
  await page.goto(deep);
  await page.getByRole("link", { name: "Sign in with Example SSO" }).click();
  await page.locator("input[name=login]").fill("oncall");
  await page.locator("input[name=password]").fill("any password");
  await page.getByRole("button", { name: "Sign-in" }).click();
  await page.getByRole("link", { name: "[ Cancel ]" }).click();
  await expect(page.getByRole("heading", { level: 1 })).toHaveText("Sign-in was declined");
  await page.getByRole("link", { name: "Sign in again" }).click();
  await expect(page).toHaveURL(/\/login\?next=%2Fkeys%2F/);
});

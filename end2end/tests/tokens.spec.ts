import { expect, test } from "@playwright/test";
import { signIn, watchConsole } from "./helpers";

// An admin makes a token on /tokens: its secret is shown once, on a page
// of its own; the token opens the API, is listed (never its secret) and
// revoked from the list, after which it opens nothing.
test("an admin makes a token, uses it on the API and revokes it", async ({ page, request }) => {
  const errors = watchConsole(page);
  await signIn(page, "admin");
  await page.getByRole("link", { name: "Tokens" }).click();
  await expect(page.locator("h1")).toHaveText("Tokens");

  const name = `e2e-bot-${Date.now()}`;
  await page.getByLabel("Name").fill(name);
  await page.getByLabel("Owner (an account)").fill("operator");
  await page.getByLabel("Role").selectOption("viewer");
  await page.getByLabel(/Expires after/).fill("1d");
  await page.getByRole("button", { name: "Make the token" }).click();
  await expect(page.locator("h1")).toHaveText("Token created");
  const text = await page.locator("p[role=alert]").innerText();
  const secret = text.match(/idem_[A-Za-z0-9_-]+/)?.[0] ?? "";
  expect(secret).not.toBe("");

  const auth = { Authorization: `Bearer ${secret}` };
  const unknown = await request.get("/api/v1/unknown", { headers: auth });
  expect(unknown.status()).toBe(200);
  expect((await unknown.json()).items).toBeInstanceOf(Array);

  await page.getByRole("link", { name: "Back to the tokens" }).click();
  const row = page.locator("tr", { hasText: name });
  await expect(row).toContainText("operator");
  await expect(row).toContainText("live");
  await expect(page.locator("main")).not.toContainText(secret);
  await row.getByRole("button", { name: "Revoke" }).click();
  await expect(page.locator("main")).toContainText(`Token “${name}” is revoked`);
  await expect(page.locator("tr", { hasText: name })).toContainText("revoked");
  expect((await request.get("/api/v1/unknown", { headers: auth })).status()).toBe(401);
  expect(errors).toEqual([]);
});

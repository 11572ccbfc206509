import { expect, test } from "@playwright/test";
import { signIn } from "./helpers";

const consumer = "order-events";
const key = "refund:EU/2026/Ø-1842";

test("an anonymous visit to a deep key link goes through sign-in and lands on that key with its query", async ({ page }) => {
  const deep = `/keys/${encodeURIComponent(consumer)}/${encodeURIComponent(key)}?from=alert`;
  await expect(async () => {
    await page.goto(deep);
    await expect(page).toHaveURL(/\/login\?next=/, { timeout: 1_000 });
  }).toPass({ timeout: 30_000 });
  await page.getByLabel("Name").fill("viewer");
  await page.getByLabel("Password").fill("viewer");
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page).toHaveURL(new RegExp(`${deep.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`));
  await expect(page.locator("h1 code.key")).toHaveText(key);
});

test("a wrong password gets one generic message", async ({ page }) => {
  await page.goto("/login");
  await page.getByLabel("Name").fill("viewer");
  await page.getByLabel("Password").fill("not-the-password");
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByRole("alert")).toHaveText(
    "Sign-in failed. Check the name and password, and try again.",
  );
});

test("a viewer sees no action buttons, and a forged action request from the page is refused", async ({ page }) => {
  await signIn(page, "viewer");
  await page.goto(`/keys/${encodeURIComponent(consumer)}/${encodeURIComponent(key)}`);
  await expect(page.locator("h1 code.key")).toHaveText(key);
  await expect(page.locator("main button")).toHaveCount(0);
  const status = await page.evaluate(async () => {
    const response = await fetch("/api/act/replay_dead_letter", { method: "POST", body: "id=1" });
    return response.status;
  });
  expect(status).toBe(403);
});

test("signing out ends the session", async ({ page }) => {
  await signIn(page, "viewer");
  await page.getByRole("button", { name: "Sign out" }).click();
  await expect(page).toHaveURL(/\/login$/);
  await page.goto("/unknown");
  await expect(page).toHaveURL(/\/login\?next=%2Funknown$/);
});

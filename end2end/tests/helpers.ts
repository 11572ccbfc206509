import { expect, type Page } from "@playwright/test";

/** Signs in through the real form (demo accounts: the password is the name). */
export async function signIn(page: Page, name = "viewer") {
  await page.goto("/login");
  await page.getByLabel("Name").fill(name);
  await page.getByLabel("Password").fill(name);
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.locator(".account")).toContainText(`Signed in as ${name}`);
}

/** Console errors and uncaught exceptions (CSP violations included). */
export function watchConsole(page: Page): string[] {
  const errors: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(message.text());
  });
  page.on("pageerror", (error) => errors.push(error.message));
  return errors;
}

export async function expectHydrated(page: Page) {
  await expect(page.locator("html")).toHaveAttribute("data-hydrated", "true");
}

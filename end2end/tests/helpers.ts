import { execFileSync } from "node:child_process";

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

/**
 * Runs SQL on the demo's database the way a consumer writes it: another
 * process on the same SQLite file (`DATABASE_URL`, which `make e2e` sets).
 */
export function consumerSql(statements: string) {
  const url = process.env.DATABASE_URL ?? "";
  const file = url.replace(/^sqlite:\/\//, "").replace(/\?.*$/, "");
  if (!url.startsWith("sqlite://")) throw new Error(`not a SQLite demo database: ${url}`);
  execFileSync("sqlite3", ["-cmd", ".timeout 10000", file, statements]);
}

/**
 * Dead letters of `consumer` for keys `${prefix}:n`, each with a claim that
 * failed (so a redrive finds them safe), dead-lettered `minutesAgo`.
 */
export function deadLetters(consumer: string, prefix: string, from: number, count: number, minutesAgo: number) {
  const micros = (Date.now() - minutesAgo * 60_000) * 1000;
  const rows: string[] = [];
  for (let n = from; n < from + count; n++) {
    const key = `${prefix}:${n}`;
    rows.push(
      `INSERT INTO claims (consumer, idempotency_key, status, status_at, first_delivery_at, last_delivery_at, delivery_count, attempts, last_error) ` +
        `VALUES ('${consumer}', '${key}', 'failed', ${micros}, ${micros}, ${micros}, 3, 3, '503 e2e');`,
      `INSERT INTO dead_letters (consumer, queue, idempotency_key, message_id, payload, delivery_count, first_failure_at, dead_lettered_at, last_error) ` +
        `VALUES ('${consumer}', '${consumer}.fifo', '${key}', 'm-${key}', '{}', 3, ${micros}, ${micros + n}, '503 e2e, grown list');`,
    );
  }
  consumerSql(`BEGIN; ${rows.join(" ")} COMMIT;`);
}

/** Unknown outcomes of `consumer` for keys `${prefix}:n`, unknown since `minutesAgo`. */
export function unknownOutcomes(consumer: string, prefix: string, count: number, minutesAgo = 360) {
  const micros = (Date.now() - minutesAgo * 60_000) * 1000;
  const rows: string[] = [];
  for (let n = 1; n <= count; n++) {
    rows.push(
      `INSERT INTO claims (consumer, idempotency_key, status, status_at, first_delivery_at, last_delivery_at, delivery_count, attempts, last_error) ` +
        `VALUES ('${consumer}', '${prefix}:${n}', 'unknown', ${micros}, ${micros}, ${micros}, 1, 1, 'timeout e2e');`,
    );
  }
  consumerSql(`BEGIN; ${rows.join(" ")} COMMIT;`);
}

/** Reloads a bulk run's page (`/redrives/N`) until it says the run finished. */
export async function waitForRunToFinish(page: Page, timeout = 30_000) {
  await expect(async () => {
    await page.reload();
    await expect(page.locator(".fields")).toContainText("finished", { timeout: 1_000 });
  }).toPass({ timeout });
}

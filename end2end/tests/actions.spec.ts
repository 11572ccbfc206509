import { expect, test, type Page } from "@playwright/test";
import { signIn } from "./helpers";

const orders = "order-events";
const keyPage = (key: string) => `/keys/${encodeURIComponent(orders)}/${encodeURIComponent(key)}`;

async function openKey(page: Page, key: string) {
  await expect(async () => {
    const response = await page.goto(keyPage(key));
    expect(response?.status()).toBe(200);
  }).toPass({ timeout: 45_000 });
}

test("words in a crafted link never show as an action's answer", async ({ page }) => {
  await signIn(page, "operator");
  // An open dead letter's page has a replay form. The tour's are the only
  // ones sure to be open (the demo's on-call replays the rest), and the
  // tests below replay them all: this one comes first and only reads.
  await openKey(page, "ship:EU/2026/K-2210");
  await page.locator("a[href^='/dead-letters/']").first().click();
  await expect(page.locator("form[action*='replay_dead_letter']")).toHaveCount(1);
  const path = new URL(page.url()).pathname;
  const replayPath = await page.locator("form[action*='replay_dead_letter']").first().getAttribute("action");
  expect(replayPath).toMatch(/^\/api\/act\/replay_dead_letter/);
  const done = Buffer.from(JSON.stringify({ Done: { audit_id: 1, outbox_id: null, summary: "Refunds sent. HACKED" } })).toString("base64url");
  const error = Buffer.from(JSON.stringify({ BadRequest: "Call +1 555 0100. HACKED" })).toString("base64");
  for (const crafted of [
    `${path}?outcome=${done}`,
    `${path}?answer=HACKED`,
    `${path}?__path=${encodeURIComponent(replayPath ?? "")}&__err=${encodeURIComponent(error)}`,
  ]) {
    await page.goto(crafted);
    await expect(page.locator("html")).toHaveAttribute("data-hydrated", "true");
    await expect(page.locator("form[action*='replay_dead_letter']")).toHaveCount(1);
    await expect(page.locator("body")).not.toContainText("HACKED");
  }
});

test("an operator replays a dead letter and watches the key reach sent", async ({ page }) => {
  await signIn(page, "operator");
  await openKey(page, "refund:EU/2026/Ø-1842");
  const form = page.locator(".action-form", { hasText: "Replay dead letter" });
  await expect(form.locator(".verdict")).toContainText("Safe to replay");
  await form.getByRole("button", { name: "Replay with the same key" }).click();
  await expect(page.locator(".outcome.done")).toContainText("replayed through outbox row");
  // The demo's relay publishes the replay and its consumer processes it.
  await expect(async () => {
    await page.reload();
    await expect(page.locator("#claim-heading .badge")).toHaveText("sent", { timeout: 1_000 });
  }).toPass({ timeout: 30_000 });
  await expect(page.locator(".timeline")).toContainText("operator (operator) replay: open → replayed");
});

test("replaying a dead letter whose key is sent is blocked until overridden with a reason", async ({ page }) => {
  await signIn(page, "operator");
  await openKey(page, "ship:EU/2026/K-2210");
  const form = page.locator(".action-form", { hasText: "Replay dead letter" });
  await expect(form.locator(".verdict")).toContainText("Blocked: the effect already happened");
  await form.getByRole("button", { name: "Replay with the same key" }).click();
  await expect(page.locator(".outcome.refused")).toContainText("To replay anyway, tick the override and give a reason");
  await form.getByLabel("Replay anyway (override the verdict)").check();
  await form.getByLabel("Reason (required for an override)").fill("the consumer's claims were restored from an old backup");
  await form.getByRole("button", { name: "Replay with the same key" }).click();
  await expect(page.locator(".outcome.done")).toBeVisible();
  await expect(page.locator(".timeline")).toContainText("override (Blocked: the effect already happened)");
});

test("an operator resolves an unknown outcome as sent with the provider reference", async ({ page }) => {
  await signIn(page, "operator");
  await openKey(page, "return:DK/2026/Ø-PO #7 50%");
  const form = page.locator("#resolve");
  await form.getByLabel("acted: mark sent, with its reference").check();
  await form.getByLabel("Provider reference").fill("ful_confirmed_by_phone");
  await form.getByRole("button", { name: "Record the outcome" }).click();
  await expect(page.locator(".outcome.done")).toContainText("sent (provider reference ful_confirmed_by_phone");
  await expect(page.locator("#claim-heading .badge")).toHaveText("sent");
});

test("two replays from one key page: each replays its own dead letter and says so", async ({ page }) => {
  await signIn(page, "operator");
  await openKey(page, "refund:EU/2026/Ø-1843");
  const forms = page.locator(".action-form", { hasText: "Replay dead letter #" });
  await expect(forms).toHaveCount(2);
  const ids: string[] = [];
  for (const form of await forms.all()) {
    ids.push(((await form.locator("h3").innerText()).match(/#(\d+)/) ?? [])[1]);
  }
  const first = page.locator(".action-form", { hasText: `Replay dead letter #${ids[0]}` });
  await first.getByRole("button", { name: "Replay with the same key" }).click();
  await expect(page.locator(".outcome.done")).toContainText(`Dead letter #${ids[0]} replayed`);
  const second = page.locator(".action-form", { hasText: `Replay dead letter #${ids[1]}` });
  await second.getByRole("button", { name: "Replay with the same key" }).click();
  await expect(page.locator(".outcome.done")).toContainText(`Dead letter #${ids[1]} replayed`);
  // The first letter's number as a whole number: "#25" is in "outbox row #2579".
  await expect(page.locator(".outcome.done")).not.toContainText(new RegExp(`#${ids[0]}\\b`));
  // Both reached the database: two replays in the key's audit trail.
  await page.reload();
  await expect(page.locator(".timeline .event.audit", { hasText: "replay: open → replayed" })).toHaveCount(2);
  await expect(page.locator(".action-form", { hasText: "Replay dead letter #" })).toHaveCount(0);
});

test("resolving then replaying on one key page does both, each answer naming its own target", async ({ page }) => {
  await signIn(page, "operator");
  await openKey(page, "charge:EU/2026/Ø-77");
  const resolve = page.locator("#resolve");
  await resolve.getByLabel("did not act, and it must not be retried: mark failed").check();
  await resolve.getByLabel("Reason (required for “failed” without a retry)").fill("the provider has no record of the charge");
  await resolve.getByRole("button", { name: "Record the outcome" }).click();
  await expect(page.locator(".outcome.done")).toContainText("Outcome resolved: failed");
  await expect(page.locator("#claim-heading .badge")).toHaveText("failed");
  const replay = page.locator(".action-form", { hasText: "Replay dead letter #" });
  const id = ((await replay.locator("h3").innerText()).match(/#(\d+)/) ?? [])[1];
  await expect(replay.locator(".verdict")).toContainText("Safe to replay");
  await replay.getByRole("button", { name: "Replay with the same key" }).click();
  await expect(page.locator(".outcome.done")).toContainText(`Dead letter #${id} replayed`);
  await expect(page.locator(".outcome.done")).not.toContainText("Outcome resolved");
  await page.reload();
  await expect(page.locator(".timeline .event.audit")).toHaveCount(2);
});

test("a double-clicked confirm button has one effect", async ({ page }) => {
  await signIn(page, "operator");
  await page.goto("/unknown");
  const first = page.locator("table tbody tr").first();
  const key = (await first.locator("a.key").innerText()).trim();
  await first.getByRole("link", { name: "Resolve" }).click();
  await expect(page.locator("h1 code.key")).toHaveText(key);
  const form = page.locator("#resolve");
  await form.getByLabel("did not act: mark failed and retry").check();
  await form.getByRole("button", { name: "Record the outcome" }).dblclick();
  await expect(page.locator(".outcome.done")).toBeVisible();
  await page.reload();
  await expect(page.locator(".timeline .event.audit")).toHaveCount(1);
  // One retry queued through the outbox, not two.
  await expect(page.locator("#outbox-heading + table tbody tr", { hasText: "resolution" })).toHaveCount(1);
});

test("a pressed confirm button says the action is under way and cannot be pressed again", async ({ page }) => {
  await signIn(page, "operator");
  // The demo's on-call resolves unknown outcomes too: take one still open.
  await expect(async () => {
    await page.goto("/unknown");
    await page.locator("table tbody tr").first().getByRole("link", { name: "Resolve" }).click();
    await expect(page.locator("#resolve")).toBeVisible({ timeout: 1_000 });
  }).toPass({ timeout: 30_000 });
  await expect(page.locator("html")).toHaveAttribute("data-hydrated", "true");
  // What the pressed button looked like while its post was in flight, kept
  // where it outlives the page (the post replaces it).
  await page.evaluate(() => {
    window.addEventListener("submit", (event) => {
      const button = (event as SubmitEvent).submitter as HTMLButtonElement;
      setTimeout(() => {
        const seen = { text: button.textContent, disabled: button.disabled };
        sessionStorage.setItem("pressed", JSON.stringify(seen));
      });
    });
  });
  // A slow database: the answer takes a second.
  await page.route("**/api/act/**", async (route) => {
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await route.continue();
  });
  const form = page.locator("#resolve");
  await form.getByLabel("did not act: mark failed and retry").check();
  await form.getByRole("button", { name: "Record the outcome" }).click();
  // Done, or a conflict if the demo's on-call got there in the meantime.
  await expect(page.locator("p.outcome")).toBeVisible();
  const pressed = await page.evaluate(() => JSON.parse(sessionStorage.getItem("pressed") ?? "null"));
  expect(pressed).toEqual({ text: "Recording…", disabled: true });
  await page.unroute("**/api/act/**");
});

test.describe("without JavaScript", () => {
  test.use({ javaScriptEnabled: false });

  test("the forms still work: a plain post, then the page with the outcome", async ({ page }) => {
    await signIn(page, "operator");
    await page.goto("/unknown");
    const link = page.locator("table tbody tr a.key").first();
    const key = (await link.innerText()).trim();
    await page.locator("table tbody tr").first().getByRole("link", { name: "Resolve" }).click();
    const form = page.locator("#resolve");
    await form.getByLabel("did not act, and it must not be retried: mark failed").check();
    await form.getByLabel("Reason (required for “failed” without a retry)").fill("the provider confirmed it rejected the request");
    await form.getByRole("button", { name: "Record the outcome" }).click();
    await expect(page.locator(".outcome.done")).toContainText("Outcome resolved: failed");
    await expect(page.locator("h1 code.key")).toHaveText(key);
    await expect(page.locator("#claim-heading .badge")).toHaveText("failed");
    // The answer came from the server's memory of this session, named by
    // the action id; the address carries no words.
    expect(page.url()).toContain("answer=");
    expect(page.url()).not.toContain("outcome=");
    await page.reload();
    await expect(page.locator(".outcome.done")).toHaveCount(0);
  });
});

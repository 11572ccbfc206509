import { expect, test } from "@playwright/test";
import { signIn, unknownOutcomes } from "./helpers";

test("the SLO page lists every objective and opens one with its alert tiers", async ({ page }) => {
  await signIn(page, "viewer");
  await page.goto("/slo");
  await expect(page.getByRole("heading", { name: "Service level objectives" })).toBeVisible();
  // The fleet's eight built-in objectives first, then each team's.
  await expect(page.locator("h2.slo-group")).toHaveText(["Every consumer", /^Team /, /^Team /, /^Team /]);
  const rows = page.locator(".slo-table").first().locator("tbody tr");
  await expect(rows).toHaveCount(8);
  // The demo's history has traffic: the delivery SLOs have an SLI, not "no data".
  const delivered = rows.filter({ has: page.getByRole("link", { name: "not-dead-lettered", exact: true }) });
  await expect(delivered.locator("td").nth(4)).toHaveText(/^\d+\.\d+%$/);
  await delivered.getByRole("link", { name: "not-dead-lettered" }).click();
  await expect(page).toHaveURL(/\/slo\/not-dead-lettered$/);
  await expect(page.getByRole("heading", { name: "Alert tiers" })).toBeVisible();
  // The SLI, the budget remaining and a burn-rate chart per tier, all drawn.
  const charts = page.locator(".chart-svg svg > title");
  await expect(charts).toHaveText([
    "not-dead-lettered: SLI over 28d",
    "not-dead-lettered: error budget remaining over 28d",
    "not-dead-lettered: burn rate over 1h (page at 13.44×)",
    "not-dead-lettered: burn rate over 6h (page at 5.60×)",
    "not-dead-lettered: burn rate over 1d (ticket at 2.80×)",
    "not-dead-lettered: burn rate over 3d (ticket at 0.93×)",
  ]);
  await expect(page.locator(".chart figcaption").first()).toContainText(/intervals with \d+ events or more/);
  await expect(page.locator("table tbody tr")).toHaveCount(4);
  await expect(page.locator("tbody")).toContainText("13.44×");
});

test("the overview links each SLO tile to its page", async ({ page }) => {
  await signIn(page, "viewer");
  await page.goto("/");
  // The eight built-ins, the payments team's two objectives, growth's one
  // and fulfilment's one: a per-consumer objective is one tile, its worst
  // consumer's.
  const tiles = page.locator(".slo-tiles .tile");
  await expect(tiles).toHaveCount(12);
  await expect(tiles.filter({ hasText: "growth-queue-age-5m · " })).toHaveCount(1);
  await tiles.filter({ hasText: "queue-age-60s" }).getByRole("link").click();
  await expect(page).toHaveURL(/\/slo\/queue-age-60s$/);
  await expect(page.getByRole("heading", { name: "queue-age-60s", exact: true })).toBeVisible();
});

test("a team's SLO page holds its consumers' objectives, each to its own page", async ({ page }) => {
  await signIn(page, "viewer");
  await page.goto("/slo");
  await page.locator("select[name=team]").selectOption("payments");
  await page.getByRole("button", { name: "Show" }).click();
  await expect(page).toHaveURL(/\/slo\?team=payments$/);
  await expect(page.locator("h2.slo-group")).toHaveText(["Team payments"]);
  await expect(page.locator(".filters .count-line")).toHaveText("4 objectives of team payments");
  // Each payments consumer its own dead-letter objective; the ledger's webhooks hold a tighter one.
  const rows = page.locator(".slo-table tbody tr");
  const webhooks = rows.filter({ hasText: "payment-webhooks" });
  await expect(webhooks.locator("td").nth(3)).toHaveText("99.950%");
  await expect(rows.filter({ hasText: "order-events" }).locator("td").nth(3)).toHaveText("99.000%");
  await expect(page.locator("tbody")).not.toContainText("growth-queue-age-5m");
  await webhooks.getByRole("link", { name: "payments-not-dead-lettered" }).click();
  await expect(page).toHaveURL(/\/slo\/payments-not-dead-lettered\/payment-webhooks$/);
  await expect(page.locator("h1")).toHaveText("payments-not-dead-lettered · payment-webhooks");
  await expect(page.locator(".facts")).toContainText("99.950% over 28d");
  await expect(page.locator(".facts")).toContainText("(team payments)");
  await expect(page.locator(".chart-svg svg > title").first()).toHaveText(
    "payments-not-dead-lettered · payment-webhooks: SLI over 28d",
  );
  await page.getByRole("link", { name: "Every consumer of payments-not-dead-lettered" }).click();
  // payment-webhooks, order-events and invoices: each its own row.
  await expect(page.locator(".slo-table tbody tr")).toHaveCount(3);
});

const OVERVIEW_CHARTS = [
  "duplicate-rate",
  "duplicate-delays",
  "queue-age",
  "outbox-age",
  "unknown-open",
  "unknown-outcomes",
  "dead-letters",
  "transaction-failures",
  "outcome-latency",
  "recovery-times",
  "retries",
  "queue-depth",
  "replays",
  "duplicates-suppressed",
];

test("the overview renders every chart, each with a sentence saying what it shows", async ({ page }) => {
  await signIn(page, "viewer");
  await page.goto("/");
  const section = page.locator(".chart-section");
  for (const id of OVERVIEW_CHARTS) {
    await expect(section.locator(`figure#${id} figcaption`)).not.toBeEmpty();
  }
  // The demo's consumers report every metric; recoveries need an operator.
  // Replays too need an operator (or a redrive).
  for (const id of OVERVIEW_CHARTS.filter((id) => id !== "recovery-times" && id !== "replays")) {
    await expect(section.locator(`figure#${id} .chart-svg svg`)).toBeVisible();
  }
  await expect(section.locator("figure#duplicate-rate svg > title")).toHaveText("Duplicate-claim rate, last 24h");
});

test("changing the chart range changes the address and the charts", async ({ page }) => {
  await signIn(page, "viewer");
  await page.goto("/");
  const section = page.locator(".chart-section");
  const delays = section.locator("figure#duplicate-delays");
  await expect(delays.locator(".chart-svg svg > title")).toHaveText("Duplicate delays, last 24h");
  await expect(section.locator(".chart-span")).toContainText("in 1 h intervals");
  await section.getByRole("link", { name: "6h", exact: true }).click();
  await expect(page).toHaveURL(/\?range=6h$/);
  await expect(delays.locator(".chart-svg svg > title")).toHaveText("Duplicate delays, last 6h");
  await expect(delays.locator("figcaption")).toContainText("arrived more than five minutes after");
  await expect(section.locator(".chart-span")).toContainText("in 5 min intervals");
  await expect(section.locator("figure#queue-age svg > title")).toHaveText("Oldest queued message, last 6h");

  // One consumer, through the plain form: every chart narrows to it. One
  // the demo delivers to (a consumer the other tests made may have only
  // the outcomes they resolved, and no deliveries to chart).
  const consumer = "order-events";
  await section.locator("select[name=consumer]").selectOption(consumer!);
  await section.getByRole("button", { name: "Show" }).click();
  await expect(page).toHaveURL(new RegExp(`consumer=${encodeURIComponent(consumer!)}`));
  await expect(section.locator("select[name=consumer]")).toHaveValue(consumer!);
  await expect(section.locator("figure#duplicate-rate .chart-svg svg")).toBeVisible();
});

test("following a chart's link reaches the keys behind it", async ({ page }) => {
  // An unknown outcome of its own, an hour old: the demo's may all have
  // been settled by an earlier test (the reconcile loop resolves them).
  // The charts narrowed to its consumer carry the consumer in their links.
  unknownOutcomes("slo-links", "slo:link", 1, 60);
  await signIn(page, "viewer");
  await page.goto("/?range=6h&consumer=slo-links");
  const unknown = page.locator("figure#unknown-outcomes");
  await unknown.getByRole("link", { name: /Unknown outcomes from this span/ }).click();
  await expect(page).toHaveURL(/\/unknown\?from=.*&to=.*&consumer=slo-links/);
  await expect(page.getByRole("heading", { name: "Unknown outcomes", exact: true })).toBeVisible();
  await expect(page.locator(".window-note")).toContainText("Only those from");
  // Every listed key became unknown inside the span: its row links to its page.
  const rows = page.locator("table tbody tr");
  await expect(rows.locator("a.key", { hasText: "slo:link:1" })).toBeVisible();
  await rows.locator("a.key", { hasText: "slo:link:1" }).click();
  await expect(page).toHaveURL(/\/keys\/[^/]+\/.+/);
  await expect(page.locator(".timeline")).toBeVisible();

  await page.goto("/?range=6h");
  await page.locator("figure#dead-letters").getByRole("link", { name: /Dead letters from this span/ }).click();
  await expect(page).toHaveURL(/\/dead-letters\?from=/);
  await expect(page.locator(".window-note")).toContainText("Only those from");
});

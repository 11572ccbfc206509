import { expect, test, type Page } from "@playwright/test";
import { expectHydrated, signIn, watchConsole } from "./helpers";

/** Records every Content-Security-Policy violation the page reports. */
async function watchPolicy(page: Page): Promise<() => Promise<string[]>> {
  await page.addInitScript(() => {
    (window as unknown as { violations: string[] }).violations = [];
    document.addEventListener("securitypolicyviolation", (event) => {
      (window as unknown as { violations: string[] }).violations.push(
        `${event.violatedDirective} ${event.blockedURI || "inline"} at ${location.pathname}`,
      );
    });
  });
  return () => page.evaluate(() => (window as unknown as { violations: string[] }).violations);
}

test("every page hydrates with no console error and no Content-Security-Policy violation", async ({ page }) => {
  const errors = watchConsole(page);
  const violations = await watchPolicy(page);
  const reported: string[] = [];
  await page.goto("/login");
  await expectHydrated(page);
  reported.push(...(await violations()));
  await signIn(page, "operator");
  // Every page the navigation offers, and one of each kind it leads to.
  const paths = ["/", "/keys", "/unknown", "/dead-letters", "/outbox", "/slo", "/audit"];
  for (const link of await page.locator("header nav a").all()) {
    const href = await link.getAttribute("href");
    if (href && !paths.includes(href)) paths.push(href);
  }
  // A tour key and its dead letter: there whatever the other tests did to them.
  const key = `/keys/order-events/${encodeURIComponent("refund:EU/2026/Ø-1842")}`;
  await page.goto(key);
  const letter = await page.locator("a[href^='/dead-letters/']").first().getAttribute("href");
  await page.goto("/slo");
  const slo = await page.locator("a[href^='/slo/']").first().getAttribute("href");
  paths.push(letter!, key!, slo!);
  for (const path of paths) {
    await page.goto(path);
    await expectHydrated(page);
    reported.push(...(await violations()));
  }
  expect(reported).toEqual([]);
  expect(errors).toEqual([]);
});

test("each error budget bar is as long as the budget it names", async ({ page }) => {
  await signIn(page, "operator");
  await page.goto("/slo");
  const bars = page.locator("svg.budget");
  expect(await bars.count()).toBeGreaterThan(3);
  for (const bar of await bars.all()) {
    const label = await bar.locator("xpath=following-sibling::span[contains(@class,'budget-label')][1]").innerText();
    const left = parseFloat(label) / 100;
    const track = (await bar.boundingBox())!;
    const fill = (await bar.locator("rect.budget-fill").boundingBox())!;
    const expected = left < 0 ? 1 : Math.min(left, 1);
    expect(Math.abs(fill.width / track.width - expected), `${label}`).toBeLessThan(0.02);
  }
});

/** The smallest chart text on the page, in CSS px as shown. */
async function smallestChartText(page: Page): Promise<number> {
  return page.evaluate(() => {
    let smallest = Infinity;
    for (const svg of Array.from(document.querySelectorAll<SVGSVGElement>(".chart-svg svg"))) {
      const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
      for (const text of Array.from(svg.querySelectorAll("text"))) {
        if (!text.textContent?.trim()) continue;
        smallest = Math.min(smallest, parseFloat(getComputedStyle(text).fontSize) * scale);
      }
    }
    return smallest;
  });
}

for (const [name, viewport] of [
  ["a 1,400-px window", { width: 1400, height: 900 }],
  ["a 390-px phone", { width: 390, height: 844 }],
] as const) {
  test(`chart text is at least 11 px on ${name}`, async ({ page }) => {
    await page.setViewportSize(viewport);
    await signIn(page, "operator");
    await page.goto("/slo");
    const slo = await page.locator("a[href^='/slo/']").first().getAttribute("href");
    for (const path of ["/", slo!]) {
      await page.goto(path);
      await expect(page.locator(".chart-svg svg").first()).toBeVisible();
      const smallest = await smallestChartText(page);
      expect(smallest, `${path}: ${smallest.toFixed(1)} px`).toBeGreaterThanOrEqual(11);
      expect(smallest).toBeLessThan(Infinity);
    }
  });
}

test("each chart interval says its time, value and traffic when hovered", async ({ page }) => {
  await signIn(page, "operator");
  await page.goto("/");
  await expect(page.locator("#duplicate-rate .chart-svg svg")).toBeVisible();
  const titles = await page.locator("#duplicate-rate .chart-svg svg rect.hover > title").allTextContents();
  expect(titles.length).toBeGreaterThan(5);
  // "2026-11-01 14:00–15:00 UTC: 0.250% (2041 deliveries)", or a run's
  // lowest and highest, or "no data" where nothing was delivered.
  const percent = String.raw`\d+(\.\d+)?%`;
  const value = `(no data|${percent}( to ${percent})?)`;
  const shape = new RegExp(String.raw`^\d{4}-\d{2}-\d{2} \d{2}:\d{2}–.+ UTC: ${value} \(\d+ deliveries\)$`);
  for (const title of titles) expect(title).toMatch(shape);
  // The demo's fleet delivers every hour: some interval has traffic and a share.
  expect(titles.some((t) => /UTC: \d.*% .*\((?!0 )\d+ deliveries\)$/.test(t)), titles.join("\n")).toBe(true);
});

test("on a 390-px phone no page scrolls sideways; wide tables and charts scroll in their box", async ({ page }) => {
  await page.setViewportSize({ width: 390, height: 844 });
  await signIn(page, "operator");
  await page.goto("/unknown");
  const key = await page.locator("table tbody tr a.key").first().getAttribute("href");
  for (const path of ["/", key!, "/keys?q=order", "/unknown", "/dead-letters", "/outbox", "/slo", "/audit"]) {
    await page.goto(path);
    await expectHydrated(page);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow, `${path} is ${overflow}px wider than the phone`).toBeLessThanOrEqual(1);
  }
});

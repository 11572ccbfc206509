import { expect, test } from "@playwright/test";
import { deadLetters, signIn } from "./helpers";

// A list's export link downloads the whole filtered list, read with the
// person's own rights: payments-oncall's CSV holds payments' letters only.
test("a filtered dead-letter list downloads as CSV with the person's rights", async ({ page }) => {
  deadLetters("reminders", "e2e-export-growth", 1, 1, 5);
  deadLetters("order-events", "e2e-export, \"payments\"", 2, 1, 5);
  await signIn(page, "payments-oncall");
  await page.goto("/dead-letters?error=e2e");

  const link = page.getByRole("link", { name: "CSV" });
  await expect(link).toHaveAttribute("href", "/exports/dead-letters.csv?error=e2e");
  const [download] = await Promise.all([page.waitForEvent("download"), link.click()]);
  expect(download.suggestedFilename()).toBe("idem-dead-letters.csv");
  const csv = await (await download.createReadStream()).toArray();
  const text = Buffer.concat(csv).toString("utf8");
  expect(text.split("\r\n")[0]).toBe(
    "id,consumer,queue,key,message_id,delivery_count,first_failure_at,dead_lettered_at,last_error,state,resolved_by,resolved_at",
  );
  // The key's comma and quotes are quoted as CSV quotes them.
  expect(text).toContain(',order-events,');
  expect(text).toContain('"e2e-export, ""payments"":2"');
  expect(text).not.toContain("e2e-export-growth");
  expect(text).not.toContain("reminders");
});

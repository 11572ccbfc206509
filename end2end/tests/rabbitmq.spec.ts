import amqp from "amqplib";
import { expect, test } from "@playwright/test";
import { expectHydrated, signIn } from "./helpers";

// The topology end2end/brokers.toml names and rabbitmq-topology.mjs declares.
const AMQP_URL = process.env.IDEM_TEST_AMQP_URL ?? "amqp://guest:guest@127.0.0.1:5672/%2f";
const EXCHANGE = "idem-e2e.reminders";
const WORK = "idem-e2e.reminders.work";

// A team runs its reminders on RabbitMQ: a message its worker gives up on
// is dead-lettered by the broker, Idem moves it into its dead letters (end2end/brokers.toml),
// and an operator replays it from the key's page, back to the exchange it
// was first published to. The worker then finds it on its queue, once.
test("an operator replays a RabbitMQ dead letter from its key page and the worker receives it once", async ({ page }) => {
  const key = `reminder:e2e-${Date.now()} / 50% #⏰ תזכורת`;
  const messageId = `msg-e2e-${Date.now()}`;
  const connection = await amqp.connect(AMQP_URL);
  try {
    const channel = await connection.createConfirmChannel();
    // The team's publisher, then its worker giving up on the message.
    channel.publish(EXCHANGE, "due", Buffer.from(JSON.stringify({ reminder: key })), {
      messageId,
      contentType: "application/json",
      headers: { "idempotency-key": key },
    });
    await channel.waitForConfirms();
    let taken: amqp.GetMessage | false = false;
    await expect.poll(async () => (taken = await channel.get(WORK, { noAck: false })) !== false).toBe(true);
    channel.nack(taken as unknown as amqp.Message, false, false);

    // Idem moves it in within a second or two; its key page shows it.
    await signIn(page, "operator");
    const keyPage = `/keys/${encodeURIComponent("reminders-rabbitmq")}/${encodeURIComponent(key)}`;
    await expect(async () => {
      await page.goto(keyPage);
      await expect(page.locator(".action-form", { hasText: "Replay dead letter" })).toBeVisible({ timeout: 1_000 });
    }).toPass({ timeout: 30_000 });
    await expect(page.locator("h1 code.key")).toHaveText(key);
    await expectHydrated(page);

    const form = page.locator(".action-form", { hasText: "Replay dead letter" });
    await form.getByRole("button", { name: "Replay with the same key" }).click();
    await expect(page.locator(".outcome.done")).toContainText(`Published to RabbitMQ exchange “${EXCHANGE}”`);
    await expect(page.locator(".outcome.done")).toContainText("the broker confirmed it");

    // The worker receives it once, with its key and message id.
    const delivered = await channel.get(WORK, { noAck: true });
    expect(delivered).not.toBe(false);
    const message = delivered as amqp.GetMessage;
    expect(message.properties.messageId).toBe(messageId);
    expect(String(message.properties.headers?.["idempotency-key"])).toBe(key);
    expect(message.properties.headers?.["x-death"]).toBeUndefined();
    expect(await channel.get(WORK, { noAck: true })).toBe(false);

    // Its dead letter's page says what RabbitMQ recorded and that it was replayed.
    await page.goto(keyPage);
    await page.locator("a[href^='/dead-letters/']", { hasText: /^#\d+$/ }).first().click();
    await expect(page.locator(".broker-death")).toContainText(`exchange “${EXCHANGE}”`);
    await expect(page.locator(".broker-death")).toContainText("rejected by a consumer");
    await expect(page.locator(".broker-death")).toContainText("published; the broker confirmed it");
    await expect(page.locator("body")).toContainText("replayed");
    await channel.close();
  } finally {
    await connection.close();
  }
});

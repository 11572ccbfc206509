// Declares, before the browser tests, the RabbitMQ topology end2end/brokers.toml
// names, as a team running reminders on RabbitMQ has it: an exchange, the
// consumer's work queue bound to it (routing key "due") whose dead letters
// go to the dead-letter queue Idem drains. Both queues start empty.
//
// Needs RabbitMQ on 127.0.0.1:5672 (guest/guest). Where none runs:
//   apt-get install rabbitmq-server && service rabbitmq-server start
import amqp from "amqplib";

export const AMQP_URL = process.env.IDEM_TEST_AMQP_URL ?? "amqp://guest:guest@127.0.0.1:5672/%2f";
export const EXCHANGE = "idem-e2e.reminders";
export const WORK = "idem-e2e.reminders.work";
export const DEAD = "idem-e2e.reminders.dead";

export async function declare() {
  let connection;
  try {
    connection = await amqp.connect(AMQP_URL);
  } catch (error) {
    throw new Error(
      `the browser tests need RabbitMQ at ${AMQP_URL.replace(/:[^:@/]*@/, ":…@")} (${error.message}); ` +
        "start it: apt-get install rabbitmq-server && service rabbitmq-server start",
    );
  }
  try {
    const channel = await connection.createChannel();
    await channel.assertExchange(EXCHANGE, "direct", { durable: false });
    await channel.assertQueue(DEAD, { durable: false });
    await channel.assertQueue(WORK, {
      durable: false,
      deadLetterExchange: "",
      deadLetterRoutingKey: DEAD,
    });
    await channel.bindQueue(WORK, EXCHANGE, "due");
    await channel.purgeQueue(WORK);
    await channel.purgeQueue(DEAD);
    await channel.close();
  } finally {
    await connection.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  declare().catch((error) => {
    console.error(error.message);
    process.exit(1);
  });
}

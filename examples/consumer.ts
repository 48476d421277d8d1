/**
 * A minimal hookline subscriber on plain node:http.
 *
 *   npm run build   # @hookline/consumer resolves to its compiled dist/
 *   HOOKLINE_SECRET=whsec_… PORT=4000 npx tsx examples/consumer.ts
 *
 * Then register http://<this host>:4000/webhooks as an endpoint and use the secret it returns.
 */
import { createServer } from 'node:http';
import { createWebhookHandler } from '@hookline/consumer';

const secret = process.env.HOOKLINE_SECRET;
if (!secret) {
  console.error('Set HOOKLINE_SECRET to the endpoint secret (whsec_…)');
  process.exit(1);
}
const port = Number(process.env.PORT ?? 4000);

// Verifies the signature and the 5-minute window, answers 400 to forgeries, and deduplicates by hook-id
// in memory: onEvent runs once per delivery even though hookline may send it more than once.
const handleWebhook = createWebhookHandler({
  secret,
  onEvent: async (event) => {
    // Throwing here answers 500, and hookline retries the same delivery later.
    console.log(`${new Date().toISOString()} ${event.type} ${event.id}`, JSON.stringify(event.data));
  },
});

createServer((req, res) => {
  if (req.url === '/webhooks') return void handleWebhook(req, res);
  res.writeHead(404).end();
}).listen(port, () => console.log(`Listening for hookline webhooks on http://localhost:${port}/webhooks`));

/**
 * The baseline: a bare Fastify server whose POST /check answers a fixed JSON body of the given
 * size, with no auth, limits or lookups. Prints its URL once listening.
 */
import Fastify from 'fastify';

const size = Number(process.argv[2] ?? 300);
const body = JSON.stringify({ cache_hit: true, answer: 'x'.repeat(Math.max(0, size - 40)) });
const app = Fastify({ logger: false });
app.post('/check', async (_req, reply) => {
  reply.header('content-type', 'application/json; charset=utf-8');
  return body;
});
const url = await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`${url}\n`);
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));

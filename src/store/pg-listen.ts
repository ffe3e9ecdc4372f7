import pg from 'pg';

export interface ListenerEvents {
  /** The connection failed (`err`; it is closed) or ended. Called for a connection replaced since too: check which. */
  lost(client: pg.Client, err?: Error): void;
  notified(payload: string | undefined): void;
}

/**
 * Opens a connection that LISTENs on `channel`, kept alive at the TCP level so that a vanished
 * server is noticed. One that fails while being opened is closed here and the error thrown: it is
 * no caller's connection yet, so none would close it.
 */
export async function openListener(url: string, channel: string, events: ListenerEvents): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000, keepAlive: true });
  client.on('error', (err) => {
    events.lost(client, err);
    client.end().catch(() => undefined);
  });
  client.on('end', () => events.lost(client));
  client.on('notification', (n) => events.notified(n.payload));
  try {
    await client.connect();
    await client.query(`LISTEN ${channel}`);
  } catch (err) {
    await client.end().catch(() => undefined);
    throw err;
  }
  return client;
}

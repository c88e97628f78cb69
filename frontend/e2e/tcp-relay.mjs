// A TCP relay between the web app and the service, so a test can cut every
// open connection at once (a network blip) while both processes keep running.

import { createConnection, createServer } from "node:net";

export function startRelay(targetPort, targetHost = "127.0.0.1") {
  const pairs = new Set();
  const server = createServer((client) => {
    const upstream = createConnection({ port: targetPort, host: targetHost });
    const pair = { client, upstream };
    pairs.add(pair);
    const close = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", close);
    upstream.on("error", close);
    client.on("close", close);
    upstream.on("close", close);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      resolve({
        port,
        url: `http://127.0.0.1:${port}`,
        /** Cuts every open connection; returns how many there were. */
        dropAll() {
          const n = pairs.size;
          for (const { client, upstream } of [...pairs]) {
            client.destroy();
            upstream.destroy();
          }
          pairs.clear();
          return n;
        },
        close: () =>
          new Promise((r) => {
            for (const { client, upstream } of pairs) {
              client.destroy();
              upstream.destroy();
            }
            server.close(() => r());
          }),
      });
    });
  });
}

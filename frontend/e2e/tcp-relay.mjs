// A TCP relay between the web app and the service, so a test can cut every
// open connection at once (a network blip) while both processes keep running.

import { createConnection, createServer } from "node:net";

export function startRelay(targetPort, targetHost = "127.0.0.1") {
  const pairs = new Set();
  let refusing = false;
  // Half-open aware: an end from one side is passed on as an end (pipe does
  // that), never as a reset, so a response sent just before a close (say an
  // early 413 while the request body is still coming) is delivered whole.
  const server = createServer({ allowHalfOpen: true }, (client) => {
    if (refusing) {
      client.destroy(); // as if nothing listened on the service's port
      return;
    }
    const upstream = createConnection({ port: targetPort, host: targetHost, allowHalfOpen: true });
    const pair = { client, upstream };
    pairs.add(pair);
    const fail = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", fail);
    upstream.on("error", fail);
    const closed = () => {
      if (client.destroyed && upstream.destroyed) pairs.delete(pair);
    };
    client.on("close", closed);
    upstream.on("close", () => {
      // Let what upstream sent drain to the client, then close it.
      client.end();
      closed();
    });
    client.on("close", () => upstream.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  });
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      resolve({
        port,
        url: `http://127.0.0.1:${port}`,
        /** While on, new connections are closed at once (the service looks down). */
        refuse(on) {
          refusing = !!on;
        },
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

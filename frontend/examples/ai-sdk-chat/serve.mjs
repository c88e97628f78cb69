// Serves the example: the pages in public/, the bundles in dist/, and
// /api/* proxied (streamed, unbuffered) to Threadline at THREADLINE_API_URL
// (http://127.0.0.1:8080), so the browser talks to one origin.
//   PORT (3001), HOST (127.0.0.1), THREADLINE_API_KEY (sent as a bearer key)
import { createServer, request } from "node:http";
import { readFile } from "node:fs/promises";
import { extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
const api = new URL(process.env.THREADLINE_API_URL || "http://127.0.0.1:8080");
const key = process.env.THREADLINE_API_KEY || "";
const types = { ".html": "text/html; charset=utf-8", ".js": "text/javascript", ".css": "text/css" };
const pages = { "/": "public/index.html", "/assistant-ui": "public/assistant-ui.html" };

function proxy(req, res) {
  const headers = { ...req.headers, host: api.host };
  if (key) headers.authorization = `Bearer ${key}`;
  const up = request({ host: api.hostname, port: api.port, method: req.method, path: req.url, headers }, (r) => {
    res.writeHead(r.statusCode ?? 502, r.headers);
    r.pipe(res);
  });
  up.on("error", () => {
    if (!res.headersSent) res.writeHead(502, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: { code: "unavailable", message: "Threadline is not reachable" } }));
  });
  res.on("close", () => up.destroy()); // the browser left: so does the upstream request
  req.pipe(up);
}

async function file(req, res) {
  const path = new URL(req.url ?? "/", "http://x").pathname;
  let rel = pages[path];
  if (!rel && path.startsWith("/dist/")) rel = normalize(path.slice(1));
  if (!rel || rel.includes("..")) {
    res.writeHead(404, { "content-type": "text/plain" }).end("not found");
    return;
  }
  try {
    const body = await readFile(join(here, rel));
    res.writeHead(200, { "content-type": types[extname(rel)] ?? "application/octet-stream", "cache-control": "no-store" }).end(body);
  } catch {
    res.writeHead(404, { "content-type": "text/plain" }).end("not found (run npm run build)");
  }
}

const server = createServer((req, res) => {
  if (req.url?.startsWith("/api/")) proxy(req, res);
  else void file(req, res);
});
const port = Number(process.env.PORT || 3001);
server.listen(port, process.env.HOST || "127.0.0.1", () => {
  console.log(`ai-sdk-chat example on http://${process.env.HOST || "127.0.0.1"}:${port} (Threadline: ${api.origin})`);
});

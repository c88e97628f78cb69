// The web origin serves the service's API at the same paths: every method of
// /api/v1/... is forwarded to ${THREADLINE_API_URL}/api/v1/... . Bodies stream
// both ways (NDJSON runs reach the browser line by line, uploads go up as
// they arrive); status codes, error bodies and headers pass through. The
// service URL and THREADLINE_API_KEY never leave the server.

import type { NextRequest } from "next/server";

export const dynamic = "force-dynamic";
export const runtime = "nodejs";

// Connection-level headers (RFC 9110 §7.6.1) and the ones fetch computes itself.
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
  "content-length",
  "expect",
]);

function serviceBase(): string {
  return (process.env.THREADLINE_API_URL || "http://127.0.0.1:8080").replace(/\/+$/, "");
}

function dropped(headers: Headers): Set<string> {
  const names = new Set(HOP_BY_HOP);
  for (const token of (headers.get("connection") ?? "").split(",")) {
    const name = token.trim().toLowerCase();
    if (name) names.add(name);
  }
  return names;
}

function upstreamHeaders(request: NextRequest): Headers {
  const skip = dropped(request.headers);
  const headers = new Headers();
  request.headers.forEach((value, name) => {
    if (skip.has(name)) return;
    // Next's own routing headers mean nothing to the service.
    if (name.startsWith("x-middleware-") || name === "x-invoke-path" || name === "x-invoke-query") return;
    headers.append(name, value);
  });
  // The body must come back exactly as the service sends it, unencoded, so
  // that nothing between here and the browser has to buffer to decode it.
  headers.set("accept-encoding", "identity");
  const key = process.env.THREADLINE_API_KEY;
  if (key) headers.set("authorization", `Bearer ${key}`);
  const forwardedFor = request.headers.get("x-forwarded-for");
  if (forwardedFor) headers.set("x-forwarded-for", forwardedFor);
  headers.set("x-forwarded-host", request.headers.get("host") ?? "");
  headers.set("x-forwarded-proto", request.nextUrl.protocol.replace(/:$/, ""));
  return headers;
}

function responseHeaders(upstream: Response): Headers {
  const skip = dropped(upstream.headers);
  const headers = new Headers();
  upstream.headers.forEach((value, name) => {
    if (skip.has(name) && name !== "content-length") return;
    if (name === "set-cookie") return; // appended one by one below
    headers.append(name, value);
  });
  for (const cookie of upstream.headers.getSetCookie()) headers.append("set-cookie", cookie);
  if (upstream.headers.has("content-encoding")) {
    // fetch decoded the body: its length and encoding no longer apply.
    headers.delete("content-encoding");
    headers.delete("content-length");
  }
  if ((headers.get("content-type") ?? "").includes("ndjson")) {
    headers.set("cache-control", headers.get("cache-control") ?? "no-cache, no-transform");
    headers.set("x-accel-buffering", "no");
  }
  return headers;
}

function errorResponse(status: number, code: string, message: string): Response {
  return Response.json({ error: { code, message } }, { status });
}

async function proxy(request: NextRequest, ctx: { params: Promise<{ path: string[] }> }): Promise<Response> {
  const { path } = await ctx.params;
  const target = `${serviceBase()}/api/v1/${path.map(encodeURIComponent).join("/")}${request.nextUrl.search}`;
  const hasBody = request.method !== "GET" && request.method !== "HEAD" && request.body !== null;
  const init: RequestInit & { duplex?: "half" } = {
    method: request.method,
    headers: upstreamHeaders(request),
    redirect: "manual",
    cache: "no-store",
    // A closed browser connection aborts the upstream request.
    signal: request.signal,
  };
  if (hasBody) {
    init.body = request.body;
    init.duplex = "half";
  }
  let upstream: Response;
  try {
    upstream = await fetch(target, init);
  } catch (err) {
    if (request.signal.aborted) return new Response(null, { status: 499 });
    const message = err instanceof Error ? `${err.message}${err.cause instanceof Error ? `: ${err.cause.message}` : ""}` : String(err);
    return errorResponse(502, "bad_gateway", `the Threadline service did not answer: ${message}`);
  }
  const nullBody = upstream.status === 204 || upstream.status === 304 || request.method === "HEAD";
  return new Response(nullBody ? null : upstream.body, {
    status: upstream.status,
    statusText: upstream.statusText,
    headers: responseHeaders(upstream),
  });
}

export { proxy as GET, proxy as POST, proxy as PUT, proxy as PATCH, proxy as DELETE, proxy as HEAD, proxy as OPTIONS };

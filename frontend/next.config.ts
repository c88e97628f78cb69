import type { NextConfig } from "next";

// The app's Content-Security-Policy: everything from this origin only (the
// API is proxied under /api/v1), no plugins, no framing. Next.js's App
// Router hydrates through inline scripts and the highlighter sets inline
// styles, hence 'unsafe-inline' (a nonce would need middleware on every
// page); the dev server also evaluates code and reloads over a websocket.
const dev = process.env.NODE_ENV !== "production";
const csp = [
  "default-src 'self'",
  `script-src 'self' 'unsafe-inline'${dev ? " 'unsafe-eval'" : ""}`,
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  `connect-src 'self'${dev ? " ws: wss:" : ""}`,
  "object-src 'none'",
  "base-uri 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

const nextConfig: NextConfig = {
  // NDJSON must reach the browser line by line: no response compression
  // (a gzip stream buffers), the proxy route streams the service's body as is.
  compress: false,
  poweredByHeader: false,
  headers() {
    return Promise.resolve([
      {
        source: "/:path*",
        headers: [
          { key: "Content-Security-Policy", value: csp },
          { key: "X-Content-Type-Options", value: "nosniff" },
          { key: "Referrer-Policy", value: "no-referrer" },
          { key: "X-Frame-Options", value: "DENY" },
        ],
      },
    ]);
  },
};

export default nextConfig;

import type { NextConfig } from "next";

const nextConfig: NextConfig = {
  // NDJSON must reach the browser line by line: no response compression
  // (a gzip stream buffers), the proxy route streams the service's body as is.
  compress: false,
  poweredByHeader: false,
};

export default nextConfig;

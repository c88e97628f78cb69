// Bundles the two pages (src/chat.tsx: useChat; src/assistant-ui.tsx:
// assistant-ui's AI SDK runtime) into dist/ with esbuild.
import { build } from "esbuild";

await build({
  entryPoints: ["src/chat.tsx", "src/assistant-ui.tsx"],
  bundle: true,
  outdir: "dist",
  format: "esm",
  jsx: "automatic",
  target: "es2022",
  minify: true,
  define: { "process.env.NODE_ENV": '"production"' },
  logLevel: "warning",
});

#!/usr/bin/env node
// Builds once what every browser test file starts (npm run test:e2e runs
// this first): the service binary and the Next build (E2E_SKIP_BUILD=1 keeps
// an existing .next). Cleans e2e/artifacts/.
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { artifacts, buildAll } from "./stack.mjs";

const chromium = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
if (!existsSync(chromium)) {
  console.error(`[e2e] ${chromium} not found: install Debian's Chromium (scripts/ensure-chromium.sh) or set CHROMIUM_PATH`);
  process.exit(1);
}
rmSync(artifacts, { recursive: true, force: true });
mkdirSync(artifacts, { recursive: true });
if (!(process.env.E2E_BASE_URL && process.env.E2E_SERVICE_URL)) buildAll();

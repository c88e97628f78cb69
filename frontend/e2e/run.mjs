#!/usr/bin/env node
// End-to-end harness: builds and starts everything, runs e2e/tests.mjs, stops
// everything it started.
//
//   node e2e/run.mjs [test name filter]      (npm run test:e2e)
//
// 1. go build -o <tmp>/threadline ./cmd/threadline   (from the repo root)
// 2. deploy/pg.sh start; a fresh database for this run (dropped at the end)
// 3. the service on a free port, built-in model with a per-token delay, plus
//    two named models: "markdown" (a fake OpenAI-compatible server, e2e/fake-
//    openai.mjs) and "needs-key" (its key variable unset)
// 4. next build (skip with E2E_SKIP_BUILD=1), next start on a free port with
//    THREADLINE_API_URL pointing at the service through a TCP relay that
//    tests can cut (e2e/tcp-relay.mjs)
// 5. the tests, in Debian's Chromium (/usr/bin/chromium, never downloaded)
//
// Screenshots of failed tests go to e2e/artifacts/ (git-ignored), with the
// service's and Next's logs. Settings: CHROMIUM_PATH, E2E_TOKEN_DELAY
// (default 20ms), E2E_KEEP_DB=1, E2E_SKIP_BUILD=1; E2E_BASE_URL with
// E2E_SERVICE_URL runs the tests against a stack that already runs;
// E2E_SCREENSHOTS=1 also keeps a screenshot of every passing test;
// E2E_REPEAT=n runs each selected test n times.

import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync, createWriteStream } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { startFakeOpenAI } from "./fake-openai.mjs";
import { startRelay } from "./tcp-relay.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const frontend = resolve(here, "..");
const repo = resolve(frontend, "..");
const artifacts = join(here, "artifacts");
const chromiumPath = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const tokenDelay = process.env.E2E_TOKEN_DELAY || "20ms";

const started = []; // { name, child }
let dbName = null;
let pgStartedHere = false;
let tmp = null;
let fake = null;
let relay = null;

function log(...args) {
  console.log("[e2e]", ...args);
}

function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], ...opts });
  if (r.error) throw r.error;
  if (r.status !== 0) {
    throw new Error(`${cmd} ${args.join(" ")} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  }
  return r.stdout;
}

function freePort() {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", rej);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => res(port));
    });
  });
}

function startProcess(name, cmd, args, opts) {
  const logPath = join(artifacts, `${name}.log`);
  const out = createWriteStream(logPath);
  const child = spawn(cmd, args, { ...opts, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  child.stdout.pipe(out);
  child.stderr.pipe(out);
  child.on("exit", (code, signal) => {
    if (!child.stopping) log(`${name} exited early (code ${code}, signal ${signal}); see ${logPath}`);
  });
  started.push({ name, child });
  return child;
}

async function waitFor(url, what, child, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${what} exited with ${child.exitCode} before it was ready`);
    try {
      const res = await fetch(url);
      if (res.ok) return;
      last = `HTTP ${res.status}`;
    } catch (err) {
      last = err.cause?.code ?? err.message;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${what} not ready at ${url} after ${timeoutMs} ms (${last})`);
}

async function stopAll() {
  for (const { name, child } of started.reverse()) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    child.stopping = true;
    const exited = new Promise((r) => child.once("exit", r));
    try {
      process.kill(-child.pid, "SIGTERM"); // its process group: the one we started
    } catch {
      /* gone */
    }
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        /* gone */
      }
    }, 15_000);
    await exited;
    clearTimeout(timer);
    log(`stopped ${name}`);
  }
  started.length = 0;
  const pg = join(repo, "deploy", "pg.sh");
  if (dbName && !process.env.E2E_KEEP_DB) {
    try {
      run(pg, ["psql", "-q", "-c", `DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`]);
      log(`dropped database ${dbName}`);
    } catch (err) {
      log(`could not drop ${dbName}: ${err.message}`);
    }
  }
  if (pgStartedHere) {
    try {
      run(pg, ["stop"]);
      log("stopped PostgreSQL");
    } catch (err) {
      log(`could not stop PostgreSQL: ${err.message}`);
    }
  }
  if (relay) await relay.close().catch(() => {});
  if (fake) await fake.close().catch(() => {});
  if (tmp) rmSync(tmp, { recursive: true, force: true });
}

async function main() {
  rmSync(artifacts, { recursive: true, force: true });
  mkdirSync(artifacts, { recursive: true });
  if (!existsSync(chromiumPath)) {
    throw new Error(`${chromiumPath} not found: install Debian's Chromium (apt-get install -y chromium) or set CHROMIUM_PATH`);
  }
  const filter = process.argv[2] ?? process.env.E2E_FILTER ?? "";
  if (process.env.E2E_BASE_URL && process.env.E2E_SERVICE_URL) {
    // Against a stack that is already running (development).
    const { runTests } = await import("./tests.mjs");
    const result = await runTests({
      baseUrl: process.env.E2E_BASE_URL,
      serviceUrl: process.env.E2E_SERVICE_URL,
      chromiumPath,
      artifacts,
      filter,
    });
    return result;
  }
  tmp = mkdtempSync(join(tmpdir(), "threadline-e2e-"));

  log("building the service");
  const bin = join(tmp, "threadline");
  run("go", ["build", "-o", bin, "./cmd/threadline"], { cwd: repo, stdio: ["ignore", "inherit", "inherit"] });

  const pg = join(repo, "deploy", "pg.sh");
  pgStartedHere = spawnSync(pg, ["status"], { stdio: "ignore" }).status !== 0;
  log("starting PostgreSQL");
  const pgUrl = run(pg, ["start"], { stdio: ["ignore", "pipe", "inherit"] }).trim().split("\n").pop();
  dbName = `threadline_e2e_${process.pid}_${Date.now().toString(36)}`;
  run(pg, ["psql", "-q", "-c", `CREATE DATABASE "${dbName}"`]);
  const dbUrl = new URL(pgUrl);
  dbUrl.pathname = `/${dbName}`;
  log(`database ${dbName}`);

  // Named models beside the built-in one: a fake OpenAI-compatible server
  // that answers in Markdown, and a model whose key variable is not set.
  fake = await startFakeOpenAI();
  const modelsFile = join(tmp, "models.json");
  writeFileSync(
    modelsFile,
    JSON.stringify({
      default: "builtin",
      models: [
        { name: "markdown", provider: "openai", model: "fake-markdown", base_url: fake.url, api_key_env: "THREADLINE_E2E_FAKE_KEY" },
        { name: "needs-key", provider: "openai", model: "gpt-e2e", api_key_env: "THREADLINE_E2E_MISSING_KEY" },
      ],
    }),
  );

  const apiPort = await freePort();
  const serviceUrl = `http://127.0.0.1:${apiPort}`;
  const service = startProcess("service", bin, ["serve"], {
    cwd: repo,
    env: {
      ...process.env,
      THREADLINE_DATABASE_URL: dbUrl.toString(),
      THREADLINE_ADDR: `127.0.0.1:${apiPort}`,
      THREADLINE_BUILTIN_DELAY: tokenDelay,
      THREADLINE_API_KEYS: "",
      THREADLINE_API_KEYS_FILE: "",
      THREADLINE_RATE_LIMIT: "0",
      THREADLINE_MODELS_FILE: modelsFile,
      THREADLINE_DEFAULT_MODEL: "builtin",
      THREADLINE_E2E_FAKE_KEY: "e2e-key",
      THREADLINE_E2E_MISSING_KEY: "",
    },
  });
  await waitFor(`${serviceUrl}/readyz`, "the service", service);
  log(`service at ${serviceUrl} (built-in model, ${tokenDelay} per token)`);

  const nextBin = join(frontend, "node_modules", "next", "dist", "bin", "next");
  const nextEnv = { ...process.env, NEXT_TELEMETRY_DISABLED: "1" };
  delete nextEnv.NODE_ENV;
  if (!process.env.E2E_SKIP_BUILD || !existsSync(join(frontend, ".next", "BUILD_ID"))) {
    log("next build");
    run(process.execPath, [nextBin, "build"], { cwd: frontend, env: nextEnv, stdio: ["ignore", "inherit", "inherit"] });
  }
  // Next reaches the service through a relay the tests can cut.
  relay = await startRelay(apiPort);
  const webPort = await freePort();
  const baseUrl = `http://127.0.0.1:${webPort}`;
  const web = startProcess("next", process.execPath, [nextBin, "start", "-p", String(webPort), "-H", "127.0.0.1"], {
    cwd: frontend,
    env: { ...nextEnv, THREADLINE_API_URL: relay.url, THREADLINE_API_KEY: "" },
  });
  await waitFor(`${baseUrl}/welcome`, "next start", web);
  log(`web app at ${baseUrl}`);

  const { runTests } = await import("./tests.mjs");
  const result = await runTests({
    baseUrl,
    serviceUrl,
    chromiumPath,
    artifacts,
    filter,
    dropConnections: () => relay.dropAll(),
    releaseGate: (name) => fake.release(name),
  });
  writeFileSync(join(artifacts, "summary.json"), JSON.stringify(result, null, 2));
  return result;
}

let ok = false;
let summary = "no tests ran";
const onSignal = async (sig) => {
  log(`${sig}: stopping`);
  await stopAll();
  process.exit(130);
};
process.once("SIGINT", onSignal);
process.once("SIGTERM", onSignal);
try {
  const result = await main();
  const total = result.passed + result.failed;
  const failedNames = result.results.filter((r) => !r.ok).map((r) => r.name);
  ok = result.failed === 0 && total > 0;
  summary =
    total === 0
      ? "no test matched the filter"
      : `${result.passed} passed, ${result.failed} failed${failedNames.length ? ` (${[...new Set(failedNames)].join("; ")})` : ""}`;
} catch (err) {
  console.error("[e2e] error:", err);
  summary = `error: ${err?.message ?? err}`;
  ok = false;
} finally {
  await stopAll();
}
// The closing line, after the clean-up's own lines: what CI looks at.
console.log(`[e2e] ${ok ? "PASS" : "FAIL"}: ${summary}${ok ? "" : `; screenshots and logs in ${artifacts}`}`);
process.exit(ok ? 0 : 1);

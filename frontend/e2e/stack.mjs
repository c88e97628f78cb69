// The stack a browser test file runs against, started in its before() hook
// and stopped in its after() hook (see harness.mjs):
//
// 1. the service binary (built by build.mjs, or here when it is missing)
// 2. a fresh database for the file (dropped at the end), on the cluster of
//    THREADLINE_TEST_DATABASE_URL when set, else deploy/pg.sh's own cluster
//    (started if needed, stopped again only if started here)
// 3. the service on a free port, built-in model with a per-token delay, plus
//    two named models: "markdown" (a fake OpenAI-compatible server, fake-
//    openai.mjs) and "needs-key" (its key variable unset)
// 4. next start (of the build made by build.mjs) on a free port, reaching the
//    service through a TCP relay that tests can cut (tcp-relay.mjs)
//
// E2E_BASE_URL with E2E_SERVICE_URL uses a stack that already runs instead
// (no fake model, no relay: the tests that need them skip).

import { spawn, spawnSync } from "node:child_process";
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { startFakeOpenAI } from "./fake-openai.mjs";
import { startRelay } from "./tcp-relay.mjs";

const here = dirname(fileURLToPath(import.meta.url));
export const frontend = resolve(here, "..");
export const repo = resolve(frontend, "..");
export const artifacts = join(here, "artifacts");
export const serviceBin = join(frontend, "node_modules", ".cache", "threadline-e2e", "threadline");
const nextBin = join(frontend, "node_modules", "next", "dist", "bin", "next");
const pgScript = join(repo, "deploy", "pg.sh");

function log(...args) {
  console.error("[e2e]", ...args);
}

export function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], ...opts });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

export function nextEnv() {
  const env = { ...process.env, NEXT_TELEMETRY_DISABLED: "1" };
  delete env.NODE_ENV;
  return env;
}

/** go build of the service; next build of the app (unless E2E_SKIP_BUILD=1 and a build exists). */
export function buildAll({ next = true } = {}) {
  mkdirSync(dirname(serviceBin), { recursive: true });
  log("go build ./cmd/threadline");
  run("go", ["build", "-o", serviceBin, "./cmd/threadline"], { cwd: repo, stdio: ["ignore", "inherit", "inherit"] });
  buildAcpAgent();
  if (next && (!process.env.E2E_SKIP_BUILD || !existsSync(join(frontend, ".next", "BUILD_ID")))) {
    log("next build");
    run(process.execPath, [nextBin, "build"], { cwd: frontend, env: nextEnv(), stdio: ["ignore", "inherit", "inherit"] });
  }
}

/** The ACP SDK's own example agent (an agent no one here wrote), for acp.test.mjs. */
export const acpAgentBin = join(frontend, "node_modules", ".cache", "threadline-e2e", "acp-example-agent");

/** go build of the ACP SDK's example agent (from the module cache, as model/acp's tests do). */
export function buildAcpAgent() {
  mkdirSync(dirname(acpAgentBin), { recursive: true });
  log("go build github.com/coder/acp-go-sdk/example/agent");
  run("go", ["build", "-o", acpAgentBin, "github.com/coder/acp-go-sdk/example/agent"], { cwd: repo, stdio: ["ignore", "inherit", "inherit"] });
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

/** psql against the shared cluster's URL, or deploy/pg.sh psql. */
function psql(adminUrl, sql) {
  if (adminUrl) return run("psql", [adminUrl, "-v", "ON_ERROR_STOP=1", "-q", "-c", sql]);
  return run(pgScript, ["psql", "-v", "ON_ERROR_STOP=1", "-q", "-c", sql]);
}

/**
 * Starts everything for one test file; returns the ctx the tests get and
 * stop(). name labels the logs in artifacts/.
 */
export async function startStack(name, { serviceEnv: extraEnv = {}, web: withWeb = true } = {}) {
  mkdirSync(artifacts, { recursive: true });
  if (process.env.E2E_BASE_URL && process.env.E2E_SERVICE_URL) {
    return { baseUrl: process.env.E2E_BASE_URL, serviceUrl: process.env.E2E_SERVICE_URL, stop: async () => {} };
  }
  const started = [];
  let dbName = null;
  let adminUrl = process.env.THREADLINE_TEST_DATABASE_URL || "";
  let pgStartedHere = false;
  let fake = null;
  let relay = null;
  const tmp = mkdtempSync(join(tmpdir(), "threadline-e2e-"));

  const startProcess = (label, cmd, args, opts) => {
    const logPath = join(artifacts, `${name}.${label}.log`);
    const out = createWriteStream(logPath);
    const child = spawn(cmd, args, { ...opts, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    child.stdout.pipe(out);
    child.stderr.pipe(out);
    child.on("exit", (code, signal) => {
      if (!child.stopping) log(`${label} exited early (code ${code}, signal ${signal}); see ${logPath}`);
    });
    started.push({ label, child });
    return child;
  };

  const stop = async () => {
    for (const { child } of started.reverse()) {
      if (child.exitCode !== null || child.signalCode !== null) continue;
      child.stopping = true;
      const exited = new Promise((r) => child.once("exit", r));
      try {
        process.kill(-child.pid, "SIGTERM"); // its process group: the one started here
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
    }
    started.length = 0;
    if (dbName && !process.env.E2E_KEEP_DB) {
      try {
        psql(adminUrl, `DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
      } catch (err) {
        log(`could not drop ${dbName}: ${err.message}`);
      }
    }
    if (pgStartedHere) {
      try {
        run(pgScript, ["stop"]);
      } catch (err) {
        log(`could not stop PostgreSQL: ${err.message}`);
      }
    }
    if (relay) await relay.close().catch(() => {});
    if (fake) await fake.close().catch(() => {});
    rmSync(tmp, { recursive: true, force: true });
  };

  try {
    if (!existsSync(serviceBin) || (withWeb && !existsSync(join(frontend, ".next", "BUILD_ID")))) buildAll({ next: withWeb });

    let dbUrl;
    if (adminUrl) {
      dbUrl = new URL(adminUrl);
    } else {
      pgStartedHere = spawnSync(pgScript, ["status"], { stdio: "ignore" }).status !== 0;
      dbUrl = new URL(run(pgScript, ["start"], { stdio: ["ignore", "pipe", "inherit"] }).trim().split("\n").pop());
    }
    dbName = `threadline_e2e_${name.replace(/\W+/g, "_")}_${process.pid}_${Date.now().toString(36)}`;
    psql(adminUrl, `CREATE DATABASE "${dbName}"`);
    dbUrl.pathname = `/${dbName}`;

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
    const serviceEnv = {
      ...process.env,
      THREADLINE_DATABASE_URL: dbUrl.toString(),
      THREADLINE_ADDR: `127.0.0.1:${apiPort}`,
      THREADLINE_BUILTIN_DELAY: process.env.E2E_TOKEN_DELAY || "20ms",
      THREADLINE_API_KEYS: "",
      THREADLINE_API_KEYS_FILE: "",
      THREADLINE_RATE_LIMIT: "0",
      THREADLINE_MODELS_FILE: modelsFile,
      THREADLINE_DEFAULT_MODEL: "builtin",
      THREADLINE_E2E_FAKE_KEY: "e2e-key",
      THREADLINE_E2E_MISSING_KEY: "",
      ...extraEnv,
    };
    const service = startProcess("service", serviceBin, ["serve"], { cwd: repo, env: serviceEnv });
    await waitFor(`${serviceUrl}/readyz`, "the service", service);
    if (!withWeb) {
      // The service alone (web: false): for tests that are its own clients.
      log(`${name}: service ${serviceUrl}, database ${dbName}`);
      return { serviceUrl, stop };
    }

    // Next reaches the service through a relay the tests can cut.
    relay = await startRelay(apiPort);
    const webPort = await freePort();
    const baseUrl = `http://127.0.0.1:${webPort}`;
    const web = startProcess("next", process.execPath, [nextBin, "start", "-p", String(webPort), "-H", "127.0.0.1"], {
      cwd: frontend,
      env: { ...nextEnv(), THREADLINE_API_URL: relay.url, THREADLINE_API_KEY: "" },
    });
    await waitFor(`${baseUrl}/welcome`, "next start", web);
    log(`${name}: web app ${baseUrl}, service ${serviceUrl}, database ${dbName}`);

    return {
      baseUrl,
      serviceUrl,
      dropConnections: () => relay.dropAll(),
      releaseGate: (gate) => fake.release(gate),
      /** While on, the web app cannot reach the service (502 from the proxy, as when it is down). */
      refuseService: (on) => {
        relay.refuse(on);
        if (on) relay.dropAll(); // pooled connections too
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

// The service the tests talk to: `REME_BASE_URL` (with `REME_API_KEY`) when set, else one started here from this
// checkout (`python -m reme_service`, hash embedder, a temporary data dir, an admin API key, a 1 MB body limit) and
// stopped when the tests end. `REME_PYTHON` names the interpreter (default: the checkout's .venv, else python3).

import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export interface Service {
  baseUrl: string;
  /** the admin key the tests send ("" when the service needs none) */
  apiKey: string;
  /** started here: the tests may create keys in its data dir and rely on its limits */
  own: boolean;
  /** makes a key of `scope` for `workspaces` (own service only) */
  createKey(workspaces: string[], scope: "read" | "write" | "admin"): string;
  /** http.max_body_bytes of an own service */
  maxBodyBytes: number;
  stop(): Promise<void>;
}

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");
const MAX_BODY_BYTES = 1024 * 1024;

function python(): string {
  if (process.env.REME_PYTHON) return process.env.REME_PYTHON;
  const venv = join(REPO, ".venv", "bin", "python");
  return existsSync(venv) ? venv : "python3";
}

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? done(address.port) : fail(new Error("no port"))));
    });
  });
}

async function answers(url: string): Promise<boolean> {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(2000) })).ok;
  } catch {
    return false;
  }
}

function exited(child: ChildProcess): Promise<void> {
  return new Promise((done) => (child.exitCode !== null || child.signalCode !== null ? done() : child.once("exit", () => done())));
}

export async function startService(): Promise<Service> {
  const given = process.env.REME_BASE_URL;
  if (given) {
    return {
      baseUrl: given.replace(/\/+$/, ""),
      apiKey: process.env.REME_API_KEY ?? "",
      own: false,
      maxBodyBytes: 0,
      createKey: () => {
        throw new Error("keys are made only for a service the tests started");
      },
      stop: async () => {},
    };
  }
  const dir = mkdtempSync(join(tmpdir(), "reme-ts-client-"));
  const env: NodeJS.ProcessEnv = { ...process.env, PYTHONPATH: REPO };
  for (const name of Object.keys(env)) if (name.startsWith("FLOW_") || name.startsWith("REME_")) delete env[name];
  const config = [`data_dir=${join(dir, "data")}`, "embedding_model.default.backend=hash"];
  const createKey = (workspaces: string[], scope: string): string => {
    const args = ["-m", "reme_service", "keys", "create", ...workspaces.flatMap((w) => ["--workspace", w]), "--scope", scope, ...config];
    const out = execFileSync(python(), args, { cwd: dir, env, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    return out.trim().split("\n").at(-1) ?? "";
  };
  const apiKey = createKey(["*"], "admin"); // a key file makes the service require keys
  // a free port may be taken by another process before the service binds it: then it exits at once, and we retry
  let child: ChildProcess | undefined;
  let baseUrl = "";
  const log = join(dir, "service.log");
  for (let attempt = 1; child === undefined; attempt += 1) {
    const port = await freePort();
    baseUrl = `http://127.0.0.1:${port}`;
    const started = spawn(python(), ["-m", "reme_service", `http.port=${port}`, `http.max_body_bytes=${MAX_BODY_BYTES}`, ...config], {
      cwd: dir,
      env,
      stdio: ["ignore", "ignore", openSync(log, "w")],
    });
    const deadline = Date.now() + 90_000;
    const text = () => readFileSync(log, "utf8");
    // "reme: starting" is written once the port is bound: a /health/live answer before it is another process's
    while (!(text().includes("reme: starting") && (await answers(`${baseUrl}/health/live`)))) {
      if (started.exitCode !== null && attempt < 3 && text().includes("Address already in use")) break;
      if (started.exitCode !== null || Date.now() > deadline) {
        started.kill();
        throw new Error(`the service did not start (exit ${started.exitCode}):\n${text().slice(-3000)}`);
      }
      await new Promise((next) => setTimeout(next, 100)); // the polling interval
    }
    if (started.exitCode === null) child = started;
  }
  const running = child;
  return {
    baseUrl,
    apiKey,
    own: true,
    maxBodyBytes: MAX_BODY_BYTES,
    createKey,
    stop: async () => {
      running.kill("SIGTERM");
      await exited(running);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

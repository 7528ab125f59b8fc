/**
 * `bma-executor` reaching a harness over TLS, as it does in production: the token exchange over
 * `https://` and the connection over `wss://` (the `ws` package on Node and Deno, Bun's own
 * client on Bun), through a TLS front on 127.0.0.1 that hands the plaintext to the harness, as a
 * load balancer would. The executor trusts the front's certificate through its runtime's own
 * variable for an extra CA (`NODE_EXTRA_CA_CERTS`; Deno: `DENO_CERT`). A tool call goes both
 * ways, and the upgrade request, read by the front in plaintext, offers no `permessage-deflate`.
 * And every dialer of the runtime, refused by a certificate it does not trust, says why.
 *
 * `tls/`: a test-only CA and a certificate for `localhost` / 127.0.0.1 it signed (valid until
 * 2126; the CA's key was not kept).
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { connect as connectTcp, type Server, type Socket } from "node:net";
import { createServer as createTlsServer } from "node:tls";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import { DialError } from "../../mod.ts";
import { EVERY_DIALER } from "../helpers/dialers.ts";
import { SECRETS } from "../helpers/executor-fixture.ts";
import {
  EXECUTOR_CLI,
  exitCodeAfterSigterm,
  finished,
  printed,
  RUNTIME,
  spawnTs,
} from "../helpers/runtime-command.ts";

const { Harness } = RUNTIME === "bun"
  ? await import("../../harness/bun.ts")
  : RUNTIME === "deno"
  ? await import("../../harness/deno.ts")
  : await import("../../harness/node.ts");

const TLS_DIR = new URL("./tls/", import.meta.url).pathname;
const CA = join(TLS_DIR, "ca.pem");

describe(`bma-executor over https:// and wss:// (${RUNTIME})`, { timeout: 60_000 }, () => {
  const upgrades: string[] = [];
  const sockets = new Set<Socket>();
  let front: Server;
  let frontPort: number;
  let harness: InstanceType<typeof Harness>;
  let server: Awaited<ReturnType<InstanceType<typeof Harness>["serve"]>>;
  let dir: string;
  let child: ChildProcess | undefined;

  before(async () => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), "bma-wss-")));
    let harnessPort = 0;
    // The front: TLS in, plaintext to the harness; it keeps the head of each connection's first
    // request when that is a WebSocket upgrade.
    front = createTlsServer({
      key: readFileSync(join(TLS_DIR, "localhost-key.pem")),
      cert: readFileSync(join(TLS_DIR, "localhost-cert.pem")),
    }, (tls) => {
      const plain = connectTcp(harnessPort, "127.0.0.1");
      sockets.add(tls).add(plain);
      let head: string | undefined = "";
      tls.on("data", (chunk: Buffer) => {
        if (head !== undefined) {
          head += chunk.toString("latin1");
          const end = head.indexOf("\r\n\r\n");
          if (end >= 0) {
            if (/^upgrade: *websocket/im.test(head.slice(0, end))) {
              upgrades.push(head.slice(0, end));
            }
            head = undefined;
          } else if (head.length > 8192) head = undefined;
        }
        plain.write(chunk);
      });
      plain.on("data", (chunk: Buffer) => tls.write(chunk));
      tls.on("end", () => plain.end());
      plain.on("end", () => tls.end());
      tls.on("error", () => plain.destroy());
      plain.on("error", () => tls.destroy());
      tls.on("close", () => sockets.delete(tls));
      plain.on("close", () => sockets.delete(plain));
    });
    await new Promise<void>((resolve) => front.listen(0, "127.0.0.1", resolve));
    frontPort = (front.address() as AddressInfo).port;
    harness = new Harness({
      tokens: {
        secret: SECRETS.jwtSecret,
        credentials: [
          { environmentId: SECRETS.environmentId, environmentKey: SECRETS.environmentKey },
        ],
        connectUrl: `wss://127.0.0.1:${frontPort}/v1/executors/connect`,
      },
    });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    harnessPort = Number(new URL(server.httpUrl).port);
  });

  after(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill("SIGKILL");
      await finished(child);
    }
    await harness.close();
    await server.close();
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => front.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  it("exchanges its key over https://, registers over wss:// with no extension offered, and serves a call", async () => {
    child = spawnTs(EXECUTOR_CLI, ["--workdir", dir, "--log-level", "error"], {
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        HOME: dir,
        BMA_BASE_URL: `https://127.0.0.1:${frontPort}`,
        BMA_ENVIRONMENT_ID: SECRETS.environmentId,
        BMA_ENVIRONMENT_KEY: SECRETS.environmentKey,
        NODE_EXTRA_CA_CERTS: CA,
        DENO_CERT: CA,
      },
    });
    const exited = finished(child);
    await Promise.race([
      printed(child, "registered "),
      exited.then((end) => Promise.reject(new Error(`exited: ${end.stderr}`))),
    ]);
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_wss" });
    await session.ready();
    const result = await session.tools.bash.call({ command: "echo over-tls" });
    assert.equal(result.structured_content?.exit_code, 0);
    assert.match(JSON.stringify(result), /over-tls/);

    assert.ok(upgrades.length >= 1, "the WebSocket upgrade came through the front");
    // Compared piece by piece: the head holds the executor's token, which no failure may print.
    for (const head of upgrades) {
      assert.equal(head.split("\r\n")[0].split(" ")[1], "/v1/executors/connect");
      const offered = /^sec-websocket-extensions:(.*)$/im.exec(head)?.[1]?.trim();
      assert.equal(offered, undefined, "the upgrade offers no extension");
    }

    child.kill("SIGTERM");
    const end = await exited;
    assert.equal(exitCodeAfterSigterm(end), 0, end.stderr);
    assert.match(end.stdout, /stopped, exit code 0/);
  });
});

describe(`a wss:// dial to a certificate this process does not trust (${RUNTIME})`, {
  timeout: 20_000,
}, () => {
  let tls: Server;
  let port: number;
  const open = new Set<Socket>();

  before(async () => {
    tls = createTlsServer({
      key: readFileSync(join(TLS_DIR, "localhost-key.pem")),
      cert: readFileSync(join(TLS_DIR, "localhost-cert.pem")),
    }, (socket) => socket.destroy());
    tls.on("connection", (socket: Socket) => {
      open.add(socket);
      socket.on("close", () => open.delete(socket));
    });
    await new Promise<void>((resolve) => tls.listen(0, "127.0.0.1", resolve));
    port = (tls.address() as AddressInfo).port;
  });

  after(async () => {
    for (const socket of open) socket.destroy();
    await new Promise<void>((resolve) => tls.close(() => resolve()));
  });

  for (const [name, dial] of EVERY_DIALER) {
    it(`${name}: DialError, the certificate named in its causes, the URL's secret in none`, async () => {
      const error = await dial(`wss://127.0.0.1:${port}/connect?token=SECRET_in_query_71c`, {
        protocols: ["bma.executor.v1.1"],
      }).then(
        (transport) => {
          transport.close();
          return undefined;
        },
        (e: unknown) => e,
      );
      assert.ok(error instanceof DialError, `rejected with a DialError, not ${String(error)}`);
      const said: string[] = [];
      for (let at: unknown = error; at instanceof Error; at = at.cause) {
        said.push(at.message, String((at as { code?: unknown }).code ?? ""));
      }
      const text = said.join(" | ");
      assert.ok(
        /certificate|UNABLE_TO_VERIFY|UnknownIssuer/i.test(text),
        "the reason names the certificate",
      );
      assert.ok(!text.includes("SECRET_in_query"), "no cause repeats the URL's query");
    });
  }
});

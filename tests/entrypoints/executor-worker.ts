/**
 * A Worker that runs an executor with `bma-executor-sdk/workers`: `GET /run?url=<ws url>` dials
 * that harness with the Workers dialer (`fetch` + `Upgrade: websocket`), serves `bash` until
 * the harness closes it, and answers with how it ended.
 */
import { ExecutorClient } from "../../workers.ts";

export default {
  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url).searchParams.get("url")!;
    const client = new ExecutorClient({
      harnessUrl: url,
      executor: { name: "on-workers", os: "workerd", arch: "wasm", version: "1.0.0" },
    });
    client.tools.bash.handle(({ command }) => ({
      stdout: `workerd ran ${command}`,
      stderr: "",
      exit_code: 0,
    }));
    const registration = await client.start();
    const closed = await client.closed;
    return Response.json({ protocol: registration.protocol, closed: closed.reason });
  },
};

/** Test helpers: the far end of a transport driven by hand, frame by frame. */
import {
  createLinkedTransportPair,
  type LogFields,
  type Logger,
  Peer,
  type PeerOptions,
  type Transport,
} from "../../mod.ts";

/** A transport end whose incoming frames the test reads one at a time. */
export class RawEnd {
  readonly frames: string[] = [];
  #waiters: ((frame: string) => void)[] = [];
  constructor(readonly transport: Transport) {
    transport.listen((frame) => {
      const waiter = this.#waiters.shift();
      if (waiter) waiter(frame);
      else this.frames.push(frame);
    });
  }
  /** Sends raw text. */
  send(text: string): void {
    this.transport.send(text);
  }
  /** Sends a value as JSON. */
  sendJson(value: unknown): void {
    this.transport.send(JSON.stringify(value));
  }
  /** The next frame received, parsed. */
  async next(): Promise<any> {
    const frame = this.frames.shift() ?? await new Promise<string>((r) => this.#waiters.push(r));
    return JSON.parse(frame);
  }
  /** Resolves after pending deliveries have run, to assert that nothing arrived. */
  async idle(): Promise<void> {
    for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 0));
  }
}

/** A log sink that keeps every record, for assertions. */
export class CapturingLogger implements Logger {
  readonly records: { level: string; message: string; fields?: LogFields }[] = [];
  debug(message: string, fields?: LogFields): void {
    this.records.push({ level: "debug", message, fields });
  }
  info(message: string, fields?: LogFields): void {
    this.records.push({ level: "info", message, fields });
  }
  warn(message: string, fields?: LogFields): void {
    this.records.push({ level: "warn", message, fields });
  }
  error(message: string, fields?: LogFields): void {
    this.records.push({ level: "error", message, fields });
  }
  /** Everything logged, as one string, for secret scans. */
  text(): string {
    return JSON.stringify(this.records);
  }
}

/** A peer on one end of an in-memory pair and a raw end on the other. */
export function peerWithRawEnd(
  options: PeerOptions & { subprotocol?: string } = {},
): { peer: Peer; raw: RawEnd; logger: CapturingLogger } {
  const [a, b] = createLinkedTransportPair({
    protocol: options.subprotocol ?? "bma.executor.v1.1",
  });
  const logger = options.logger instanceof CapturingLogger ? options.logger : new CapturingLogger();
  const peer = new Peer(a, { logger, ...options });
  return { peer, raw: new RawEnd(b), logger };
}

/** Capabilities that advertise every gated method of the contract. */
export const ALL_CAPABILITIES = {
  tools: ["bash", "read", "write", "edit", "glob", "grep"],
  shell: { enabled: true },
  files: { enabled: true },
  process: true,
  terminal: true,
  skills: true,
  file_transfer: true,
  git_credentials: true,
  workspace_backup: true,
  mcp: { servers: [] },
  agent: { custom_tools: true },
  fs: { fuse: true },
};

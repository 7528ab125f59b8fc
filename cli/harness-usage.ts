/**
 * The text of `bma-harness --help` and of its `help` command: one copy, printed by both. Its own
 * module so that the entry point and the commands read it without importing each other.
 */
import { SDK_VERSION as VERSION } from "../executor/version.ts";

export const USAGE =
  `bma-harness ${VERSION} — a local harness of the BMA Executor Protocol (bma.executor.v1.1)

Usage: bma-harness [--host 127.0.0.1] [--port 7700] [--unix /path.sock] [--heartbeat-ms 15000]

Listens on 127.0.0.1 (and/or a Unix socket) without authentication, for executors on this
machine; any other --host needs --insecure-no-auth. Reads commands from stdin, one per line.
They run concurrently (a call runs while the next command is answered), except wait and attach,
which hold the commands after them until they are done. A line is split into words as a shell
splits it ('a b', "a b", a\\ b; nothing is expanded): attach ses_1 sh -c 'echo hi; exit 7'. The
JSON of call and the command of bash are the rest of the line, as typed.

As a service, with a store, authentication and standbys: bma-harness serve (serve --help).

Executors and sessions:
  executors                          the executors the harness holds
  sessions                           the live sessions
  tools <executor|session>           the tools an executor advertises, with their input schemas
  assign <executor> [session]        assign a session (<executor> "-": the first connected one;
                                     the session id defaults to ses_<n>)
  drain <executor>                   drain an executor (no new sessions)
Tool calls:
  call <session> <tool> <json>       call a tool; progress and the result print as they arrive
  bash <session> <command...>        shorthand for call <session> bash {"command": ...}
  cancel [<session>] <call_id>       cancel a running call
  stop <session> [reason]            cancel the session's running calls, then stop it (the
                                     executor kills its processes); prints when it has ended
Events and terminals:
  events <session> [--follow]        the session's durable events so far; --follow: and the new
                                     ones as they arrive, until the session ends
  attach <session> [--id <terminal_id>] [program args...]
                                     attach this terminal to a terminal of the session (default:
                                     the executor user's login shell); Ctrl-] detaches, and
                                     attach --id <terminal_id> attaches again
Waiting (holds the commands after it; the way a script sequences):
  wait <n>                           until n executors are connected
  wait <call_id|session>...          until these calls have ended and these sessions have ended
  wait                               until every running call and command has ended
  wait ... --timeout <ms>            give up after ms (an error line), then go on
Other:
  login-link                         a new one-time login URL of the inspector (--ui)
  help                               this text
  quit                               stop (as Ctrl-C does) and exit

Output: one line per event, starting with what it is about: a call id ("call_1 started",
"call_1 stdout| ...", "call_1 completed: {...}", "call_1 failed: ..."), a session id, an
executor id, or the command's word ("assigned", "stopped", "ready", "waited", ...). A command
that fails prints "error: <command>: <why>", with the contract's issue paths when the contract
refuses what was given ("input.content: ..."). Empty lists say so ("no executors connected").

Signals: Ctrl-C (SIGINT), SIGTERM or SIGHUP stops: running calls are canceled and the sessions
stopped (their processes killed), then the harness exits 0; it says on stderr what it waits for,
and a second Ctrl-C exits at once (130). The end of input (Ctrl-D, the end of a script) first waits
for the running calls and commands, then stops the same way. The last line on stdout is
"closed, exit code <n>".

Options:
  --host <address>       the address to listen on (default 127.0.0.1)
  --port <n>             the TCP port (default 7700; 0: any free port)
  --unix <path>          also listen on a Unix socket (a socket file left there is replaced;
                         anything else there is left alone, and the start fails)
  --heartbeat-ms <n>     the heartbeat interval executors are given (default 15000)
  --insecure-no-auth     allow a --host beyond loopback, still without authentication
  --ui                   serve the inspector page on 127.0.0.1 (a port of its own) and print a
                         one-time URL that opens it ("inspector http://127.0.0.1:<port>/login?...");
                         agent executors' turns and approvals are served too
  --ui-port <n>          the inspector's port (default 0: any free port; implies --ui)
  --help                 this text
  --version              the version (and the contract's)

Exit codes: 0 after quit, the end of input or a signal; 1 it could not start (the port is in
use, ...); 2 a bad flag; 130 a second signal.
`;

/** The text of `bma-harness serve --help`. */
export const SERVE_USAGE =
  `bma-harness serve ${VERSION} — the harness as a service (bma.executor.v1.1)

Usage: bma-harness serve [--host 127.0.0.1] [--port 7700] [--store sqlite:PATH|postgres://…]
                         [--standby] [--log-format text|json] [--config FILE] [options]

Runs until SIGTERM or SIGINT, with no terminal (standard input is not read): under systemd, in a
container, with nohup or &. On one port it serves the executors' WebSocket endpoint, the token
endpoints (POST /v1/environments/{id}/token, /v1/machines/{id}/token, /v1/executors/token), the
brain HTTP API under /v1/harness (behind the brain token), GET /metrics (behind the metrics token),
GET /healthz (200 while the process runs) and GET /readyz (200 while it holds its store and takes
executors; 503 while starting, standing by, draining or fenced).

Settings come from the flags, else the environment, else the config file (--config, a JSON object
whose keys are the flags' names). Secrets come from a file or the environment, never a flag's value:

  --jwt-secret-file F        BMA_JWT_SECRET (or BMA_JWT_SECRET_FILE)   token endpoint's HS256 secret
                             (>= 32 bytes)
  --credentials-file F       BMA_CREDENTIALS (or _FILE)  [{"environmentId","environmentKey"},...]
  --brain-token-file F       BMA_BRAIN_TOKEN (or _FILE)   the brain API's bearer token (>= 16 chars)
  --metrics-token-file F     BMA_METRICS_TOKEN (or _FILE) GET /metrics's bearer token (>= 16 chars)

Options:
  --host <address>           BMA_HARNESS_HOST; default 127.0.0.1. Beyond loopback it needs a JWT
                             secret (or --insecure-no-auth)
  --port <n>                 BMA_HARNESS_PORT; default 7700 (0: any free port)
  --unix <path>              BMA_HARNESS_UNIX; also listen on a Unix socket (a socket file left
                             there is replaced; anything else there is left alone: exit 2)
  --store <spec>             BMA_HARNESS_STORE: sqlite:PATH or postgres://user@host:port/db;
                             default none: this process's memory (nothing survives a
                             restart, an ended session's events are gone with it)
  --store-table <name>       BMA_HARNESS_STORE_TABLE: the PostgreSQL table (one per partition)
  --store-renew-ms <n>       BMA_HARNESS_STORE_RENEW_MS: how often the holder renews its claim
                             (default 5000; a holder silent for 3 times that is gone)
  --max-stored-artifact-bytes <n>
                             BMA_HARNESS_MAX_STORED_ARTIFACT_BYTES: most bytes the artifacts
                             results point at hold at once (default 1 GiB); in a store the
                             oldest are deleted to make room
  --standby                  BMA_HARNESS_STANDBY: while another harness holds the store, wait
                             (/readyz 503), then take it over once that one is gone
  --takeover                 claim the store even from a live holder (that one is fenced)
  --log-format text|json     BMA_LOG_FORMAT: one line per record; json: one object per line
                             (time, level, message, executor_id, session_id, tool_call_id, ...)
  --shutdown-grace <d>       BMA_SHUTDOWN_GRACE: how long a drain may take (default 30s, 1ms-35791m)
  --heartbeat-ms <n>         BMA_HEARTBEAT_INTERVAL_MS (default 15000)
  --request-timeout-ms <n>   BMA_REQUEST_TIMEOUT_MS (default 60000)
  --max-frame-bytes <n>      BMA_MAX_FRAME_BYTES (default 1048576)
  --token-ttl-seconds <n>    BMA_TOKEN_TTL_SECONDS (default 300)
  --token-issuer <iss>       BMA_TOKEN_ISSUER (default bma-harness)
  --connect-url <url>        BMA_CONNECT_URL: the ws:// or wss:// url the token endpoint hands out
  --insecure-no-auth         BMA_INSECURE_NO_AUTH=true: executors connect without a token
  --ui, --ui-port <n>        the inspector on 127.0.0.1 (its one-time login URL goes to stderr)
  --help                     this text

Signals: the first SIGTERM, SIGINT or SIGHUP drains: /readyz turns 503, new executors and
sessions are refused, executors are closed with 1001 (they reconnect through the same address,
to the next harness), the store lets go with every acknowledgement written, and the process
exits 0 (1 when the drain outlasted --shutdown-grace). A second signal exits at once (130).

Exit codes: 0 after a drain; 1 it could not start (the store is held and no --standby, ...) or
the drain outlasted its grace; 2 bad input (a flag, a store URL, a number that is not a positive
integer, a missing secret file or a secret too short, a database that refuses the login, a port
in use); 130 a second signal.
`;

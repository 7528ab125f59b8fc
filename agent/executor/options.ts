/**
 * The options of the agent capability on the executor end ({@linkcode ServeAgentOptions}) and
 * their defaults, apart from `serve.ts` so that the service's parts can read them without
 * importing the entry point that builds the service.
 */

/** Refresh a model or tools token when less than this remains: 10 minutes. */
export const TOKEN_REFRESH_LEAD_MS = 10 * 60_000;
/** How long a custom tool call waits for its result by default: 10 minutes. */
export const DEFAULT_CUSTOM_TOOL_TIMEOUT_MS = 10 * 60_000;

/** Options of {@linkcode serveAgent}. */
export interface ServeAgentOptions {
  /**
   * Most agent sessions open at once, advertised as `agent.max_sessions`; a `turn.start` for a
   * new session beyond it is refused with -32009.
   */
  maxSessions?: number;
  /**
   * Serve `agent.custom_tool_result` and let turns call custom tools (`turn.customTool`);
   * advertised as `agent.custom_tools`. Default false.
   */
  customTools?: boolean;
  /** How long a custom tool call waits for its result. Default 10 minutes. */
  customToolTimeoutMs?: number;
  /** Refresh tokens when less than this remains. Default 10 minutes. */
  tokenRefreshLeadMs?: number;
  /**
   * After a cancel, how long `runTurn` may take to return before the turn is ended without it
   * (its later emits are refused). Default 5 s.
   */
  cancelGraceMs?: number;
}

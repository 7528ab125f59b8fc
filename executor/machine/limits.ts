/**
 * The bounds of the executor's file access, one {@linkcode MachineLimits} given to
 * `serveMachine({ limits })`: the file tools, file transfer, `skill.install` and
 * `workspace.backup`. Kept apart from the tools (`*.node.ts`) so that the declarations of
 * `serveMachine`'s options name no Node types.
 */

/** Every bound of the executor's file access; each tool reads its own. */
export interface MachineLimits {
  /** Most bytes of content `read` returns (then `truncated`). Default 256 KiB. */
  readBytes: number;
  /** Largest file `edit` rewrites. Default 16 MiB. */
  editBytes: number;
  /** Most directory entries one `glob` or `grep` looks at. Default 100,000. */
  walkEntries: number;
  /** Deepest directory level a walk enters. Default 64. */
  walkDepth: number;
  /** Most paths `glob` returns. Default 1,000. */
  globResults: number;
  /** Most matches `grep` returns, whatever `max_results` asks. Default 5,000. */
  grepResults: number;
  /** Largest file `grep` searches (larger ones are skipped). Default 10 MiB. */
  grepFileBytes: number;
  /** Most bytes one `grep` reads, over all files. Default 128 MiB. */
  grepBytes: number;
  /** Longest part of a line a pattern is matched against (the rest is ignored). Default 1 MiB. */
  grepLineChars: number;
  /** Longest matching line reported; a longer one is cut and ends with `…`. Default 2,000. */
  grepMatchChars: number;
  /** The executor's default and cap of `file.download`'s `max_bytes`. Default 4 MiB. */
  downloadBytes: number;
  /** Largest archive `skill.install` fetches from a URL source. Default 64 MiB. */
  skillArchiveBytes: number;
  /** Most bytes a skill's files may hold, unpacked. Default 256 MiB. */
  skillBytes: number;
  /** Most entries (files, directories, links) of one skill. Default 10,000. */
  skillEntries: number;
  /** How long fetching a skill archive may take, body included. Default 60 s. */
  skillFetchMs: number;
  /** How long a replaced skill version stays for readers still in it. Default 60 s. */
  skillRetainMs: number;
  /** How long a `workspace.backup` upload may take. Default 30 minutes. */
  backupUploadMs: number;
  /** Where a backup's archive is spooled before its upload. Default the system's temp dir. */
  backupSpoolDir?: string;
  /** Terminals open at once in one session (then -32009 `too_many_terminals`). Default 64. */
  terminalsPerSession: number;
  /**
   * Terminals open at once on the whole executor, over all its sessions (then -32009
   * `too_many_terminals`): each holds a PTY and a process, and the machine has a few thousand
   * PTYs for everyone. Default 128.
   */
  terminals: number;
  /** MCP channels open at once in one session (then -32009 `too_many_channels`). Default 32. */
  mcpChannelsPerSession: number;
  /** MCP channels open at once on the executor, each a server process. Default 128. */
  mcpChannels: number;
}

/** The default {@linkcode MachineLimits}. */
export const DEFAULT_MACHINE_LIMITS: Readonly<MachineLimits> = Object.freeze({
  readBytes: 256 * 1024,
  editBytes: 16 * 1024 * 1024,
  walkEntries: 100_000,
  walkDepth: 64,
  globResults: 1_000,
  grepResults: 5_000,
  grepFileBytes: 10 * 1024 * 1024,
  grepBytes: 128 * 1024 * 1024,
  grepLineChars: 1024 * 1024,
  grepMatchChars: 2_000,
  downloadBytes: 4 * 1024 * 1024,
  skillArchiveBytes: 64 * 1024 * 1024,
  skillBytes: 256 * 1024 * 1024,
  skillEntries: 10_000,
  skillFetchMs: 60_000,
  skillRetainMs: 60_000,
  backupUploadMs: 30 * 60_000,
  terminalsPerSession: 64,
  terminals: 128,
  mcpChannelsPerSession: 32,
  mcpChannels: 128,
});

/** The bounds of the file tools. */
export type FileLimits = Pick<
  MachineLimits,
  | "readBytes"
  | "editBytes"
  | "walkEntries"
  | "walkDepth"
  | "globResults"
  | "grepResults"
  | "grepFileBytes"
  | "grepBytes"
  | "grepLineChars"
  | "grepMatchChars"
>;

/** The bounds of file transfer. */
export type FileTransferLimits = Pick<MachineLimits, "downloadBytes">;

/** The bounds of `skill.install`. */
export type SkillLimits = Pick<
  MachineLimits,
  "skillArchiveBytes" | "skillBytes" | "skillEntries" | "skillFetchMs" | "skillRetainMs"
>;

/** The bounds of terminals. */
export type TerminalLimits = Pick<MachineLimits, "terminalsPerSession" | "terminals">;

/** The bounds of `workspace.backup`. */
export type BackupLimits = Pick<MachineLimits, "backupUploadMs" | "backupSpoolDir">;

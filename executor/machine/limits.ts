/**
 * The bounds of the executor's file access, one {@linkcode MachineLimits} given to
 * `serveMachine({ limits })`: the file tools, file transfer, `skill.install` and
 * `workspace.backup`. Kept apart from the tools (`*.node.ts`) so that the declarations of
 * `serveMachine`'s options name no Node types.
 */

/** Bounds of one file tool call. */
export interface FileLimits {
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
}

/** The default {@linkcode FileLimits}. */
export const DEFAULT_FILE_LIMITS: Readonly<FileLimits> = Object.freeze({
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
});

/** Bounds of file transfer. */
export interface FileTransferLimits {
  /** The executor's default and cap of `file.download`'s `max_bytes`. Default 4 MiB. */
  downloadBytes: number;
}

/** The default {@linkcode FileTransferLimits}. */
export const DEFAULT_FILE_TRANSFER_LIMITS: Readonly<FileTransferLimits> = Object.freeze({
  downloadBytes: 4 * 1024 * 1024,
});

/** Bounds of `skill.install`. */
export interface SkillLimits {
  /** Largest archive fetched from a URL source. Default 64 MiB. */
  skillArchiveBytes: number;
  /** Most bytes a skill's files may hold, unpacked. Default 256 MiB. */
  skillBytes: number;
  /** Most entries (files, directories, links) of one skill. Default 10,000. */
  skillEntries: number;
  /** How long fetching an archive may take, body included. Default 60 s. */
  skillFetchMs: number;
  /** How long a replaced version stays for readers still in it. Default 60 s. */
  skillRetainMs: number;
}

/** The default {@linkcode SkillLimits}. */
export const DEFAULT_SKILL_LIMITS: Readonly<SkillLimits> = Object.freeze({
  skillArchiveBytes: 64 * 1024 * 1024,
  skillBytes: 256 * 1024 * 1024,
  skillEntries: 10_000,
  skillFetchMs: 60_000,
  skillRetainMs: 60_000,
});

/** Bounds of `workspace.backup`. */
export interface BackupLimits {
  /** How long the upload may take. Default 30 minutes. */
  backupUploadMs: number;
  /** Where the archive is spooled before the upload. Default the system's temporary directory. */
  backupSpoolDir?: string;
}

/** The default {@linkcode BackupLimits}. */
export const DEFAULT_BACKUP_LIMITS: Readonly<BackupLimits> = Object.freeze({
  backupUploadMs: 30 * 60_000,
});

/** Bounds of file transfer, `skill.install` and `workspace.backup`. */
export type TransferLimits = FileTransferLimits & SkillLimits & BackupLimits;

/** The default {@linkcode TransferLimits}. */
export const DEFAULT_TRANSFER_LIMITS: Readonly<TransferLimits> = Object.freeze({
  ...DEFAULT_FILE_TRANSFER_LIMITS,
  ...DEFAULT_SKILL_LIMITS,
  ...DEFAULT_BACKUP_LIMITS,
});

/** Every bound of the executor's file access. */
export type MachineLimits = FileLimits & TransferLimits;

/** The default {@linkcode MachineLimits}. */
export const DEFAULT_MACHINE_LIMITS: Readonly<MachineLimits> = Object.freeze({
  ...DEFAULT_FILE_LIMITS,
  ...DEFAULT_TRANSFER_LIMITS,
});

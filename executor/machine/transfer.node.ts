/**
 * The capability requests that move files, each confined to the workdir by `Workdir`:
 * file transfer (`file-transfer.node.ts`), `skill.install` (`skills.node.ts`) and
 * `workspace.backup` (`backup.node.ts`), with their bounds in one {@linkcode TransferLimits}.
 */
import { type BackupLimits, DEFAULT_BACKUP_LIMITS } from "./backup.node.ts";
import { DEFAULT_FILE_TRANSFER_LIMITS, type FileTransferLimits } from "./file-transfer.node.ts";
import { DEFAULT_SKILL_LIMITS, type SkillLimits } from "./skills.node.ts";

export { backupWorkspace } from "./backup.node.ts";
export type { BackupLimits } from "./backup.node.ts";
export { downloadFile, FileHashes, transferError, uploadFile } from "./file-transfer.node.ts";
export type { FileTransferLimits } from "./file-transfer.node.ts";
export { installSkill } from "./skills.node.ts";
export type { InstallSkillOptions, SkillLimits } from "./skills.node.ts";

/** Bounds of file transfer, `skill.install` and `workspace.backup`. */
export type TransferLimits = FileTransferLimits & SkillLimits & BackupLimits;

/** The default {@linkcode TransferLimits}. */
export const DEFAULT_TRANSFER_LIMITS: Readonly<TransferLimits> = Object.freeze({
  ...DEFAULT_FILE_TRANSFER_LIMITS,
  ...DEFAULT_SKILL_LIMITS,
  ...DEFAULT_BACKUP_LIMITS,
});

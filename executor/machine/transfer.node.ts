/**
 * The capability requests that move files, each confined to the workdir by `Workdir`:
 * file transfer (`file-transfer.node.ts`), `skill.install` (`skills.node.ts`) and
 * `workspace.backup` (`backup.node.ts`); their bounds are in `limits.ts`.
 */
export { backupWorkspace } from "./backup.node.ts";
export {
  downloadFile,
  FileHashes,
  sweepUploads,
  transferError,
  uploadFile,
  type UploadFileOptions,
} from "./file-transfer.node.ts";
export { PendingUploads, removeDropped } from "./pending-uploads.node.ts";
export { installSkill, type InstallSkillOptions } from "./skills.node.ts";
export type { BackupLimits, FileTransferLimits, SkillLimits } from "./limits.ts";

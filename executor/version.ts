/** The version of this SDK and of its command-line tools (package.json and deno.json agree). */
export const SDK_VERSION = "0.1.0";

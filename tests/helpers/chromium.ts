/**
 * The Chromium the browser tests drive: `BMA_CHROMIUM` when set, or else the build that
 * `@sparticuz/chromium` (a devDependency) ships inside its npm package, unpacked to the temp
 * directory on first use. The suite needs no browser of the machine's and no download outside
 * the npm registry.
 */
export async function chromiumPath(): Promise<string> {
  const given = process.env.BMA_CHROMIUM;
  if (given) return given;
  const { default: chromium } = await import("@sparticuz/chromium");
  return await chromium.executablePath();
}

/** What a headless Chromium needs here: no sandbox as root, no calls to Google's hosts. */
export const CHROMIUM_ARGS: readonly string[] = [
  "--no-sandbox",
  "--no-zygote",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/**
 * Chromium's environment: this process's, in a UTF-8 locale. In the C locale (a bare machine's, or
 * a runner that passes no `LANG`), Chromium cannot name a download that has a non-ASCII name and
 * calls it after its URL instead.
 */
export function chromiumEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined) env[key] = value;
  }
  return { ...env, LANG: "C.UTF-8", LC_ALL: "C.UTF-8" };
}

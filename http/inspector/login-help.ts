/**
 * The page a browser without a session gets (401): why it is refused, and how to get a new
 * login link. Everything in it is the server's own, escaped; its style is inline, allowed by
 * its hash in the content security policy.
 */

/** The style of the page a browser without a session gets (inline: its hash is in the CSP). */
export const LOGIN_HELP_CSS =
  `body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d1f21;background:#fbfbfa}` +
  `main{max-width:640px;margin:0 auto;padding:24px 16px}h1{font-size:20px;margin:0 0 12px}h2{font-size:16px;margin:20px 0 6px}` +
  `code{font:13px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#eef0f2;padding:0 4px;border-radius:3px;overflow-wrap:anywhere}` +
  `li{margin:6px 0}.why{color:#6a6f75}` +
  `@media (prefers-color-scheme: dark){body{color:#e4e6e8;background:#15171a}code{background:#2c3036}.why{color:#9aa1a9}}`;

/** What {@linkcode loginHelpHtml} says. */
export interface LoginHelp {
  /** The inspector's mount path ("" at the root). */
  readonly base: string;
  /** `link`: a login link that was used or expired; `session`: no live session. */
  readonly reason: "link" | "session";
  /** How long a login link works, in ms. */
  readonly loginCodeTtlMs: number;
  /** How long a session lasts, in ms. */
  readonly sessionTtlMs: number;
  /** A line of the server's own on how to get a link (plain text). */
  readonly hint?: string;
}

/**
 * The page a browser gets (401) where it has no session: why, and how to get a new login link.
 * Everything in it is the server's own (no part of the request), escaped.
 */
export function loginHelpHtml(help: LoginHelp): string {
  const why = help.reason === "link"
    ? `This login link was used already, or it has expired: a link logs one browser in, once, within ${
      duration(help.loginCodeTtlMs)
    } of being made.`
    : `This browser has no live session with this inspector: it never logged in, its session ended (a session lasts ${
      duration(help.sessionTtlMs)
    }), its cookie was removed, or the inspector was restarted (sessions live in its memory only).`;
  const base = escapeHtml(help.base);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>bma inspector: log in</title>
<link rel="icon" href="${base}/favicon.svg" type="image/svg+xml">
<style>${LOGIN_HELP_CSS}</style>
</head>
<body>
<main id="login-help" data-reason="${help.reason}">
<h1>Log in to the bma inspector</h1>
<p class="why">${escapeHtml(why)}</p>
<h2>Get a new login link, then open it here</h2>
<ul>
${
    help.hint
      ? `<li id="login-hint">${escapeHtml(help.hint)}</li>\n`
      : ""
  }<li><code>bma-harness --ui</code> prints one when it starts: <code>inspector http://127.0.0.1:&lt;port&gt;/login?code=…</code>.</li>
<li>A browser logged in to this inspector makes one for another browser: its <strong>Login link</strong> button.</li>
<li>Your own code: <code>await ui.loginUrl(server.url)</code>, or <code>POST ${base}/api/login-links</code> with <code>Authorization: Bearer &lt;token&gt;</code>, which answers <code>{"url": "…"}</code>.</li>
</ul>
</main>
</body>
</html>
`;
}

function duration(ms: number): string {
  if (ms >= 2 * 3_600_000 && ms % 3_600_000 === 0) return `${ms / 3_600_000} hours`;
  if (ms >= 120_000) return `${Math.round(ms / 60_000)} minutes`;
  return `${Math.max(1, Math.round(ms / 1000))} seconds`;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

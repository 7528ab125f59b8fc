/**
 * The inspector's page: its markup and its icon, written by hand and served as strings (no
 * framework; its style is in `page-style.ts`, its script is the TypeScript of `browser/page.ts`,
 * bundled into `generated/pages.ts` by `npm run gen`). The script builds every element with
 * `document.createElement` and puts what executors send in text nodes only — never `innerHTML` —
 * and the content security policy the handler sends runs no other script.
 */

/** The page. */
export const INDEX_HTML = String.raw`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>bma inspector</title>
<link rel="icon" href="favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="app.css">
<script type="module" src="app.js"></script>
</head>
<body>
<header>
  <h1>bma inspector</h1>
  <span id="conn" class="badge">connecting</span>
  <span class="spacer"></span>
  <button type="button" id="login-link" title="A one-time URL for another browser">Login link</button>
  <input id="login-url" readonly hidden aria-label="one-time login URL">
</header>
<div id="offline" role="status" hidden></div>
<main><fieldset id="live">
  <section id="executors-section"><h2>Executors</h2><div id="executors" class="cards"><p class="empty">No executor connected yet.</p></div></section>
  <section id="sessions-section"><h2>Sessions</h2><div id="sessions"><p class="empty">No session.</p></div></section>
  <section id="call-section"><h2>Call a tool</h2>
    <form id="call-form" autocomplete="off">
      <div class="row">
        <label>Session <select id="call-session" name="session"></select></label>
        <label>Tool <select id="call-tool" name="tool"></select></label>
        <label class="inline"><input type="checkbox" id="call-raw"> edit as JSON</label>
      </div>
      <p id="call-description" class="hint"></p>
      <div id="call-fields"></div>
      <textarea id="call-json" rows="6" hidden aria-label="input as JSON"></textarea>
      <div class="row"><button type="submit" id="call-submit">Call</button><span id="call-error" class="error" role="alert"></span></div>
    </form>
  </section>
  <section id="calls-section"><h2>Tool calls</h2><div id="calls"><p class="empty">No tool call yet.</p></div></section>
  <section id="agent-section"><h2>Agent turns and interactions</h2><div id="interactions"></div><div id="turns"><p class="empty">No agent turn yet.</p></div></section>
  <section id="events-section"><h2>Events</h2><div id="events" class="feed"><p class="empty">No event yet.</p></div></section>
  <section id="notices-section" hidden><h2>Notices</h2><ul id="notices"></ul></section>
</fieldset></main>
</body>
</html>
`;

/** The inspector's icon, served at `favicon.svg` (a magnifier on the page's accent colour). */
export const FAVICON_SVG =
  `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#2f6fde"/><circle cx="14" cy="14" r="7" fill="none" stroke="#fff" stroke-width="3"/><path d="M19 19l6 6" stroke="#fff" stroke-width="3.5" stroke-linecap="round"/></svg>`;

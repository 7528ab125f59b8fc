/**
 * The inspector's machine page (`machine.html?session=<id>`): a terminal of the session in
 * xterm.js, its processes and their output, its files to browse, download and upload. Its
 * markup and style are here; its script is the TypeScript of `browser/machine.ts` (bundled into
 * `generated/pages.ts` by `npm run gen`), which makes elements with `document.createElement` and
 * puts what executors send in text nodes (or terminal cells), never `innerHTML`. Its routes are
 * in `machine.ts`.
 */

/** The page. */
export const MACHINE_HTML = String.raw`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>bma inspector: machine</title>
<link rel="icon" href="favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="app.css">
<link rel="stylesheet" href="xterm.css">
<link rel="stylesheet" href="machine.css">
<script type="module" src="machine.js"></script>
</head>
<body>
<header>
  <a href="./" id="back">&larr; inspector</a>
  <h1>Session <code id="session-id"></code></h1>
  <span id="session-state" class="badge">connecting</span>
  <span id="executor-name" class="meta"></span>
</header>
<div id="offline" role="status" hidden></div>
<main><fieldset id="live">
  <section id="terminal-section"><h2>Terminal</h2>
    <div class="row">
      <select id="terminal-choice" aria-label="terminal"></select>
      <button type="button" id="terminal-new" class="primary">New terminal</button>
      <button type="button" id="terminal-close" class="danger" disabled>Close terminal</button>
      <span id="terminal-status" class="meta" role="status"></span>
    </div>
    <div id="terminal-error" class="error" role="alert" hidden></div>
    <div id="terminal"><p class="empty">No terminal open: New terminal opens the executor's shell here.</p></div>
  </section>
  <section id="processes-section"><h2>Processes</h2>
    <div class="row"><button type="button" id="processes-refresh">Refresh</button><span id="processes-error" class="error" role="alert" hidden></span></div>
    <div id="processes"><p class="empty">Loading…</p></div>
    <div id="process-view" hidden>
      <h3 id="process-title"></h3>
      <div class="row">
        <label class="inline"><input type="radio" name="stream" value="stdout" checked> stdout</label>
        <label class="inline"><input type="radio" name="stream" value="stderr"> stderr</label>
        <button type="button" id="process-signal" class="danger">Send SIGTERM</button>
        <span id="process-status" class="meta" role="status"></span>
      </div>
      <pre id="process-text"></pre>
    </div>
  </section>
  <section id="files-section"><h2>Files</h2>
    <nav id="files-path" class="row" aria-label="directory"></nav>
    <div id="files-error" class="error" role="alert" hidden></div>
    <div id="files"><p class="empty">Loading…</p></div>
    <p class="hint">Directories show when they hold files.</p>
    <form id="upload-form" class="row">
      <input type="file" id="upload-file" aria-label="file to upload" required>
      <button type="submit" id="upload-submit">Upload here</button>
      <span id="upload-status" class="meta" role="status"></span>
    </form>
  </section>
</fieldset></main>
</body>
</html>
`;

/** The page's own style (on top of the main page's `app.css`). */
export const MACHINE_CSS = String.raw`
#back { color: var(--accent); text-decoration: none; }
#live { grid-template-columns: minmax(0, 1fr); }
#terminal { height: 380px; background: #000; border-radius: 6px; padding: 4px; overflow: hidden; }
#terminal .empty { color: #bbb; padding: 8px; }
#processes { overflow-x: auto; }
#process-text { max-height: 360px; min-height: 3em; }
#files ul { list-style: none; margin: 4px 0; padding: 0; }
#files li { padding: 3px 0; border-bottom: 1px dashed var(--line); overflow-wrap: anywhere; }
#files a, #files button.link, #files-path button.link { color: var(--accent); }
button.link { border: 0; background: none; padding: 0 2px; text-decoration: underline; }
#files-path { gap: 2px; }
@media (max-width: 600px) { #terminal { height: 300px; } }
`;

/**
 * The style of the inspector's pages (`app.css`: the main page, and under the machine page's
 * own), written by hand.
 */

/** The page's style. */
export const APP_CSS = String.raw`
:root { color-scheme: light dark; --bg: #fbfbfa; --fg: #1d1f21; --muted: #6a6f75; --line: #dcdfe3;
  --card: #fff; --accent: #2f6fde; --ok: #1f8a4c; --warn: #b7791f; --bad: #c53030; }
@media (prefers-color-scheme: dark) { :root { --bg: #15171a; --fg: #e4e6e8; --muted: #9aa1a9;
  --line: #2c3036; --card: #1c1f23; --accent: #6ea0ff; --ok: #48bb78; --warn: #ecc94b; --bad: #fc8181; } }
* { box-sizing: border-box; }
[hidden] { display: none !important; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; background: var(--bg); color: var(--fg); }
header { display: flex; flex-wrap: wrap; align-items: center; gap: 8px 12px; padding: 10px 20px; border-bottom: 1px solid var(--line); background: var(--card); }
header h1 { font-size: 16px; margin: 0; }
.spacer { flex: 1; }
main { padding: 12px 20px 40px; }
#live { margin: 0; padding: 0; border: 0; min-width: 0; min-inline-size: 0; display: grid; gap: 18px; grid-template-columns: repeat(auto-fit, minmax(min(560px, 100%), 1fr)); }
#login-url { flex: 1 1 100%; min-width: 0; }
#offline { margin: 12px 20px 0; padding: 8px 12px; border: 1px solid var(--bad); border-radius: 6px; color: var(--bad); background: var(--card); }
body.offline main { opacity: .55; filter: grayscale(1); }
:disabled { cursor: not-allowed; opacity: .6; }
button:disabled:hover { border-color: var(--line); }
#sessions, #calls, #turns { overflow-x: auto; }
.card { overflow-wrap: anywhere; }
.card.executor[data-state=gone] { opacity: .6; border-style: dashed; }
.action-error { flex-basis: 100%; }
td .action-error { display: block; white-space: normal; text-align: left; }
section { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px; min-width: 0; }
#calls-section, #events-section { grid-column: 1 / -1; }
h2 { font-size: 13px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); margin: 0 0 10px; }
.empty, .hint { color: var(--muted); margin: 4px 0; }
.cards { display: grid; gap: 10px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 10px; }
.card h3 { margin: 0 0 4px; font-size: 15px; }
.meta { color: var(--muted); font-size: 12px; }
code, pre, .mono { font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { white-space: pre-wrap; word-break: break-word; margin: 4px 0; padding: 6px 8px; background: var(--bg); border: 1px solid var(--line); border-radius: 4px; max-height: 320px; overflow: auto; }
.badge { display: inline-block; padding: 1px 7px; border-radius: 10px; font-size: 12px; border: 1px solid var(--line); color: var(--muted); white-space: nowrap; }
.badge.ok { color: var(--ok); border-color: var(--ok); }
.badge.warn { color: var(--warn); border-color: var(--warn); }
.badge.bad { color: var(--bad); border-color: var(--bad); }
.badge.run { color: var(--accent); border-color: var(--accent); }
.chips { display: flex; flex-wrap: wrap; gap: 4px; margin: 6px 0; }
.chip { font: 12px ui-monospace, monospace; padding: 0 6px; border-radius: 4px; background: var(--bg); border: 1px solid var(--line); }
table { width: 100%; border-collapse: collapse; }
th, td { text-align: left; padding: 5px 6px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 12px; color: var(--muted); font-weight: 600; }
td.actions { white-space: nowrap; text-align: right; }
button { font: inherit; padding: 3px 10px; border-radius: 5px; border: 1px solid var(--line); background: var(--bg); color: var(--fg); cursor: pointer; }
button:hover { border-color: var(--accent); }
a.button { display: inline-block; font: inherit; padding: 3px 10px; border-radius: 5px; border: 1px solid var(--line); background: var(--bg); color: var(--fg); text-decoration: none; }
a.button:hover { border-color: var(--accent); }
button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
button.danger { color: var(--bad); }
input, select, textarea { font: inherit; padding: 3px 6px; border: 1px solid var(--line); border-radius: 4px; background: var(--bg); color: var(--fg); }
textarea { width: 100%; font: 12px/1.4 ui-monospace, monospace; }
form .row, .row { display: flex; flex-wrap: wrap; gap: 10px; align-items: center; margin: 6px 0; }
.field { display: grid; gap: 2px; margin: 6px 0; }
.field > span { font-weight: 600; font-size: 13px; }
.field small { color: var(--muted); }
.field input[type=text], .field input[type=number] { width: 100%; }
label.inline { display: inline-flex; gap: 4px; align-items: center; }
.error { color: var(--bad); }
.stderr { color: var(--bad); }
.feed { display: grid; gap: 2px; max-height: 420px; overflow: auto; }
.entry { display: grid; grid-template-columns: 84px minmax(0, 220px) minmax(0, 190px) minmax(0, 1fr); gap: 10px; padding: 3px 0; border-bottom: 1px dashed var(--line); }
.entry > span { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.entry .body { cursor: pointer; }
.entry.open > .body { white-space: pre-wrap; word-break: break-word; }
.entry.preview { color: var(--muted); font-style: italic; }
.interaction { border: 1px solid var(--warn); border-radius: 6px; padding: 8px 10px; margin-bottom: 8px; }
.interaction.settled { border-color: var(--line); color: var(--muted); }
.interaction h3 { margin: 0 0 4px; font-size: 14px; }
@media (max-width: 600px) {
  header { padding: 8px 10px; }
  main { padding: 8px 8px 32px; }
  #offline { margin: 8px 8px 0; }
  section { padding: 10px; }
  .entry { grid-template-columns: 64px minmax(0, 1fr); gap: 2px 8px; }
  .entry > span.body { grid-column: 1 / -1; }
  /* Tables become stacked rows: each row's cells wrap, its buttons on a line of their own. */
  thead { display: none; }
  table, tbody { display: block; }
  tr { display: flex; flex-wrap: wrap; align-items: baseline; gap: 2px 10px; padding: 6px 0; border-bottom: 1px solid var(--line); }
  td { display: block; padding: 0; border: 0; overflow-wrap: anywhere; }
  td.actions { flex-basis: 100%; text-align: left; white-space: normal; }
  tr.call-details > td { flex-basis: 100%; min-width: 0; }
}
`;

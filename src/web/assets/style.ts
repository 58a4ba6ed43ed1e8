// The dashboard's and the static viewer's stylesheet (served as /static/style.css, inlined in views).
export const STYLE_CSS = String.raw`
:root { --fg: #1d2330; --muted: #667085; --bg: #f7f8fa; --card: #fff; --line: #e3e6eb; --ok: #137333; --bad: #b3261e;
  --warn: #9a6700; --accent: #2d5bd7; --add: #e6ffec; --del: #ffebe9; --hunk: #ddf4ff; --mono: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
nav.top { display: flex; gap: 18px; align-items: center; padding: 10px 20px; background: #1d2330; color: #fff; }
nav.top a { color: #cfd8ea; text-decoration: none; } nav.top a:hover, nav.top a.here { color: #fff; }
nav.top .brand { font-weight: 700; color: #fff; margin-right: 12px; }
main { padding: 16px 20px 60px; max-width: 1300px; margin: 0 auto; }
h1 { font-size: 20px; margin: 4px 0 12px; } h2 { font-size: 16px; margin: 20px 0 8px; }
a { color: var(--accent); }
table.list { border-collapse: collapse; width: 100%; background: var(--card); border: 1px solid var(--line); }
table.list th, table.list td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
table.list th { background: #eef1f5; font-weight: 600; font-size: 12px; text-transform: uppercase; letter-spacing: .03em; color: var(--muted); }
table.list td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.list td.task { max-width: 420px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; color: var(--muted); }
form.filters { display: flex; gap: 12px; align-items: end; margin-bottom: 12px; flex-wrap: wrap; }
form.filters label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); }
p.pager { display: flex; gap: 16px; margin-top: 12px; }
select, input, button { font: inherit; padding: 4px 8px; border: 1px solid #c4cad4; border-radius: 4px; background: #fff; }
button { cursor: pointer; } button:disabled { cursor: default; opacity: .5; }
button.danger { border-color: var(--bad); color: var(--bad); }
.badge { display: inline-block; padding: 0 7px; border-radius: 10px; font-size: 12px; background: #eef1f5; color: var(--muted); white-space: nowrap; }
.badge.s-completed { background: #e6f4ea; color: var(--ok); } .badge.s-active { background: #e8f0fe; color: var(--accent); }
.badge.s-failed, .badge.s-verify_failed, .badge.s-timeout, .badge.s-budget_exceeded, .badge.s-max_turns { background: #fce8e6; color: var(--bad); }
.badge.s-cancelled { background: #fef7e0; color: var(--warn); }
.bar { height: 8px; background: #eef1f5; border-radius: 4px; overflow: hidden; min-width: 120px; }
.bar > span { display: block; height: 100%; background: var(--ok); }
.jobhead { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 12px 16px; margin-bottom: 14px; }
.jobhead dl { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr)); gap: 6px 18px; margin: 8px 0; }
.jobhead dt { font-size: 11px; text-transform: uppercase; color: var(--muted); } .jobhead dd { margin: 0; font-variant-numeric: tabular-nums; }
.actions { display: flex; gap: 8px; align-items: center; } .actions .msg { color: var(--muted); }
.totals { font-size: 13px; color: var(--muted); margin: 6px 0 12px; font-variant-numeric: tabular-nums; }
pre { font: 12.5px/1.4 var(--mono); white-space: pre-wrap; word-break: break-word; margin: 4px 0; padding: 8px 10px; background: #f3f4f6; border-radius: 4px; max-height: none; }
.ev { background: var(--card); border: 1px solid var(--line); border-left: 4px solid #c4cad4; border-radius: 4px; padding: 6px 12px; margin: 6px 0; }
.ev .title { font-weight: 600; } .ev .meta { color: var(--muted); font-size: 12px; font-variant-numeric: tabular-nums; }
/* Long transcripts: what is off screen is neither laid out nor painted until it scrolls into view. */
#transcript > .ev, #transcript > .turn { content-visibility: auto; contain-intrinsic-size: auto 90px; }
.ev.ok { border-left-color: var(--ok); } .ev.error { border-left-color: var(--bad); } .ev.warn { border-left-color: #d4a72c; }
.ev.attempt { background: #1d2330; color: #fff; border: 0; }
.turn { background: var(--card); border: 1px solid var(--line); border-left: 4px solid var(--accent); border-radius: 4px; padding: 6px 12px; margin: 10px 0; }
.turn > header { display: flex; justify-content: space-between; gap: 12px; flex-wrap: wrap; }
.turn > header .title { font-weight: 600; } .turn > header .meta { color: var(--muted); font-size: 12px; font-variant-numeric: tabular-nums; }
.turn .text { white-space: pre-wrap; word-break: break-word; margin: 6px 0; }
.tool { border: 1px solid var(--line); border-radius: 4px; margin: 6px 0; }
.tool .call { padding: 4px 8px; background: #f7f8fa; border-bottom: 1px solid var(--line); }
.tool .call .name { font-weight: 600; font-family: var(--mono); font-size: 12.5px; }
.tool .result { padding: 2px 8px; } .tool .result .meta { color: var(--muted); font-size: 12px; }
.tool.error { border-color: #f1b5b0; } .tool.error .result pre { background: #fff1f0; }
.mark-error { color: var(--bad); font-weight: 600; }
details.fold > summary { cursor: pointer; color: var(--accent); font-size: 12px; margin: 2px 0; }
pre.diff { padding: 0; background: var(--card); border: 1px solid var(--line); overflow-x: auto; white-space: pre; word-break: normal; }
pre.diff span { display: block; padding: 0 10px; } pre.diff .add { background: var(--add); } pre.diff .del { background: var(--del); }
pre.diff .hunk { background: var(--hunk); color: #0550ae; } pre.diff .file { font-weight: 700; background: #eef1f5; }
.empty { color: var(--muted); padding: 10px 0; }
.notice { background: #fef7e0; border: 1px solid #f0d58c; border-radius: 4px; padding: 6px 10px; margin: 8px 0; }
`;

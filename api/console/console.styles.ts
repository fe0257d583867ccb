/** The console's one stylesheet, served at /console/assets/console.css (no build step, CSP-friendly). */
export const CONSOLE_CSS = `
:root { --fg:#1d2430; --muted:#5d6878; --line:#dfe3ea; --bg:#f6f7f9; --card:#fff; --accent:#2f5bd3; --accent2:#d9822b; --bad:#b42318; --ok:#127a3a; }
* { box-sizing: border-box; }
body { margin:0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color:var(--fg); background:var(--bg); }
header.top { background:#111827; color:#fff; }
header.top .wrap { display:flex; align-items:center; gap:24px; height:56px; }
header.top .brand { font-weight:600; letter-spacing:.2px; white-space:nowrap; }
nav { display:flex; gap:2px; white-space:nowrap; }
nav a { color:#cbd5e1; text-decoration:none; padding:6px 10px; border-radius:6px; }
nav a:hover { color:#fff; background:#1f2937; }
nav a.active { color:#fff; background:#374151; }
header.top form { margin:0; }
header.top .account { color:#9ca3af; font-size:13px; margin-left:auto; white-space:nowrap; overflow:hidden; text-overflow:ellipsis; }
.wrap { max-width:1240px; margin:0 auto; padding:0 24px; }
main.wrap { padding-top:24px; padding-bottom:48px; }
h1 { font-size:22px; margin:0 0 16px; }
h2 { font-size:17px; margin:28px 0 12px; }
.card { background:var(--card); border:1px solid var(--line); border-radius:10px; padding:18px 20px; margin-bottom:20px; }
table { width:100%; border-collapse:collapse; background:var(--card); border:1px solid var(--line); border-radius:10px; overflow:hidden; font-size:14px; }
th, td { text-align:left; padding:9px 12px; border-bottom:1px solid var(--line); vertical-align:top; }
th { background:#f0f2f5; font-weight:600; color:var(--muted); font-size:12px; text-transform:uppercase; letter-spacing:.4px; }
tr:last-child td { border-bottom:none; }
td.when { white-space:nowrap; }
td.id { font-size:12px; word-break:break-all; }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size:13px; }
.muted { color:var(--muted); }
.badge { display:inline-block; padding:1px 8px; border-radius:999px; font-size:12px; background:#e5e7eb; }
.badge.ok { background:#dcfce7; color:var(--ok); } .badge.bad { background:#fee2e2; color:var(--bad); } .badge.warn { background:#fef3c7; color:#92400e; }
form.inline { display:inline; }
label { display:block; font-weight:600; margin:10px 0 4px; font-size:14px; }
label.check { display:inline-flex; align-items:center; gap:6px; font-weight:400; margin-right:14px; }
input[type=text], input[type=date], select { font:inherit; padding:7px 10px; border:1px solid #c8ced8; border-radius:6px; background:#fff; min-width:220px; }
button, .button { font:inherit; padding:7px 14px; border-radius:6px; border:1px solid var(--accent); background:var(--accent); color:#fff; cursor:pointer; text-decoration:none; display:inline-block; }
button.secondary { background:#fff; color:var(--accent); }
button.danger { background:#fff; color:var(--bad); border-color:#f1b5b0; }
header.top button { background:transparent; border-color:#4b5563; color:#e5e7eb; padding:4px 12px; }
.filters { display:flex; flex-wrap:wrap; gap:12px; align-items:flex-end; }
.filters label { margin:0 0 4px; }
.filters input, .filters select { min-width:150px; }
.secret { background:#fffbeb; border:1px solid #f59e0b; border-radius:10px; padding:16px 20px; margin-bottom:20px; }
.secret code { display:block; padding:10px; background:#fff; border:1px dashed #d1a54a; border-radius:6px; word-break:break-all; font-size:14px; margin-top:8px; }
.error { background:#fef2f2; border:1px solid #fca5a5; border-radius:10px; padding:14px 18px; margin-bottom:20px; }
.stats { display:flex; gap:16px; flex-wrap:wrap; margin-bottom:20px; }
.stat { background:var(--card); border:1px solid var(--line); border-radius:10px; padding:14px 18px; min-width:180px; }
.stat b { display:block; font-size:24px; }
.pager { margin-top:12px; display:flex; gap:12px; align-items:center; }
figure.chart { margin:0; background:var(--card); border:1px solid var(--line); border-radius:10px; padding:12px 16px; }
figure.chart svg { width:100%; height:auto; display:block; }
figure.chart .grid { stroke:#eceff3; }
figure.chart .axis { fill:var(--muted); font-size:11px; }
figure.chart .axis.credits { fill:var(--accent2); }
figure.chart .bar { fill:var(--accent); opacity:.8; }
figure.chart .line { fill:none; stroke:var(--accent2); stroke-width:2; }
figure.chart .dot { fill:#fff; stroke:var(--accent2); stroke-width:2; }
figure.chart figcaption { color:var(--muted); font-size:13px; margin-top:6px; }
.key { display:inline-block; width:14px; height:10px; margin:0 4px 0 12px; vertical-align:middle; }
.key-bar { background:var(--accent); opacity:.8; } .key-line { height:3px; background:var(--accent2); }
.signin { max-width:560px; margin:60px auto; }
`;

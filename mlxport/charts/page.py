"""The report page's style: system fonts only, nothing loaded from anywhere."""

CSS = """
:root { color-scheme: light; }
body { margin: 0; background: #f6f7f9; color: #1d1f23;
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 28px 60px; background: #fff; }
h1 { font-size: 26px; margin: 0 0 14px; }
h2 { font-size: 20px; margin: 30px 0 10px; border-bottom: 1px solid #e2e4e8; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 20px 0 6px; font-family: ui-monospace, Menlo, Consolas, monospace; }
dl.setup { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0; }
dl.setup dt { color: #5a606b; }
dl.setup dd { margin: 0; }
dl.defs dt { font-weight: 600; margin-top: 8px; }
dl.defs dd { margin: 2px 0 0 18px; color: #33363c; }
.note { background: #fff8e1; border-left: 4px solid #f0b400; padding: 8px 12px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: 6px 0 12px; font-size: 13px; }
th, td { border: 1px solid #dcdfe4; padding: 4px 8px; text-align: left; vertical-align: top; }
td { white-space: nowrap; }
th { background: #eef1f5; font-weight: 600; }
tbody tr:nth-child(even) { background: #fafbfc; }
table.board td { white-space: normal; }
table.board td:nth-child(2) { font-weight: 600; white-space: nowrap; }
.plots { display: flex; flex-wrap: wrap; gap: 16px; }
figure { margin: 0; border: 1px solid #e2e4e8; border-radius: 4px; max-width: 100%;
  overflow-x: auto; }
code { font-family: ui-monospace, Menlo, Consolas, monospace; }
"""

"""report.html in a real headless Chromium: it carries what report.md does (the original's name,
correctness tables with error values, the speed text, the kernel source, the plan as it ended, the
candidates at run.json's iterations), every chart's text lies inside its frame, every series of a
chart shows in its own colour, every case has a marker on the roofline, and the page renders to a
screenshot of its full size. Chromium is driven over its DevTools protocol on a pipe."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest

from mlxport.agent.models import ScriptedModel
from mlxport.agent.port import run_port
from mlxport.agent.state import RunConfig
from mlxport.tasks import expert_ports, load_task

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium here: apt-get install chromium (.ci/run does)"
)
WIDTH = 1280

SUITE_TASK = load_task("vector_add")
PORT = expert_ports(SUITE_TASK)["msl"]
WRONG = PORT.model_copy(update={"source": PORT.source.replace("a[i] + b[i]", "a[i] - b[i]")})


def compile_call(candidate) -> dict:
    args = candidate.model_dump(mode="json", exclude_defaults=True)
    args.pop("language", None)
    return {"name": "compile_kernel", "args": args}


SMALL_CASES = """[cases]
visible = [{ N = 4096 }, { N = 256 }]
heldout = [{ N = 1001 }, { N = 7 }]
bench = [{ N = 65536 }, { N = 1048576 }]
"""


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    """vector_add at sizes the simulator checks in moments."""
    folder = tmp_path_factory.mktemp("task") / "vector_add"
    shutil.copytree(SUITE_TASK.folder, folder, ignore=shutil.ignore_patterns("__pycache__"))
    toml = (folder / "task.toml").read_text()
    (folder / "task.toml").write_text(toml[: toml.index("[cases]")] + SMALL_CASES)
    return load_task(folder)


@pytest.fixture(scope="module")
def port(task, tmp_path_factory) -> Path:
    """A real port on the simulator, driven by a scripted model: a wrong candidate, then the
    right one, then finish."""
    turns = [
        {"name": "read_cuda_source", "args": {}},
        {"name": "update_plan", "args": {"action": "add", "idea": "one thread per element"}},
        {"name": "update_plan", "args": {"action": "select", "node_id": "p1"}},
        compile_call(WRONG),
        {"name": "run_correctness", "args": {"candidate_id": WRONG.id}},
        compile_call(PORT),
        {"name": "run_correctness", "args": {"candidate_id": PORT.id}},
        {"name": "finish", "args": {"summary": "done", "candidate_id": PORT.id}},
    ]
    out = tmp_path_factory.mktemp("port")
    config = RunConfig(backend="sim", max_iterations=12, extra_seeds=0)
    run_port(task, config, out, model=ScriptedModel(script=[{"tool_calls": [t]} for t in turns]))
    return out / task.name


class Chromium:
    """Headless Chromium speaking the DevTools protocol over --remote-debugging-pipe (fds 3 and 4:
    NUL-separated JSON), so no port is opened and no client library is needed."""

    def __init__(self, profile: Path):
        self.proc = subprocess.Popen(
            ["sh", "-c", 'exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null', CHROMIUM]
            + ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
            + ["--remote-debugging-pipe", "--no-first-run", f"--user-data-dir={profile}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.buffer, self.last = b"", 0
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]

    def call(self, method: str, **params) -> dict:
        self.last += 1
        message = {"id": self.last, "method": method, "params": params}
        if method.split(".")[0] not in ("Target", "Browser"):
            message["sessionId"] = self.session
        self.proc.stdin.write(json.dumps(message).encode() + b"\0")
        self.proc.stdin.flush()
        reply = self.wait(lambda m: m.get("id") == self.last)
        assert "error" not in reply, reply["error"]
        return reply["result"]

    def wait(self, wanted) -> dict:
        while True:
            while b"\0" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\0", 1)
                message = json.loads(raw)
                if wanted(message):
                    return message
            chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
            assert chunk, "Chromium exited"
            self.buffer += chunk

    def open(self, path: Path) -> None:
        self.call("Page.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=WIDTH,
            height=900,
            deviceScaleFactor=1,
            mobile=False,
        )
        self.call("Page.navigate", url=path.resolve().as_uri())
        self.wait(lambda m: m.get("method") == "Page.loadEventFired")

    def evaluate(self, expression: str):
        result = self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"]["value"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def page(port):
    with tempfile.TemporaryDirectory(prefix="mlxport-chromium-") as profile:
        browser = Chromium(Path(profile))
        try:
            browser.open(port / "report.html")
            yield browser
        finally:
            browser.close()


def test_the_page_carries_what_report_md_does(page, port):
    run = json.loads((port / "run.json").read_text())
    text = page.evaluate("document.body.innerText")
    headings = page.evaluate("[...document.querySelectorAll('h2')].map(h => h.textContent)")
    for h in ("Correctness", "Inputs", "Speed", "Kernel", "Plan, as it ended", "Candidates"):
        assert h in headings
    assert f"ported: kernel {SUITE_TASK.kernel} of " in text and "kernel.cu" in text
    # each correctness row: case, kind, dtype, verdict, then the errors as numbers
    rows = page.evaluate(
        "[...document.querySelectorAll('table')].filter(t => t.tHead.innerText.includes("
        "'max abs err')).flatMap(t => [...t.tBodies[0].rows].map(r => [...r.cells].map("
        "c => c.textContent)))"
    )
    assert len(rows) >= 10 and {r[2] for r in rows} >= {"float32", "float16"}
    assert all(r[3] == "pass" and re.fullmatch(r"[\d.e+-]+", r[4]) for r in rows)
    assert "ESTIMATE, not a measurement" in text
    code = page.evaluate("document.querySelector('pre code').textContent")
    assert "out[i] = a[i] + b[i];" in code
    plan = page.evaluate("document.querySelector('h2 + ul').textContent")
    assert "one thread per element" in plan and "working on" not in plan
    # the candidates table, in run.json's iterations
    table = page.evaluate(
        "[...document.querySelectorAll('table')].find(t => t.tHead.innerText.includes("
        "'best from iteration')).innerText"
    )
    history = run["best_history"][-1]
    assert re.search(rf"{PORT.id}\t\d+\tyes\tpass\t-\t{history['iteration']}\tverified", table)
    assert re.search(rf"{WRONG.id}\t\d+\tyes\t[^\t]*FAIL", table), table
    # what report.md says, the page says
    md = (port / "report.md").read_text()
    for line in ("Seed ", "kernel.py imported and called as a user calls it", PORT.id):
        assert line in md and line in text


def test_charts_fit_their_frames_show_every_series_and_mark_every_case(page, task):
    charts = page.evaluate(CHARTS_JS)
    assert {c["title"] for c in charts} == {
        "Candidates by iteration (no timing on this backend)",
        "Roofline on M3 Max (no measurements: the backend does not time)",
    }
    for c in charts:
        assert not c["outside"], f"{c['title']}: text outside the frame: {c['outside']}"
    lines = next(c for c in charts if c["title"].startswith("Candidates"))
    assert set(lines["pixels"]) == {"compiled", "of them correct"}
    for name, shown in lines["pixels"].items():
        assert shown >= 0.9, f"{name} shows along {shown:.0%} of its line"
    roof = next(c for c in charts if c["title"].startswith("Roofline"))
    labels = [task.case_label(case) for case in task.bench_cases()]
    assert all(any(label in t for t in roof["markers"]) for label in labels), roof["markers"]
    assert all(any(label in t for t in roof["texts"]) for label in labels)


def test_the_page_renders_to_a_screenshot_of_its_full_size(page):
    size = page.call("Page.getLayoutMetrics")["cssContentSize"]
    shot = page.call(
        "Page.captureScreenshot",
        format="png",
        captureBeyondViewport=True,
        clip={"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
    )
    png = base64.b64decode(shot["data"])
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert width == WIDTH and height == round(size["height"]) and height > 2000
    assert len(png) > 50_000  # tables, code and charts, not a blank page


# Per chart: its title, texts that stick out of its frame, the title of every case marker (a ring
# on the roofline), every text, and per legend entry the share of points along its line (every 8
# px) where its colour shows (within antialiasing) at least about 1.5 px wide: 10 of the 49 pixels
# around the point, on the chart as Chromium draws it.
CHARTS_JS = """
(async () => {
  const out = [];
  for (const svg of document.querySelectorAll('figure svg')) {
    const frame = svg.getBoundingClientRect();
    const texts = [...svg.querySelectorAll('text')];
    const outside = texts.filter(t => {
      const b = t.getBoundingClientRect();
      return b.left < frame.left - 0.5 || b.right > frame.right + 0.5
        || b.top < frame.top - 0.5 || b.bottom > frame.bottom + 0.5;
    }).map(t => t.textContent);
    const markers = [...svg.querySelectorAll('circle[fill="#fff"] > title')]
      .map(t => t.textContent);
    const pixels = {};
    const legend = [...svg.querySelectorAll('rect[width="12"]')];
    if (legend.length) {
      const img = new Image();
      img.src = 'data:image/svg+xml;charset=utf-8,'
        + encodeURIComponent(new XMLSerializer().serializeToString(svg));
      await img.decode();
      const canvas = document.createElement('canvas');
      canvas.width = img.width; canvas.height = img.height;
      const ctx = canvas.getContext('2d');
      ctx.drawImage(img, 0, 0);
      const data = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
      for (const swatch of legend) {
        const color = swatch.getAttribute('fill');
        const [r, g, b] = [1, 3, 5].map(i => parseInt(color.slice(i, i + 2), 16));
        const line = svg.querySelector(`polyline[stroke="${color}"]`);
        const total = line.getTotalLength();
        let shown = 0, seen = 0;
        for (let d = 0; d <= total; d += 8, seen++) {
          const p = line.getPointAtLength(d);
          let n = 0;
          for (let y = Math.round(p.y) - 3; y <= Math.round(p.y) + 3; y++)
            for (let x = Math.round(p.x) - 3; x <= Math.round(p.x) + 3; x++) {
              const i = 4 * (y * canvas.width + x);
              const off = Math.abs(data[i] - r) + Math.abs(data[i + 1] - g)
                + Math.abs(data[i + 2] - b);
              if (off <= 40) n++;
            }
          if (n >= 10) shown++;
        }
        pixels[swatch.nextElementSibling.textContent] = shown / seen;
      }
    }
    out.push({title: svg.querySelector('title').textContent, outside, markers,
              texts: texts.map(t => t.textContent), pixels});
  }
  return out;
})()
"""

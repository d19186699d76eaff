"""The HTML report in a real browser (headless Chromium): every image loads, and nothing is
wider than a 1280-px window, however wide its tables (they scroll inside their own box).

Needs Debian's `chromium` (scripts/test.sh installs it when run as root on Debian); skipped,
saying so, where no Chromium binary is found.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from analysis.render.report import build_report
from tests.analysis.conftest import synthetic_row, write_rows, write_timeline

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
WIDTH = 1280

# Appended to a copy of the report: measures the page once everything has loaded and writes
# the figures into the DOM, which --dump-dom prints.
PROBE = """<script>
window.addEventListener("load", () => {
  const images = [...document.images];
  const boxes = [...document.querySelectorAll(".scroll")];
  const result = {
    images: images.length,
    broken: images.filter((i) => !(i.complete && i.naturalWidth > 0)).map((i) => i.alt),
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
    tables: document.querySelectorAll("table").length,
    unboxed: [...document.querySelectorAll("table")].filter((t) => !t.parentElement.classList.contains("scroll")).length,
    widestTable: Math.max(0, ...boxes.map((b) => b.scrollWidth)),
    imagesWider: images.filter((i) => i.getBoundingClientRect().right > window.innerWidth).length,
  };
  const out = document.createElement("pre");
  out.id = "result";
  out.textContent = JSON.stringify(result);
  document.body.appendChild(out);
});
</script>"""


def browser() -> str:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip(f"no Chromium binary ({', '.join(BROWSERS)}); on Debian: apt-get install -y chromium")


def chromium(page: Path, tmp_path: Path, *args: str) -> str:
    command = [
        browser(),
        "--headless=new",
        "--no-sandbox",  # root in a container: Chromium's sandbox refuses to start
        "--disable-gpu",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--window-size={WIDTH},900",
        "--virtual-time-budget=10000",
        *args,
        page.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def ladder_sweep(folder: Path) -> Path:
    """A point that measured the whole ladder, with a timeline: the ladder's table and plot."""
    rungs = (("device_batch", 0.5), ("host_batch", 0.55), ("raw_sample", 0.8), ("full", 1.1))
    write_rows(folder, *(synthetic_row(point_id="lad", rung=r, training_time=t) for r, t in rungs))
    write_timeline(folder / "points" / "lad")
    return folder


def measure(page_html: str, tmp_path: Path) -> dict[str, object]:
    probed = tmp_path / "probed.html"
    probed.write_text(page_html.replace("</body>", PROBE + "</body>"))
    dom = chromium(probed, tmp_path, "--dump-dom")
    found = re.search(r'<pre id="result">(.*?)</pre>', dom, re.S)
    assert found, f"the probe wrote nothing: {dom[-500:]}"
    return dict(json.loads(found.group(1)))


def test_the_report_loads_its_images_and_fits_a_1280_px_window(real_sweep: Path, tmp_path: Path) -> None:
    page = build_report([real_sweep, ladder_sweep(tmp_path / "ladder")], "html", wide=True).text
    result = measure(page, tmp_path)
    assert result["images"] >= 4 and result["broken"] == []  # throughput ×2, ladder, timeline
    assert result["unboxed"] == 0 and result["tables"] >= 4  # loader tables, recommendation, ladder
    # The wide loader table (--wide) is wider than the window (it would have pushed the page
    # sideways): it scrolls in its own box, and the page itself stays within the window.
    assert result["widestTable"] > WIDTH
    assert result["scrollWidth"] <= result["innerWidth"] == WIDTH
    assert result["imagesWider"] == 0


def test_a_screenshot_of_the_report_is_drawn(real_sweep: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(build_report([real_sweep], "html").text)
    chromium(page, tmp_path, f"--screenshot={tmp_path / 'shot.png'}")
    assert (tmp_path / "shot.png").read_bytes().startswith(b"\x89PNG")

"""report.html of attncert.audit: a self-contained page (no script, nothing fetched) whose figures are drawn.

The page is rendered in headless Chromium (Debian's chromium), the screenshot decoded here (PNG: zlib and the
five scanline filters) and its pixels counted: every outcome class the report holds fills its cells of the
outcome figure in its colour, the certified singular-value bands and the declared thresholds are drawn in
theirs.  The same page with its figures removed has none of those pixels, so the counts measure the figures."""
import html.parser
import json
import os
import re
import shutil
import struct
import subprocess
import zlib

import numpy as np
import pytest

import attncert
from attncert.capture import Capture, CapturedCall

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/bootstrap.sh installs it)")
CLI = os.environ.get("ATTNCERT_CLI")
BAND, THRESHOLD = (0x6a, 0x1b, 0x9a), (0xd8, 0x1b, 0x60)


def two_token(name, scale, weights):
    """q = k = (1, -1): scores scale*[[1, -1], [-1, 1]]; V = I (one head, float32)."""
    q = np.array([[[[1.0], [-1.0]]]], np.float32)
    v = np.eye(2, dtype=np.float32)[None, None]
    w = None if weights is None else np.array(weights, np.float32).reshape(1, 1, 2, 2)
    return CapturedCall(name=name, kind="scaled_dot_product_attention", dtype="float32", scale=scale, mask_kind="none",
                        q=q, k=q.copy(), v=v, output=np.zeros((1, 1, 2, 2), np.float32), weights=w)


def five_outcomes():
    """Five calls, one per outcome class (tests/audit/audit.cpp builds the same heads in C++)."""
    t, u = np.tanh(1e-9), np.tanh(1.0)
    calls = [two_token("kept-within", "1", [(1 + u) / 2, (1 - u) / 2, (1 - u) / 2, (1 + u) / 2]),
             two_token("kept-exceeds", "1", [0.5, 0.5, 0.5, 0.5]),
             two_token("reduced-adequate", "1e-09", [(1 + t) / 2, (1 - t) / 2, (1 - t) / 2, (1 + t) / 2]),
             two_token("reduced-inadequate", "1e-09", [1, 0, 0, 1]),
             two_token("undecided", "1", None)]
    cap = Capture()
    cap.calls = calls
    return cap


@pytest.fixture(scope="module")
def report():
    r = attncert.audit(five_outcomes(), spec={"allowable_output_error": 1e-3, "formats": "binary32,binary64"})
    assert sorted(r.to_dict()["summary"]["outcomes"]) == sorted([
        "rank-kept/within-tolerance", "rank-kept/exceeds-tolerance", "rank-reduced/adequate", "rank-reduced/inadequate",
        "undecided"])
    return r


class _Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.ids, self.classes, self.urls, self.legend = [], set(), [], [], {}
        self._span = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if "id" in a:
            self.ids.add(a["id"])
        if "class" in a:
            self.classes.append(a["class"])
        for key in ("src", "href"):
            if key in a:
                self.urls.append(a[key])
        m = re.match(r"background:(#[0-9a-f]{6})$", a.get("style", ""))
        self._span = m.group(1) if tag == "span" and m else None

    def handle_data(self, data):
        if self._span:
            self.legend[data] = self._span
            self._span = None


def parse(page):
    p = _Page()
    p.feed(page)
    return p


def test_page_is_self_contained_and_has_every_figure(report):
    page = report.html()
    p = parse(page)
    assert "script" not in p.tags and not p.urls and "http" not in page.replace("http://www.w3.org/2000/svg", "")
    assert {"fig-outcomes", "fig-ranks-binary32", "fig-ranks-binary64"} <= p.ids
    assert p.classes.count("spectrum") == 5  # one per head with an attention object
    assert p.classes.count("drift") == 5     # one per layer (call)
    d = report.to_dict()
    assert d["spec_sha256"] in page and page.index(d["spec_sha256"]) < page.index("fig-outcomes")  # criteria first
    for layer in d["layers"]:
        for h in layer["heads"]:
            assert h["why"].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in page


def png_pixels(path):
    """(height, width, 3) uint8 array of an 8-bit RGB or RGBA PNG, non-interlaced (what Chromium writes)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    out = bytearray(h * stride)
    prev = bytearray(stride)
    for y in range(h):
        ftype = raw[y * (stride + 1)]
        line = raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)]
        if ftype == 0:
            cur = bytearray(line)
        elif ftype == 2:
            cur = bytearray(((np.frombuffer(line, np.uint8).astype(np.uint16) + np.frombuffer(bytes(prev), np.uint8)) & 255)
                            .astype(np.uint8).tobytes())
        else:  # 1 (sub), 3 (average), 4 (Paeth) depend on the byte bpp to the left: byte by byte
            cur = bytearray(stride)
            for i in range(stride):
                a = cur[i - bpp] if i >= bpp else 0
                b = prev[i]
                if ftype == 1:
                    pred = a
                elif ftype == 3:
                    pred = (a + b) >> 1
                else:
                    c = prev[i - bpp] if i >= bpp else 0
                    pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[i] = (line[i] + pred) & 255
        out[y * stride:(y + 1) * stride] = cur
        prev = cur
    return np.frombuffer(bytes(out), np.uint8).reshape(h, w, bpp)[:, :, :3]


def screenshot(page_path, png_path):
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1200,2200",
                    "--screenshot=" + str(png_path), "file://" + str(page_path)], check=True, capture_output=True, timeout=120)
    return png_pixels(png_path)


def count(pixels, rgb):
    return int(np.all(pixels == np.array(rgb, np.uint8), axis=2).sum())


@needs_chromium
def test_chromium_draws_the_figures(report, tmp_path):
    page = report.html()
    (tmp_path / "report.html").write_text(page, encoding="utf-8")
    pixels = screenshot(tmp_path / "report.html", tmp_path / "shot.png")
    # without its figures (every <svg>...</svg> removed) the page has none of the figures' pixels
    bare = re.sub(r"<svg.*?</svg>", "", page, flags=re.S)
    (tmp_path / "bare.html").write_text(bare, encoding="utf-8")
    bare_pixels = screenshot(tmp_path / "bare.html", tmp_path / "bare.png")
    legend = parse(page).legend
    outcomes = {k: v for k, v in legend.items() if k in report.to_dict()["summary"]["outcomes"]}
    assert len(outcomes) == 5 and {"agrees", "DIVERGES"} <= set(legend)
    cell = 90 * 28  # a cell of the grids is 90 x 28 pixels
    # each outcome class fills one cell of the outcome figure; the rank figures have 2 formats x 5 heads, of
    # which the binary32 ranks of the two 1e-9 heads diverge (rank 1 against exact 2) and 8 agree
    for name, cells in [(k, 1) for k in outcomes] + [("agrees", 8), ("DIVERGES", 2)]:
        rgb = tuple(int(legend[name][i:i + 2], 16) for i in (1, 3, 5))
        drawn, legend_only = count(pixels, rgb), count(bare_pixels, rgb)
        assert 0.8 * cells * cell <= drawn - legend_only <= 1.2 * cells * cell, (name, drawn, legend_only)
    for rgb in (BAND, THRESHOLD):
        assert count(pixels, rgb) > 100 and count(bare_pixels, rgb) == 0


@pytest.mark.skipif(not CLI, reason="ATTNCERT_CLI (the attncert binary) not set")
def test_cli_html_is_the_python_page(report, tmp_path):
    five_outcomes().save(str(tmp_path / "cap"))
    spec = tmp_path / "spec.json"
    spec.write_text(report.to_dict()["spec_text"], encoding="utf-8")
    out = tmp_path / "a.html"
    subprocess.run([CLI, "audit", str(tmp_path / "cap"), "--spec", str(spec), "--format", "html", "--out", str(out)],
                   check=True, capture_output=True, timeout=120)
    cli_page = out.read_text(encoding="utf-8")
    assert cli_page.replace("attncert audit " + str(tmp_path / "cap"), "X") != ""
    # the same page but the command line shown at its top
    strip = lambda t: re.sub(r"<p><code>.*?</code>", "", t, count=1)  # noqa: E731
    assert strip(cli_page) == strip(report.html())
    j = json.loads(subprocess.run([CLI, "audit", str(tmp_path / "cap"), "--spec", str(spec)], check=True, capture_output=True,
                                  text=True, timeout=120).stdout)
    assert j["spec_sha256"] == report.spec_sha256

"""test_report_html.py: the HTML flame graph and diff flame graph in Debian's headless
Chromium over the DevTools protocol: no console error, no request, names drawn, search,
click to zoom and back, hostile names, 100k stacks; screenshots land in BUILD/e2e-shots."""
import json
import os
import re

import pytest

from cdp import Browser
from conftest import BUILD, run_prowl
from pprofgen import Profile, many_stacks
from reportlib import caps, pprof_top  # noqa: F401 (caps is a fixture)

SHOTS = os.path.join(BUILD, "e2e-shots")


@pytest.fixture(scope="module")
def browser():
    b = Browser()
    yield b
    b.close()


def open_page(browser, path):
    page = browser.new_page()
    url = "file://" + os.path.abspath(str(path))
    page.goto(url)
    page.wait_for("window.prowlFirstPaint")
    return page, url


def assert_clean(page, url):
    errors, requests = page.problems()
    assert not errors, errors
    assert requests == [url], requests


def shot(page, name):
    os.makedirs(SHOTS, exist_ok=True)
    page.screenshot(os.path.join(SHOTS, name))


def click_frame(page, name):
    r = page.eval(f"prowlFlame.find({json.dumps(name)})")
    assert r, f"{name} is not drawn"
    page.click(r["x"] + r["w"] / 2, r["y"] + r["h"] / 2)
    return r


def test_flame_graph(browser, caps):
    page, url = open_page(browser, caps.base_html)  # written by `prowl record -o base.html`
    labels = page.eval("prowlFlame.labels()")
    for name in ("all", "main", "worker", "hot_a", "hot_b", "hot_c", "mix"):
        assert name in labels, labels
    meta = page.eval("document.getElementById('meta').innerText")
    assert re.search(r"^\d+ samples, one every 1\.0 ms \(1000 Hz\)$", meta, re.M), meta
    assert re.search(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+ to .* \([\d.]+ s\)$", meta, re.M), meta
    title = page.eval("document.title")
    assert title.startswith("prowl record: ") and "cpusplit" in title

    # Search: the share shown is pprof's total share of hot_c.
    rows, total = pprof_top(caps.base)
    page.type_into("#search", "hot_c")
    text = page.wait_for("(t => t.startsWith('matched') && t)(document.getElementById('matches').textContent)")
    m = re.match(r"matched: ([\d.]+)% of samples \((\d+)\)", text)
    assert m, text
    assert abs(float(m.group(1)) - rows["hot_c"][1]) <= 0.01 and int(m.group(2)) == round(rows["hot_c"][1] * total / 100)
    shot(page, "flame-search.png")
    page.eval("(e => { e.value = ''; e.dispatchEvent(new Event('input')); })(document.getElementById('search'))")
    page.wait_for("document.getElementById('matches').textContent === ''")

    # Click hot_a: it fills the width; the details line names it with file:line.
    width = page.eval("document.getElementById('canvas').getBoundingClientRect().width")
    before = click_frame(page, "hot_a")
    assert before["w"] < 0.8 * width
    page.wait_for("prowlFlame.zoomed() === 'hot_a'")
    after = page.eval("prowlFlame.find('hot_a')")
    assert after["w"] >= width - 2, (after, width)
    details = page.eval("document.getElementById('details').textContent")
    assert re.match(r"hot_a \u2014 \S*cpusplit\.c:\d+ \u2014 self \d+ \([\d.]+%\), total \d+ \([\d.]+%\)", details), details
    assert "hot_b" not in page.eval("prowlFlame.labels()")
    shot(page, "flame-zoomed.png")
    page.eval("document.getElementById('back').click()")
    page.wait_for("prowlFlame.zoomed() === 'all'")
    assert "hot_b" in page.eval("prowlFlame.labels()")

    # Flame (root at the bottom) and icicle (root on top).
    assert page.eval("prowlFlame.find('all').y > prowlFlame.find('hot_a').y")
    page.eval("document.getElementById('orient').click()")
    assert page.eval("prowlFlame.find('all').y < prowlFlame.find('hot_a').y")
    page.eval("document.getElementById('orient').click()")
    shot(page, "flame.png")
    assert_clean(page, url)


def rgb(s):
    return tuple(int(x) for x in re.findall(r"\d+", s)[:3])


def test_diff_flame_graph(browser, caps, tmp_path):
    out = tmp_path / "diff.html"
    res = run_prowl(["diff", str(caps.base), str(caps.new), "-o", str(out)])
    assert res.returncode == 0, res.stderr
    page, url = open_page(browser, out)
    for name in ("hot_a", "hot_b", "hot_c", "main"):
        assert name in page.eval("prowlFlame.labels()")
    # The colour of each function's widest frame.
    red, blue = rgb(page.eval("prowlFlame.color('hot_c')")), rgb(page.eval("prowlFlame.color('hot_a')"))
    assert red[0] > red[2] + 80, red    # grew: red
    assert blue[2] > blue[0] + 80, blue  # shrank: blue
    assert page.eval("!document.getElementById('legend').hidden")
    assert re.match(r"[\u2212-][\d.]+ pp", page.eval("document.getElementById('lmin').textContent"))
    page.type_into("#search", "^hot_c$")
    text = page.wait_for("(t => t.startsWith('matched') && t)(document.getElementById('matches').textContent)")
    base, _ = pprof_top(caps.base)
    new, _ = pprof_top(caps.new)
    m = re.match(r"matched: base ([\d.]+)% \u2192 new ([\d.]+)%", text)
    assert m and abs(float(m.group(1)) - base["hot_c"][1]) <= 0.01 and abs(float(m.group(2)) - new["hot_c"][1]) <= 0.01, text
    click_frame(page, "hot_c")
    page.wait_for("prowlFlame.zoomed() === 'hot_c'")
    details = page.eval("document.getElementById('details').textContent")
    assert "hot_c" in details and "\u2192" in details and "pp)" in details, details
    page.eval("document.getElementById('reset').click()")
    page.wait_for("prowlFlame.zoomed() === 'all'")
    page.eval("(e => { e.value = ''; e.dispatchEvent(new Event('input')); })(document.getElementById('search'))")
    page.wait_for("document.getElementById('matches').textContent === ''")
    shot(page, "diff.png")
    assert_clean(page, url)


def test_hostile_names_stay_text(browser, tmp_path):
    names = ["</script><script>window.pwned=1</script>", "<img src=x onerror=\"window.pwned=2\">",
             "a\u2028b\"'\\", "bad\udcffutf8"]
    p = Profile()
    for i, n in enumerate(names):
        p.add(["main", n], 100 + i)
    (tmp_path / "h.pb.gz").write_bytes(p.encode())
    res = run_prowl(["report", str(tmp_path / "h.pb.gz"), "-o", str(tmp_path / "h.html")])
    assert res.returncode == 0, res.stderr
    page, url = open_page(browser, tmp_path / "h.html")
    assert page.eval("typeof window.pwned") == "undefined"
    for n in names[:2]:
        assert page.eval(f"prowlFlame.find({json.dumps(n)}) !== null"), n
    # A line separator in a name is '?' from the moment prowl reads it (utf8_text).
    assert page.eval(f"prowlFlame.find({json.dumps(names[2].replace(chr(0x2028), '?'))}) !== null")
    assert page.eval("prowlFlame.find('bad\\ufffdutf8') !== null")
    assert_clean(page, url)


def test_100k_stacks(browser, tmp_path):
    (tmp_path / "big.pb.gz").write_bytes(many_stacks(100_000).encode())
    res = run_prowl(["report", str(tmp_path / "big.pb.gz"), "-o", str(tmp_path / "big.html")], timeout=300)
    assert res.returncode == 0, res.stderr
    size = os.path.getsize(tmp_path / "big.html")
    assert size < 10 * 1024 * 1024, size
    page, url = open_page(browser, tmp_path / "big.html")
    assert len(page.eval("prowlFlame.labels()")) > 20
    click_frame(page, "mod1::fn_1_x")
    page.wait_for("prowlFlame.zoomed() === 'mod1::fn_1_x'")
    shot(page, "flame-100k.png")
    assert_clean(page, url)

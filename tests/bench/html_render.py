"""html_render.py: the flame graph page's size and first render in Debian's headless
Chromium: 100k distinct stacks (flame and diff) and the given pages. Prints Markdown.
Usage: html_render.py TMPDIR PROWL [PAGE.html...]"""
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
from cdp import Browser  # noqa: E402
from pprofgen import many_stacks  # noqa: E402

ROUNDS = 3


def first_render(browser, path):
    """Milliseconds from navigation start to the first frame after the first draw."""
    times = []
    for _ in range(ROUNDS):
        page = browser.new_page()
        page.goto("file://" + os.path.abspath(path), timeout=60)
        times.append(page.wait_for("window.prowlFirstPaint", timeout=60))
        errors, _ = page.problems()
        assert not errors, errors
        page.send("Page.close")
    return statistics.median(times)


def main():
    tmp, prowl = sys.argv[1], os.path.abspath(sys.argv[2])
    pages = []
    sides = (("big", {}),                                                  # 100k stacks
             ("big_new", {"count_seed": 7, "boost": ("mod3::fn_3_xxx", 3)}),  # the same, other counts
             ("big_other", {"seed": 2}))                                     # 100k other stacks
    for name, kw in sides:
        with open(os.path.join(tmp, name + ".pb.gz"), "wb") as f:
            f.write(many_stacks(100_000, **kw).encode())
    cmds = [("100k distinct stacks, flame graph", "big.html", ["report", "-q", "big.pb.gz", "-o", "big.html"]),
            ("diff: the same 100k stacks, other counts", "bigdiff.html",
             ["diff", "big.pb.gz", "big_new.pb.gz", "-o", "bigdiff.html"]),
            ("diff: 100k stacks vs 100k other stacks", "bigdiff2.html",
             ["diff", "big.pb.gz", "big_other.pb.gz", "-o", "bigdiff2.html"])]
    for what, page, args in cmds:
        t0 = time.monotonic()
        subprocess.run([prowl] + args, cwd=tmp, check=True, stdout=subprocess.DEVNULL)
        pages.append((what, os.path.join(tmp, page), time.monotonic() - t0))
    for extra in sys.argv[3:]:
        pages.append((f"the corpus, {os.path.basename(extra)}", extra, None))
    b = Browser()
    try:
        print(f"| page | size MiB | prowl writes it in s | first render ms (median of {ROUNDS}) |")
        print("|---|---|---|---|")
        for what, path, secs in pages:
            ms = first_render(b, path)
            print(f"| {what} | {os.path.getsize(path) / 2**20:.1f} | {'' if secs is None else f'{secs:.1f}'} | {ms:.0f} |")
    finally:
        b.close()


main()

"""pywork.py: Python workloads with a known behaviour for prowl's CPython tests (issue 12).
Usage: pywork.py MODE SECONDS [ARG]
  split    alpha, beta, gamma take 10, 30 and 60 % of the time (deadlines, not counts)
  zlib     compress_it calls zlib.compress on 390 KB of text, alternating with spin_py
  threads  thread "one" runs t_one, thread "two" runs t_two, both spinning
  recurse  rec() recursing to depth ARG, spinning at the bottom
  exec     before_exec for half the time, then exec's itself as "split" for the rest
  count    calls of a 3-deep chain of Python functions in SECONDS, printed (throughput)"""
import os
import sys
import threading
import time
import zlib


def spin_until(end):
    x = 0
    while time.monotonic() < end:
        x += 1
    return x


def alpha(end):
    x = 0
    while time.monotonic() < end:
        x += 1
    return x


def beta(end):
    x = 0
    while time.monotonic() < end:
        x += 1
    return x


def gamma(end):
    x = 0
    while time.monotonic() < end:
        x += 1
    return x


def split(secs):
    stop = time.monotonic() + secs
    while time.monotonic() < stop:
        t = time.monotonic()
        alpha(t + 0.003)
        beta(t + 0.012)
        gamma(t + 0.030)


def compress_it(data):
    return len(zlib.compress(data, 9))


def spin_py(end):
    return spin_until(end)


def zlib_mode(secs):
    # Text-like data (words from a fixed seed): level 9 spends ~10 ms on each call.
    import random
    r = random.Random(1)
    words = [bytes(r.choice(b"abcdefghijklmnop") for _ in range(r.randint(2, 9))) for _ in range(2000)]
    data = b" ".join(r.choice(words) for _ in range(60000))
    stop = time.monotonic() + secs
    while time.monotonic() < stop:
        compress_it(data)
        spin_py(time.monotonic() + 0.01)


def t_one(end):
    x = 0
    while time.monotonic() < end:
        x += 1
    return x


def t_two(end):
    x = 0
    while time.monotonic() < end:
        x += 1
    return x


def threads_mode(secs):
    end = time.monotonic() + secs
    ts = [threading.Thread(target=t_one, args=(end,), name="one"),
          threading.Thread(target=t_two, args=(end,), name="two")]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def rec(n, end):
    if n > 1:
        return rec(n - 1, end)
    return spin_until(end)


def recurse_mode(secs, depth):
    sys.setrecursionlimit(depth + 100)
    # rec() is called from here, so the stack is: rec x depth, recurse_mode, main, <module>.
    rec(depth, time.monotonic() + secs)


def leaf_op(i):
    return i * 3 + 1


def mid_op(i):
    return leaf_op(i) + leaf_op(i + 1)


def count_mode(secs):
    end = time.monotonic() + secs
    n = 0
    while time.monotonic() < end:
        for i in range(1000):
            mid_op(i)
        n += 1000
    print(n)


def before_exec(end):
    return spin_until(end)


def main():
    mode, secs = sys.argv[1], float(sys.argv[2])
    if mode == "split":
        split(secs)
    elif mode == "zlib":
        zlib_mode(secs)
    elif mode == "threads":
        threads_mode(secs)
    elif mode == "recurse":
        recurse_mode(secs, int(sys.argv[3]))
    elif mode == "count":
        count_mode(secs)
    elif mode == "exec":
        before_exec(time.monotonic() + secs / 2)
        os.execv(sys.executable, [sys.executable, __file__, "split", str(secs / 2)])
    else:
        sys.exit(f"unknown mode {mode}")


main()

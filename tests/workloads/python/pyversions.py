"""pyversions.py: the workload every CPython version is checked with (3.6 and newer: no
syntax of later versions), issue 27. Usage: pyversions.py MODE SECONDS
  split   hot60, hot20 and zlib20 take 60, 20 and 20 % of each cycle (deadlines); a cycle
          lasts 20 to 40 ms, drawn anew each time, so that no sampling rate keeps step
          with it; zlib20 spends its time in zlib.compress
  stacks  thread "one" runs t_one -> rec() at depth 100 -> spin_one, thread "two" runs
          t_two -> rec() at depth 300 -> spin_two
  rec30   main -> rec() at depth 27 -> spin_one: 30 Python frames with <module> (the
          BPF cost benchmark, tests/bench/python.sh)"""
import random
import sys
import threading
import time
import zlib


def hot60(end):
    x = 0
    while time.monotonic() < end:
        x += 1
    return x


def hot20(end):
    x = 0
    while time.monotonic() < end:
        x += 1
    return x


def zlib20(end, data):
    n = 0
    while time.monotonic() < end:
        n += len(zlib.compress(data, 6))
    return n


def split(secs):
    # Text-like data from a fixed seed: one compress call takes a fraction of a millisecond,
    # so the deadline cuts it short by little.
    r = random.Random(1)
    words = [bytes(r.choice(b"abcdefghijklmnop") for _ in range(r.randint(2, 9))) for _ in range(500)]
    data = b" ".join(r.choice(words) for _ in range(1500))
    # A fixed cycle aliases with a sampler's period on a quiet host: at 199 Hz six samples
    # take 30.15 ms, so a 3 s capture of 30 ms cycles saw half of the cycle's phases
    # (hot60 51-67 %).
    stop = time.monotonic() + secs
    while time.monotonic() < stop:
        t = time.monotonic()
        cycle = r.uniform(0.020, 0.040)
        hot60(t + 0.6 * cycle)
        hot20(t + 0.8 * cycle)
        zlib20(t + cycle, data)


def spin_one(end):
    x = 0
    while time.monotonic() < end:
        x += 1
    return x


def spin_two(end):
    x = 0
    while time.monotonic() < end:
        x += 1
    return x


def rec(n, end, leaf):
    if n > 1:
        return rec(n - 1, end, leaf)
    return leaf(end)


def t_one(end):
    return rec(100, end, spin_one)


def t_two(end):
    return rec(300, end, spin_two)


def stacks(secs):
    end = time.monotonic() + secs
    ts = [threading.Thread(target=t_one, args=(end,), name="one"),
          threading.Thread(target=t_two, args=(end,), name="two")]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def main():
    mode, secs = sys.argv[1], float(sys.argv[2])
    if mode == "split":
        split(secs)
    elif mode == "stacks":
        stacks(secs)
    elif mode == "rec30":
        rec(27, time.monotonic() + secs, spin_one)
    else:
        sys.exit("unknown mode " + mode)


main()

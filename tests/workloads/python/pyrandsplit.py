"""pyrandsplit.py: alpha, beta and gamma take 10, 30 and 60 % of the time in rounds of
random length, so that no sampler beats with them; runs on CPython 2.7 and 3.3+. It
sleeps 2 ms after each 20 ms, so that under SCHED_FIFO it stays below the kernel's 95 %
RT limit and is never throttled: it is then either running or asleep, never runnable.
Usage: pyrandsplit.py SECONDS   (issue 26: py-spy and prowl on the same process)"""
import random
import sys
import time


def alpha(end):
    x = 0
    while time.time() < end:
        x += 1
    return x


def beta(end):
    x = 0
    while time.time() < end:
        x += 1
    return x


def gamma(end):
    x = 0
    while time.time() < end:
        x += 1
    return x


def split(secs):
    # Each round picks a function with probability 0.1/0.3/0.6 and runs it for 1-5 ms:
    # equal mean lengths, so the time shares are the probabilities.
    r = random.Random()
    stop = time.time() + secs
    nap = time.time() + 0.02
    while time.time() < stop:
        if time.time() >= nap:
            time.sleep(0.002)
            nap = time.time() + 0.02
        u = r.random()
        f = alpha if u < 0.1 else beta if u < 0.4 else gamma
        f(time.time() + r.uniform(0.001, 0.005))


if __name__ == "__main__":
    split(float(sys.argv[1]))

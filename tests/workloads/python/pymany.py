"""pymany.py: 10,000 distinct Python functions (10,000 code objects), each called in turn
for SECONDS, for the resolution-cost benchmark of issue 12. Usage: pymany.py SECONDS [N]"""
import sys
import time

n = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
ns = {}
exec("\n".join(f"def f{i}(k):\n    s = 0\n    for j in range(k):\n        s += j\n    return s\n" for i in range(n)), ns)
fns = [ns[f"f{i}"] for i in range(n)]
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    for f in fns:
        f(200)

"""test_soak.py: the soak (tests/soak/soak.py) for 2 minutes: the real agent under 200
process starts a second, four backend outages and four SIGHUPs, with 2 s windows. No
crash, no lost sample, every window of a busy series delivered exactly once."""
import os
import subprocess
import sys

import pytest

from conftest import BUILD, ROOT


@pytest.mark.slow
@pytest.mark.long
def test_soak_two_minutes():
    res = subprocess.run([sys.executable, os.path.join(ROOT, "tests/soak/soak.py"), "--seconds", "120", "--scale"],
                         capture_output=True, text=True, timeout=400,
                         env=dict(os.environ, PROWL_TEST_BUILD=os.path.relpath(BUILD, ROOT)), cwd=ROOT)
    print(res.stdout)
    assert res.returncode == 0, res.stdout + res.stderr
    table = [l for l in res.stdout.splitlines() if l.startswith("| ")]
    # Every goal row is judged, and the busy series delivered a window every 2 s.
    assert sum(" | ok | " in l for l in table) == 5, table
    delivered = next(l for l in table if l.startswith("| windows of the busy series delivered"))
    n = int(delivered.split("|")[3].split()[0])
    assert 50 <= n <= 70, delivered

"""test_kmatrix_cache.py: the kernel matrix's download cache (tests/kmatrix/kmatrix.py,
downloads_dir()). Guests boot the kernels it holds as root, so a folder that another user
could write into is refused with one line, before anything is downloaded or booted."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KMATRIX = os.path.join(ROOT, "tests/kmatrix/kmatrix.py")


def fetch(cache, tmp_path):
    env = dict(os.environ, PROWL_KMATRIX_CACHE=str(cache))
    return subprocess.run([sys.executable, KMATRIX, "--build", str(tmp_path / "build"), "--fetch-only"],
                          env=env, capture_output=True, text=True, timeout=60)


def one_error_line(r):
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == 1, r.stderr
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_cache_writable_by_others_is_refused(tmp_path):
    cache = tmp_path / "km"
    cache.mkdir()
    os.chmod(cache, 0o777)
    line = one_error_line(fetch(cache, tmp_path))
    assert line == (f"kmatrix: error: cannot use the download cache {cache}: {cache} is writable by others "
                    "(mode 777): fix it, or set PROWL_KMATRIX_CACHE to a folder of your own")
    assert not (cache / "x86" / "kernels").exists()


def test_architecture_folder_writable_by_others_is_refused(tmp_path):
    cache = tmp_path / "km"
    (cache / "x86").mkdir(parents=True)
    os.chmod(cache, 0o755)
    os.chmod(cache / "x86", 0o775)
    line = one_error_line(fetch(cache, tmp_path))
    assert f"{cache}/x86 is writable by others (mode 775)" in line, line
    assert not (cache / "x86" / "kernels").exists()


def test_cache_owned_by_another_user_is_refused(tmp_path):
    cache = tmp_path / "km"
    cache.mkdir()
    os.chmod(cache, 0o755)
    os.chown(cache, 65534, 65534)
    line = one_error_line(fetch(cache, tmp_path))
    assert f"{cache} is owned by uid 65534" in line, line
    assert not (cache / "x86").exists()


def test_unwritable_place_names_the_variable(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder\n")
    line = one_error_line(fetch(blocker / "km", tmp_path))
    assert line.startswith(f"kmatrix: error: cannot create the download cache {blocker}/km: "), line
    assert line.endswith("set PROWL_KMATRIX_CACHE to a folder of your own"), line

#!/bin/bash
# install.sh: installs the pinned py-spy wheel (requirements.txt: version and hashes) into
# DIR with pip --target, never system-wide. Usage: install.sh DIR -- exit 0 and DIR/bin/py-spy;
# or exit 0, DIR.skip holding the reason when PyPI cannot be reached; or exit 1.
set -u
dir=$1
req=$(cd "$(dirname "$0")" && pwd)/requirements.txt
rm -rf "$dir" "$dir.skip"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if python3 -m pip install -q --no-deps --require-hashes --only-binary=:all: --no-warn-script-location \
	--disable-pip-version-check --target "$dir" -r "$req" >"$log" 2>&1 && [ -x "$dir/bin/py-spy" ]; then
	echo "py-spy: installed $("$dir/bin/py-spy" --version) in $dir"
	exit 0
fi
rm -rf "$dir"
if ! python3 -m pip --version >/dev/null 2>&1; then
	echo "py-spy: python3 has no pip: install Debian's python3-pip (packaging/install-deps.sh)" >&2
	exit 1
fi
if grep -qiE 'NewConnectionError|Could not fetch URL|connection|Max retries|Temporary failure' "$log"; then
	echo "PyPI cannot be reached: $(grep -m1 -iE 'error|connection' "$log")" >"$dir.skip"
	echo "py-spy: not installed, tests that need it skip: $(cat "$dir.skip")" >&2
	exit 0
fi
cat "$log" >&2
echo "py-spy: pip install failed (see above)" >&2
exit 1

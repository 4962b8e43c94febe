# golib.sh: sourced by the build.sh of each Go test tool (tests/tools/*/): finds a Go, and
# keeps each tool built once per machine in a cache outside the clone, keyed by its sources.
# Cache: $PROWL_TOOLS_CACHE, else /var/cache/prowl/tools as root, else ~/.cache/prowl/tools.
# It holds NAME-KEY/NAME (KEY: sha256 of the tool's sources), gomod/ (the Go module cache),
# gocache/ (compiled packages) and go/ (a fetched toolchain); it must be the user's own and
# writable by nobody else, since the suite runs what it holds as root.

gotool_root() {
	if [ -n "${PROWL_TOOLS_CACHE:-}" ]; then
		echo "$PROWL_TOOLS_CACHE"
	elif [ "$(id -u)" = 0 ]; then
		echo /var/cache/prowl/tools
	else
		echo "${XDG_CACHE_HOME:-$HOME/.cache}/prowl/tools"
	fi
}

# gotool_safe DIR: DIR and each parent up to / are owned by root or us and writable only
# by their owner (or sticky, like /tmp, above the cache).
gotool_safe() {
	local d=$1 own mode me
	me=$(id -u)
	while :; do
		read -r own mode < <(stat -c '%u %a' "$d") || return 1
		if [ "$own" != 0 ] && [ "$own" != "$me" ]; then
			echo "$d is owned by uid $own" && return 1
		fi
		if (( 8#$mode & 8#022 )) && ! { [ "$d" != "$GOTOOL_ROOT" ] && (( 8#$mode & 8#1000 )); }; then
			echo "$d is writable by others (mode $mode)" && return 1
		fi
		[ "$d" = / ] && return 0
		d=$(dirname "$d")
	done
}

# gotool_begin NAME OUT SRC FILE...: sets GOTOOL_ROOT, GOTOOL_BIN (the cached binary),
# GOTOOL_LOG (a scratch file for go's output) and the Go caches; when GOTOOL_BIN is there already, copies it to OUT and exits 0.
gotool_begin() {
	local name=$1 out=$2 src=$3 key why
	shift 3
	GOTOOL_NAME=$name
	GOTOOL_OUT=$out
	GOTOOL_SRC=$src
	GOTOOL_LOG=$(mktemp)
	trap 'rm -f "$GOTOOL_LOG"' EXIT
	GOTOOL_ROOT=$(gotool_root)
	rm -f "$out.skip"
	mkdir -p "$(dirname "$out")"
	if ! mkdir -p -m 0755 "$GOTOOL_ROOT" || ! why=$(gotool_safe "$GOTOOL_ROOT"); then
		echo "$name: cannot use the tool cache $GOTOOL_ROOT: ${why:-cannot create it}: fix it, or set PROWL_TOOLS_CACHE to a folder of your own" >&2
		exit 1
	fi
	key=$(cd "$src" && cat "$@" "$(dirname "${BASH_SOURCE[0]}")/golib.sh" | sha256sum | cut -c1-16)
	GOTOOL_BIN=$GOTOOL_ROOT/$name-$key/$name
	export GOMODCACHE=$GOTOOL_ROOT/gomod GOCACHE=$GOTOOL_ROOT/gocache
	exec 9>"$GOTOOL_ROOT/.$name.lock"
	flock 9  # another clone building the same tool: wait for it
	if [ -x "$GOTOOL_BIN" ]; then
		gotool_install
		echo "$name: $out from the tool cache ($GOTOOL_BIN)"
		exit 0
	fi
}

# gotool_install: copies the cached binary to OUT.
gotool_install() {
	cp "$GOTOOL_BIN" "$GOTOOL_OUT.tmp" && mv "$GOTOOL_OUT.tmp" "$GOTOOL_OUT"
}

# gotool_skip REASON: no binary, OUT.skip says why (the tests that need it skip with it).
gotool_skip() {
	echo "$1" >"$GOTOOL_OUT.skip"
	echo "$GOTOOL_NAME: not built, tests that need it skip: $1" >&2
	exit 0
}

# gotool_go GOVERSION: sets GO to a Go >= 1.21 ($GO, /usr/local/go, PATH), which fetches
# the toolchain a go.mod asks for itself (GOTOOLCHAIN=auto). Without one (Debian 12 has
# 1.19), fetches Go GOVERSION from the module proxy as the module golang.org/toolchain,
# checked against the checksum database, into the cache's go/ (GOTOOL_FETCH_GO=1 forces it).
gotool_go() {
	local gov=$1 given=${GO:-} g v arch mv dir proxy why sum want
	GO=""
	for g in "$given" /usr/local/go/bin/go "$(command -v go 2>/dev/null)"; do
		[ -n "$g" ] && [ -x "$g" ] || continue
		v=$("$g" env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
		if [ -n "$v" ] && [ "$v" -ge 21 ]; then GO=$g; break; fi
	done
	[ "${GOTOOL_FETCH_GO:-0}" = 1 ] && GO=""
	[ -n "$GO" ] && return 0
	case $(uname -m) in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; *) arch=$(uname -m) ;; esac
	mv=v0.0.1-go$gov.linux-$arch
	dir=$GOTOOL_ROOT/go
	if [ ! -x "$dir/go$gov/bin/go" ]; then
		mkdir -p "$dir"
		proxy=${GOPROXY:-https://proxy.golang.org}
		proxy=${proxy%%,*}
		if ! why=$(curl -sSf --max-time 600 -o "$dir/tc.zip" "$proxy/golang.org/toolchain/@v/$mv.zip" 2>&1) ||
			! sum=$(curl -sSf --max-time 30 "$proxy/sumdb/sum.golang.org/lookup/golang.org/toolchain@$mv" 2>&1); then
			rm -f "$dir/tc.zip"
			gotool_skip "the Go module proxy cannot be reached for Go $gov (${why#curl: }${sum#curl: }), and no Go >= 1.21 is installed"
		fi
		want=$(awk -v m="golang.org/toolchain" -v v="$mv" '$1 == m && $2 == v {print $3}' <<<"$sum")
		if ! python3 "$(dirname "${BASH_SOURCE[0]}")/unzip_checked.py" "$dir/tc.zip" "$want" "$dir/go$gov"; then
			rm -f "$dir/tc.zip"
			exit 1
		fi
		rm -f "$dir/tc.zip"
	fi
	GO=$dir/go$gov/bin/go
}

# gotool_failed LOG PROBE: a build that failed skips when the module proxy cannot be
# reached (PROBE: a module path it should serve), and fails otherwise, showing LOG's tail.
gotool_failed() {
	local log=$1 probe=$2 proxy why
	proxy=$("$GO" env GOPROXY | cut -d, -f1)
	if [ "$proxy" != off ] && [ "$proxy" != direct ] &&
		! why=$(curl -sS -o /dev/null --max-time 15 "$proxy/$probe/@v/list" 2>&1); then
		gotool_skip "the Go module proxy $proxy cannot be reached (${why#curl: }) and the modules of $GOTOOL_NAME are not all in $GOMODCACHE"
	fi
	tail -20 "$log" >&2
	echo "$GOTOOL_NAME: go build failed (see above)" >&2
	exit 1
}

# gotool_done BUILT: moves the fresh binary into the cache, then to OUT.
gotool_done() {
	mkdir -p "$(dirname "$GOTOOL_BIN")" && mv "$1" "$GOTOOL_BIN" && gotool_install
}

# gotool_module MODULE VERSION H1 DEST: the module's source at VERSION from the proxy
# (checked by go against the checksum database, and here against the pinned H1), copied
# writable to DEST, for a program built as its own main module (with its replaces).
gotool_module() {
	local mod=$1 ver=$2 want=$3 dest=$4 json dir sum
	json=$(cd / && GOFLAGS=-mod=mod "$GO" mod download -json "$mod@$ver" 2>&1)
	dir=$(sed -n 's/^\t"Dir": "\(.*\)",$/\1/p' <<<"$json")
	sum=$(sed -n 's/^\t"Sum": "\(.*\)",$/\1/p' <<<"$json")
	if [ -z "$dir" ]; then
		echo "$json" >"$GOTOOL_LOG"
		gotool_failed "$GOTOOL_LOG" "$mod"
	fi
	if [ "$sum" != "$want" ]; then
		echo "$GOTOOL_NAME: $mod@$ver has hash $sum, not the pinned $want: check the pin in $GOTOOL_SRC" >&2
		exit 1
	fi
	rm -rf "$dest" && mkdir -p "$(dirname "$dest")" && cp -r "$dir" "$dest" && chmod -R u+w "$dest"
}

# gotool_build DIR PKG PROBE: builds PKG in the main module at DIR into the cache and OUT
# (GOWORK=off: a release's go.work names folders its module zip leaves out; the linker
# flags in GOTOOL_LDFLAGS, if any), or ends as
# gotool_failed says (PROBE: a module path of the tool). Exits in every case.
gotool_build() {
	local dir=$1 pkg=$2 probe=$3 t0
	t0=$(date +%s)
	if (cd "$dir" && GOWORK=off GOTOOLCHAIN=auto GOFLAGS=-mod=readonly \
		"$GO" build -trimpath ${GOTOOL_LDFLAGS:+-ldflags="$GOTOOL_LDFLAGS"} -o "$GOTOOL_BIN.tmp" "$pkg") >"$GOTOOL_LOG" 2>&1; then
		gotool_done "$GOTOOL_BIN.tmp"
		echo "$GOTOOL_NAME: built $GOTOOL_BIN in $(( $(date +%s) - t0 )) s with $("$GO" env GOVERSION)"
		exit 0
	fi
	rm -f "$GOTOOL_BIN.tmp"
	gotool_failed "$GOTOOL_LOG" "$probe"
}

#!/bin/bash
# run.sh: runs prowl's libFuzzer harnesses (tests/fuzz/fuzz_*.c, built by `make fuzzers`)
# for SECONDS each, two at a time: seeds each corpus with real files from this machine,
# replays the regression inputs, and prints executions and crashes per harness.
# Usage: tests/fuzz/run.sh BUILD_DIR SECONDS [HARNESS...]   (default: every harness)
set -u
cd "$(dirname "$0")/../.."
O=${1:?usage: tests/fuzz/run.sh BUILD_DIR SECONDS [HARNESS...]}
SECS=${2:?usage: tests/fuzz/run.sh BUILD_DIR SECONDS [HARNESS...]}
shift 2
JOBS=${FUZZ_JOBS:-$(nproc)}
W="$O/fuzz"
harnesses=("$@")
if [ ${#harnesses[@]} -eq 0 ]; then
	for f in tests/fuzz/fuzz_*.c; do harnesses+=("$(basename "$f" .c | sed 's/^fuzz_//')"); done
fi
for h in "${harnesses[@]}"; do
	[ -x "$W/fuzz_$h" ] || { echo "fuzz: $W/fuzz_$h is missing: run make O=$O FUZZ=1 fuzzers" >&2; exit 2; }
done

# ---- seeds: real files of this machine, and the shapes the parsers are for
put() { # $1 = harness, $2 = name; stdin = content
	mkdir -p "$W/corpus/$1"
	cat > "$W/corpus/$1/seed-$2"
}
seed_elf_files() { # $1 = harness
	local f n=0 tmp
	# arm64 objects too (packaging/install-deps.sh arm64 installs them): the arm64 rules.
	for f in /usr/bin/true /usr/bin/env /usr/lib/x86_64-linux-gnu/libz.so.1 /usr/lib/x86_64-linux-gnu/libyaml-0.so.2 \
		/usr/lib/aarch64-linux-gnu/libz.so.1 /usr/lib/aarch64-linux-gnu/libyaml-0.so.2; do
		[ -r "$f" ] && put "$1" "$(basename "$f")" < "$f"
	done
	# Small programs with what system files lack: DWARF lines and inlines, compressed
	# debug sections, .debug_frame without .eh_frame, a non-PIE executable.
	tmp=$(mktemp -d)
	cat > "$tmp/p.c" <<'C'
static int leaf(int x) { return x * 3 + 1; }
__attribute__((noinline)) int mid(int x) { return leaf(x) + leaf(x + 1); }
int main(int argc, char **argv) { (void)argv; return mid(argc); }
C
	for v in "-g -O2" "-g -O2 -gz" "-g -O0 -fno-asynchronous-unwind-tables" "-g1 -O2 -no-pie" "-O2 -s"; do
		n=$((n + 1))
		cc $v -o "$tmp/p$n" "$tmp/p.c" 2>/dev/null && put "$1" "prog$n" < "$tmp/p$n"
	done
	# arm64 with return addresses signed (negate_ra_state in its CFI) and without.
	for v in "-g -O2 -mbranch-protection=standard" "-O2 -fomit-frame-pointer"; do
		n=$((n + 1))
		aarch64-linux-gnu-gcc $v -o "$tmp/p$n" "$tmp/p.c" 2>/dev/null && put "$1" "arm64-prog$n" < "$tmp/p$n"
	done
	rm -rf "$tmp"
}
seed() { # $1 = harness
	case "$1" in
	unwind|elf) seed_elf_files "$1" ;;
	procmaps)
		put procmaps self < /proc/self/maps
		cat /proc/1/maps 2>/dev/null | put procmaps init
		printf '%s\n' '55d0c0a00000-55d0c0a21000 r-xp 00002000 fd:01 1234 /tmp/a b/evil (deleted)' \
			'7f0000000000-7f0000001000 r-xp 00000000 00:00 0 [vdso]' \
			'7f0000001000-7f0000002000 rwxp 00000000 00:05 99 /memfd:jit (deleted)' | put procmaps shapes ;;
	gopclntab)
		# The table of a small Go program, built here with the machine's go.
		if command -v go >/dev/null; then
			local tmp
			tmp=$(mktemp -d)
			printf 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("prowl") }\n' > "$tmp/m.go"
			(cd "$tmp" && GO111MODULE=off GOCACHE="$tmp/cache" go build -ldflags="-s -w" -o m m.go) &&
				objcopy -O binary --only-section=.gopclntab "$tmp/m" "$tmp/tab" && put gopclntab go < "$tmp/tab"
			rm -rf "$tmp"
		fi
		printf '\xf0\xff\xff\xff\x00\x00\x01\x08' | put gopclntab header ;;
	perfmap)
		printf '%s\n' '7f0000001000 40 LazyCompile:*hotAlpha /app/a.js:1:18' '0x7f0000001040 0x20 double Hot.beta(long)' \
			'7f0000002000 10 Builtin:ArgumentsAdaptorTrampoline' | put perfmap shapes
		ls /tmp/perf-*.map >/dev/null 2>&1 && head -c 65536 "$(ls /tmp/perf-*.map | head -1)" | put perfmap real
		;;
	jvmmeta)
		# Images captured from this machine's JVMs (tests/tools/jvm/jvm_capture).
		for f in tests/unit/data/jvm*_meta.img.gz; do
			gzip -dc "$f" | put jvmmeta "$(basename "$f" .img.gz)"
		done ;;
	v8)
		# Node 20's constants (tests/unit/data/v8dbg_fixture.c), and forged variants.
		local tmp v
		tmp=$(mktemp -d)
		for v in "" "-DOLD_NAMES" "-DDROP_FP_FUNCTION" "-DTAGGED_SIZE=4"; do
			cc -shared -fPIC -fno-common $v -o "$tmp/f.so" tests/unit/data/v8dbg_fixture.c 2>/dev/null &&
				put v8 "fixture${v//[^A-Z0-9]/_}" < "$tmp/f.so"
		done
		# JavaScript sources, for the class lexer (symbolizer/node/jsclass.c).
		for v in tests/workloads/node/*.js; do put v8 "js-$(basename "$v")" < "$v"; done
		rm -rf "$tmp" ;;
	jvmscope)
		# An nmethod of JDK 17's layout (as tests/unit/test_jvmscope.c builds it): the
		# offsets, pc offset 35 (leaf), then memory: scopes at 0x100, PcDescs at 0x200.
		python3 -c '
import struct, sys
jp = bytearray(192)
struct.pack_into("<I", jp, 104, 1 << 3)                                   # flags: scopes
struct.pack_into("<H", jp, 128, 17)                                         # jdk_major
struct.pack_into("<8H3H", jp, 160, 0x10, 0x14, 0x18, 0x20, 0xffff, 0x24, 0xffff, 0x38, 16, 0, 4)
mem = bytearray(0x420)
struct.pack_into("<ii", mem, 0x10, 0x200, 0x240)
struct.pack_into("<Q", mem, 0x18, 0x7f0000100100)
struct.pack_into("<ii", mem, 0x20, 0x200, 0x400)
struct.pack_into("<Q", mem, 0x38, 0x7f0000100418)
mem[0x101:0x113] = bytes([0, 1, 8, 0, 0, 0, 1, 2, 4, 0, 0, 0, 7, 3, 0, 0, 0, 0])
for i, (pc, dec) in enumerate(((10, 1), (40, 13), (100, 7), (0x7fffffff, 0))):
    struct.pack_into("<ii", mem, 0x200 + 16 * i, pc, dec)
struct.pack_into("<3Q", mem, 0x400, 0x7f00aaaa0000, 0x7f00bbbb0000, 0x7f00cccc0000)
sys.stdout.buffer.write(bytes(jp) + struct.pack("<IB", 35, 1) + bytes(mem))' | put jvmscope jdk17 ;;
	kallsyms)
		head -n 3000 /proc/kallsyms | put kallsyms head
		tail -n 800 /proc/kallsyms | put kallsyms tail ;;
	cgroup)
		put cgroup self < /proc/self/cgroup
		local id=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
		printf '0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod4f2a_9c1e_11ee_8b3d_0242ac120002.slice/cri-containerd-%s.scope\n' $id | put cgroup containerd
		printf '0::/kubepods/besteffort/pod4f2a9c1e-11ee-8b3d-0242-ac1200020000/%s\n' $id | put cgroup cgroupfs
		printf '0::/system.slice/docker-%s.scope\n' $id | put cgroup docker
		printf '12:memory:/docker/%s\n11:cpu,cpuacct:/docker/%s\n0::/\n' $id $id | put cgroup hybrid
		printf '0::/machine.slice/libpod-%s.scope/container\n' $id | put cgroup podman
		printf '0::/kubepods.slice/kubepods-pod1_2.slice/crio-%s.scope\n' $id | put cgroup crio ;;
	config)
		local i=0 f
		put config base < packaging/prowl.yaml
		# its commented-out examples, uncommented (the file as installed sets nothing)
		sed -E 's/^#([[:space:]]*[a-z_]+:([[:space:]]|$))/\1/' packaging/prowl.yaml | put config examples
		for f in docs/*.md; do
			# every ```yaml block of the docs
			awk -v out="$W/corpus/config/seed-doc-$(basename "$f" .md)-" '
				/^```yaml/ { n++; on = 1; next } /^```/ { on = 0; next }
				on { print > (out n) }' "$f"
		done ;;
	kube)
		local pod='{"metadata":{"uid":"4f2a9c1e-11ee-8b3d-0242-ac1200020000","name":"web-1","namespace":"shop","resourceVersion":"17","labels":{"app":"web","team":"a"}},"spec":{"nodeName":"n1","containers":[{"name":"web"}]},"status":{"containerStatuses":[{"name":"web","containerID":"containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}]}}'
		printf '{"kind":"PodList","metadata":{"resourceVersion":"42"},"items":[%s]}' "$pod" | put kube list
		printf '{"type":"ADDED","object":%s}' "$pod" | put kube event
		printf '{"type":"ERROR","object":{"kind":"Status","code":410,"message":"too old resource version"}}' | put kube error ;;
	pprof)
		/usr/bin/python3 - "$W/corpus/pprof" <<'PY'
import gzip, os, sys
sys.path.insert(0, "tests/e2e")
import pprofgen
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
raw = pprofgen.many_stacks(40, funcs=60, depth=(2, 9)).encode(compress=False)
open(os.path.join(d, "seed-raw"), "wb").write(raw)
open(os.path.join(d, "seed-gz"), "wb").write(gzip.compress(raw))
PY
		;;
	http)
		local list='{"kind":"PodList","metadata":{"resourceVersion":"42"},"items":[]}'
		printf 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' ${#list} "$list" | put http list
		printf 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1f\r\n{"type":"ADDED","object":{}}\n\r\n0\r\n\r\n' | put http chunked
		printf 'HTTP/1.1 410 Gone\r\nContent-Length: 2\r\n\r\n{}' | put http gone
		printf 'HTTP/1.1 503 Service Unavailable\r\nRetry-After: 120\r\nContent-Length: 4\r\n\r\nbusy' | put http busy
		printf 'HTTP/1.1 400 Bad Request\r\nContent-Length: 11\r\n\r\nbad \x1b[31m\n' | put http bad ;;
	esac
}

# ---- run
mkdir -p "$W/logs"
# Crashes are counted from this run on: older ones stay in crashes/ to look at.
touch "$W/.start"
for h in "${harnesses[@]}"; do
	[ -d "$W/corpus/$h" ] || seed "$h"
	mkdir -p "$W/corpus/$h" "$W/crashes/$h"
done
run_one() { # $1 = harness
	local h=$1 regress=tests/fuzz/regress/$1 rc=0
	# The regression inputs (every crash found so far) must pass first.
	if [ -d "$regress" ] && [ -n "$(ls -A "$regress")" ]; then
		"$W/fuzz_$h" -close_fd_mask=3 "$regress"/* > "$W/logs/$h.regress" 2>&1 || rc=1
	fi
	# A Go table is bigger than most inputs (a small program's: 350 KiB).
	local max_len=262144
	[ "$h" = gopclntab ] && max_len=1048576
	"$W/fuzz_$h" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -max_len=$max_len -close_fd_mask=3 \
		-print_final_stats=1 -artifact_prefix="$W/crashes/$h/" "$W/corpus/$h" > "$W/logs/$h" 2>&1 || rc=1
	echo "$rc" > "$W/logs/$h.rc"
}
export -f run_one
export W SECS
printf '%s\n' "${harnesses[@]}" | xargs -P "$JOBS" -I{} bash -c 'run_one {}'

total=0
bad=0
printf '%-10s %12s %8s %8s\n' harness executions corpus crashes | tee "$W/results.txt"
for h in "${harnesses[@]}"; do
	n=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$W/logs/$h" | grep -oE '[0-9]+$' || echo 0)
	c=$(find "$W/crashes/$h" -type f -newer "$W/.start" | wc -l)
	rc=$(cat "$W/logs/$h.rc" 2>/dev/null || echo 1)
	[ "$rc" = 0 ] || c=$((c > 0 ? c : 1))
	printf '%-10s %12d %8d %8d\n' "$h" "${n:-0}" "$(ls "$W/corpus/$h" | wc -l)" "$c" | tee -a "$W/results.txt"
	total=$((total + ${n:-0}))
	if [ "$c" != 0 ]; then
		bad=$((bad + 1))
		echo "fuzz: $h failed; its log: $W/logs/$h; inputs: $W/crashes/$h/" >&2
		grep -E 'ERROR|SUMMARY|==[0-9]+==' "$W/logs/$h" "$W/logs/$h.regress" 2>/dev/null | head -5 >&2
	fi
done
printf '%-10s %12d\n' total "$total" | tee -a "$W/results.txt"
[ "$bad" = 0 ]

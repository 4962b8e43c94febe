# lib.sh: helpers the benchmark scripts share (sourced by each of them): interruptible
# sleep, bookkeeping of the background processes they start, and /proc readings.

BG_PIDS=()     # processes the script started, stopped by its cleanup
NAP_PID=

# sleep that lets the INT/TERM trap run at once (bash defers traps while a
# foreground command runs, but not during `wait`).
nap() { sleep "$1" & NAP_PID=$!; wait $NAP_PID; NAP_PID=; }

bg_forget() { # removes $1 from BG_PIDS
	local p keep=()
	for p in "${BG_PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	BG_PIDS=("${keep[@]}")
}

other_profilers() { # other perf/prowl processes than ours
	pgrep -x 'perf|prowl' 2>/dev/null | grep -vxF -f <(printf '%s\n' "${BG_PIDS[@]}" 0) | wc -l
}

kib() { # field $2 (VmRSS, VmHWM, ...) of /proc/$1/status, in KiB; nothing once it exited
	awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status" 2>/dev/null
}

per_cpu_rounds() { # $1 = none|prowl, $2 = seconds, then a command run once per CPU that
	# prints its rounds last; prints their sum. prowl: under `$B/prowl record -a -F 99`.
	local mode=$1 s=$2 pids=() n=0 p i rec= dir
	shift 2
	dir=$(mktemp -d)
	if [ "$mode" = prowl ]; then
		"$B/prowl" record -q -a -F 99 -d "$((s + 4))s" -o "$dir/t.pb.gz" >/dev/null 2>&1 &
		rec=$!
		sleep 2
	fi
	for i in $(seq "$(nproc)"); do
		"$@" >"$dir/count.$i" 2>/dev/null &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p"; done
	[ -n "$rec" ] && wait "$rec"
	for i in $(seq "$(nproc)"); do n=$((n + $(tail -1 "$dir/count.$i"))); done
	rm -rf "$dir"
	echo "$n"
}

bpf_cost() { # $1 = pid (stopped after), then record's flags: the BPF cost per sample over
	# $S s at 999 Hz, as PROWL_BPF_TIMING=1 prints it (p50, p90, p99).
	local w=$1 out f
	shift
	f=$(mktemp --suffix=.pb.gz)
	out=$(PROWL_BPF_TIMING=1 "$B/prowl" record -q "$@" -F 999 -p "$w" -d "${S}s" -o "$f" 2>&1)
	kill "$w" 2>/dev/null || true
	wait "$w" 2>/dev/null || true
	rm -f "$f"
	grep -oE 'p50 <= [0-9.]+ us, p90 <= [0-9.]+ us, p99 <= [0-9.]+ us' <<<"$out" | tail -1
}

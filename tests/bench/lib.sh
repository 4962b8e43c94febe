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

// gosplit.go: a Go program that splits its CPU time 70/30 between two functions by
// CPU-time deadlines for S seconds; built with and without symbols (-s -w) for the Go
// symbolization tests (issue 8, item 4). Usage: gosplit SECONDS
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// cpu is this thread's CPU time (the goroutine is locked to it), so the split holds
// whatever else the machine runs.
func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

//go:noinline
func leafGoAlpha(until time.Duration) float64 {
	x := 0.0
	for cpu() < until {
		for i := 0; i < 200000; i++ {
			x += float64(i) * 1.0000001
		}
	}
	return x
}

//go:noinline
func leafGoBeta(until time.Duration) float64 {
	x := 0.0
	for cpu() < until {
		for i := 0; i < 200000; i++ {
			x += float64(i) * 0.9999999
		}
	}
	return x
}

func main() {
	runtime.LockOSThread()
	secs, _ := strconv.Atoi(os.Args[1])
	end := time.Now().Add(time.Duration(secs) * time.Second)
	s := 0.0
	for time.Now().Before(end) {
		t := cpu()
		s += leafGoAlpha(t + 70*time.Millisecond)
		s += leafGoBeta(t + 100*time.Millisecond)
	}
	fmt.Println(s > 0)
}

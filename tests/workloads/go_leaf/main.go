// A CPU-bound Go workload whose hot functions are leaves: main.main ->
// main.run -> main.dispatch -> main.leafA / main.leafB, loops that call
// nothing, so Go gives them no stack frame and they push no frame pointer.
// A frame-pointer walk sampled in them skips their caller (main.dispatch);
// the walk by .gopclntab's pcsp tables finds it. leafA runs twice leafB's
// count: 2:1 (67 %, 33 %).
//
//	go_leaf SECONDS
//
// Prints its CPU time on exit.
package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

var sink uint64

//go:noinline
func leafA(x, n uint64) uint64 {
	for i := uint64(0); i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

//go:noinline
func leafB(x, n uint64) uint64 {
	for i := uint64(0); i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

//go:noinline
func dispatch(n uint64) {
	sink = leafA(sink, 2*n)
	sink = leafB(sink, n)
}

//go:noinline
func run(seconds float64) {
	end := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	for time.Now().Before(end) {
		dispatch(30000000)
	}
}

func main() {
	seconds := 10.0
	if len(os.Args) > 1 {
		if s, err := strconv.ParseFloat(os.Args[1], 64); err == nil {
			seconds = s
		}
	}
	run(seconds)
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu := float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
	fmt.Printf("cpu_seconds=%.3f\n", cpu)
}

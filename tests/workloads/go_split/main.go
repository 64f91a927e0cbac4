// A CPU-bound Go workload with a known answer: main.main -> main.run ->
// main.dispatch -> main.hotA / main.hotB, which do the same loop 2 and 1
// times as often, so their CPU time splits 2:1 (67 %, 33 %).
//
//	go_split SECONDS [ROUND]
//
// ROUND: iterations of hotB's loop a round (30000000, ~100 ms here); an
// emulated CPU's test gives a smaller one (see cpu_split.c).
// Prints its CPU time on exit, so tests can compare the sample count.
package main

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

var sink uint64

// spin is small enough to be inlined into its callers, so the time is
// spent in the function that calls it.
func spin(x, n uint64) uint64 {
	for i := uint64(0); i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

// rounds is called once a round by each hot function, so that they are not
// leaves: Go gives a leaf without locals no frame (it pushes no frame
// pointer), and a frame-pointer walk sampled in such a leaf skips its caller
// (main.dispatch here). With the call they keep a frame and the chain is whole.
//
//go:noinline
func rounds() { nrounds++ }

var nrounds int

//go:noinline
func hotA(n uint64) {
	sink = spin(sink, 2*n)
	rounds()
}

//go:noinline
func hotB(n uint64) {
	sink = spin(sink, n)
	rounds()
}

//go:noinline
func dispatch(n uint64) {
	hotA(n)
	hotB(n)
}

//go:noinline
func run(seconds float64, round uint64) {
	end := time.Now().Add(time.Duration(seconds * float64(time.Second)))
	for time.Now().Before(end) {
		dispatch(round)
	}
}

func main() {
	seconds := 10.0
	if len(os.Args) > 1 {
		if s, err := strconv.ParseFloat(os.Args[1], 64); err == nil {
			seconds = s
		}
	}
	round := uint64(30000000) // a round of ~100 ms: many sample periods, so no aliasing
	if len(os.Args) > 2 {
		if r, err := strconv.ParseUint(os.Args[2], 10, 64); err == nil && r > 0 {
			round = r
		}
	}
	run(seconds, round)
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu := float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
	fmt.Printf("cpu_seconds=%.3f\n", cpu)
}

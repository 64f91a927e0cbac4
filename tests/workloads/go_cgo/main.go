// A Go workload that calls C, which calls back into Go: main.main ->
// main.run -> main.dispatch -> C.cwork (C, built by cgo) -> main.goLeaf,
// a Go leaf (no frame) doing the work; dispatch also runs main.leafB
// directly, half as much: 2:1 (67 % under the C call, 33 % not).
//
//	go_cgo SECONDS
package main

/*
#include <stdint.h>
extern uint64_t goLeaf(uint64_t x, uint64_t n);

__attribute__((noinline)) static uint64_t cwork(uint64_t x, uint64_t n)
{
	uint64_t r = goLeaf(x, n);
	return r + 1;
}
*/
import "C"

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

var sink uint64

//export goLeaf
func goLeaf(x, n C.uint64_t) C.uint64_t {
	for i := C.uint64_t(0); i < n; i++ {
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
	sink = uint64(C.cwork(C.uint64_t(sink), C.uint64_t(2*n)))
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

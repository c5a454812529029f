// Command gentrace writes a synthetic Kineto trace of a vLLM worker (see package
// kinetogen) of at least -bytes bytes: gentrace -bytes 1073741824 -o rank0.pt.trace.json.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/inferprobe/inferprobe/trace/kineto/kinetogen"
)

func main() {
	size := flag.Int64("bytes", 1<<30, "size to reach in bytes")
	out := flag.String("o", "rank0.bench.pt.trace.json", "output file")
	kernels := flag.Int("kernels", 40, "eager launches per step")
	graph := flag.Int("graph-every", 8, "a cudaGraphLaunch every N steps (0: none)")
	flag.Parse()
	f, err := os.Create(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gentrace:", err)
		os.Exit(1)
	}
	st, err := kinetogen.Write(f, kinetogen.Config{Bytes: *size, KernelsPerStep: *kernels, GraphEvery: *graph})
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gentrace:", err)
		os.Exit(1)
	}
	fmt.Printf("%s: %d bytes, %d steps, %d GPU activities, %d launches\n", *out, st.Bytes, st.Steps, st.Kernels, st.Launches)
}

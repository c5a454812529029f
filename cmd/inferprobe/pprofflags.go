package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/spf13/cobra"
)

// pprofFlags are the hidden --cpuprofile and --memprofile flags every verb takes, for
// finding where the load generator's time and memory go (go tool pprof reads the files).
type pprofFlags struct {
	cpu, mem string
	cpuFile  *os.File
}

// register adds the hidden persistent flags to root and starts the CPU profile before any
// verb runs.
func (p *pprofFlags) register(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringVar(&p.cpu, "cpuprofile", "", "write a CPU profile (pprof) of the whole command to this file")
	f.StringVar(&p.mem, "memprofile", "", "write a heap profile (pprof, all allocations) at the end to this file")
	_ = f.MarkHidden("cpuprofile")
	_ = f.MarkHidden("memprofile")
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return p.start() }
}

func (p *pprofFlags) start() error {
	if p.mem != "" {
		runtime.MemProfileRate = 64 << 10
	}
	if p.cpu == "" {
		return nil
	}
	f, err := os.Create(p.cpu)
	if err != nil {
		return usageErrorf("--cpuprofile: %v", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return usageErrorf("--cpuprofile: %v", err)
	}
	p.cpuFile = f
	return nil
}

// stop ends the CPU profile and writes the heap profile; failures are printed, never fatal.
func (p *pprofFlags) stop() {
	if p.cpuFile != nil {
		pprof.StopCPUProfile()
		if err := p.cpuFile.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "Warning: --cpuprofile: %v\n", err)
		}
		p.cpuFile = nil
	}
	if p.mem == "" {
		return
	}
	f, err := os.Create(p.mem)
	if err == nil {
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "Warning: --memprofile: %v\n", err)
	}
}

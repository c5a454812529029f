package main

import (
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/inferprobe/inferprobe/analyze"
)

// costFlags are the cost flags of analyze, compare and pareto: the server's dollars per
// hour, or a GPU's with the number of GPUs. sides is how many runs a value may name (1 for
// analyze and pareto, 2 for compare: "BASE,CANDIDATE").
type costFlags struct {
	perHour, perGPUHour, gpus string
	sides                     int
}

func (c *costFlags) register(f *pflag.FlagSet, sides int) {
	c.sides = sides
	both := ""
	if sides == 2 {
		both = "; BASE,CANDIDATE for two values"
	}
	f.StringVar(&c.perHour, "cost-per-hour", "", "the server's cost in US dollars per hour: prices each case's tokens ($ per million output and total tokens)"+both)
	f.StringVar(&c.perGPUHour, "cost-per-gpu-hour", "", "one GPU's cost in US dollars per hour, times --gpus"+both)
	f.StringVar(&c.gpus, "gpus", "", "the number of GPUs serving (with --cost-per-gpu-hour; pareto also divides throughput by it)"+both)
}

// rates returns one cost rate per side (nil entries without cost flags) and the GPU counts
// (nil without --gpus); a malformed or invalid value is a usage error (exit 2).
func (c *costFlags) rates() (rates []*analyze.CostRate, gpus []*int, err error) {
	perHour, err := c.values("--cost-per-hour", c.perHour, false)
	if err != nil {
		return nil, nil, err
	}
	perGPU, err := c.values("--cost-per-gpu-hour", c.perGPUHour, false)
	if err != nil {
		return nil, nil, err
	}
	counts, err := c.values("--gpus", c.gpus, true)
	if err != nil {
		return nil, nil, err
	}
	rates, gpus = make([]*analyze.CostRate, c.sides), make([]*int, c.sides)
	for i := range c.sides {
		if counts[i] != nil {
			gpus[i] = new(int(*counts[i]))
		}
		if perHour[i] == nil && perGPU[i] == nil {
			continue
		}
		r := &analyze.CostRate{USDPerHour: perHour[i], USDPerGPUHour: perGPU[i], GPUs: gpus[i]}
		if err := r.Validate(); err != nil {
			return nil, nil, usageErrorf("cost: %v", err)
		}
		rates[i] = r
	}
	return rates, gpus, nil
}

// values splits a flag's value into one number per side ("X" applies to every side).
func (c *costFlags) values(flag, s string, integer bool) ([]*float64, error) {
	out := make([]*float64, c.sides)
	if s == "" {
		return out, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) != 1 && len(parts) != c.sides {
		return nil, usageErrorf("%s takes one value or %d separated by a comma, not %q", flag, c.sides, s)
	}
	for i := range c.sides {
		p := strings.TrimSpace(parts[min(i, len(parts)-1)])
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || !(v > 0) || v > 1e12 || (integer && v != float64(int(v))) {
			kind := "a positive number"
			if integer {
				kind = "a positive whole number"
			}
			return nil, usageErrorf("%s must be %s, not %q", flag, kind, p)
		}
		out[i] = &v
	}
	return out, nil
}

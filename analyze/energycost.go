package analyze

import (
	"errors"
	"fmt"
	"math"

	"github.com/inferprobe/inferprobe/join"
)

// Energy is a case's energy block: the GPU energy the server telemetry recorded over the
// case window (join.Energy: status, joules, mean power; a group's GPUs added) and what it
// comes to per unit of work — joules per output token and per successful request (the
// throughput block's cohort: the successful requests and their output tokens), null unless
// the energy is observed and the count is positive.
type Energy struct {
	join.Energy
	JoulesPerOutputToken *float64 `json:"joules_per_output_token"`
	JoulesPerRequest     *float64 `json:"joules_per_request"`
}

// energyBlock is a case's energy block before any server telemetry is joined.
func energyBlock() Energy {
	return Energy{Energy: join.Energy{Status: join.EnergyNotJoined, Reason: strPtr("no server telemetry was supplied")}}
}

// setEnergy sets c's energy block from the join's energy of the case.
func (c *CaseReport) setEnergy(e join.Energy) {
	c.Energy = Energy{Energy: e}
	if e.Status != join.EnergyObserved || e.Joules == nil {
		return
	}
	if c.Tokens.OutputTokens > 0 {
		c.Energy.JoulesPerOutputToken = f64Ptr(*e.Joules / float64(c.Tokens.OutputTokens))
	}
	if c.SuccessfulRequests > 0 {
		c.Energy.JoulesPerRequest = f64Ptr(*e.Joules / float64(c.SuccessfulRequests))
	}
}

// CostRate is what serving costs per hour, in US dollars: the whole server's rate
// (USDPerHour, analyze --cost-per-hour) or a GPU's rate times the GPUs serving
// (USDPerGPUHour × GPUs, --cost-per-gpu-hour with --gpus). Exactly one form is set.
type CostRate struct {
	USDPerHour    *float64
	USDPerGPUHour *float64
	GPUs          *int
}

// Validate checks the rate: one form, finite positive dollars, and at least one GPU for
// the per-GPU form.
func (r CostRate) Validate() error {
	switch {
	case r.USDPerHour != nil && r.USDPerGPUHour != nil:
		return errors.New("give the server's cost per hour or a GPU's, not both")
	case r.USDPerHour != nil:
		if v := *r.USDPerHour; !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("the cost per hour must be a positive number of dollars, not %g", v)
		}
	case r.USDPerGPUHour != nil:
		if v := *r.USDPerGPUHour; !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("the cost per GPU hour must be a positive number of dollars, not %g", v)
		}
		if r.GPUs == nil || *r.GPUs < 1 {
			return errors.New("a cost per GPU hour needs the number of GPUs (at least 1)")
		}
	default:
		return errors.New("no cost per hour was given")
	}
	return nil
}

// ServerUSDPerHour is the whole server's dollars per hour: USDPerHour, or USDPerGPUHour ×
// GPUs. The rate must be valid.
func (r CostRate) ServerUSDPerHour() float64 {
	if r.USDPerHour != nil {
		return *r.USDPerHour
	}
	return *r.USDPerGPUHour * float64(*r.GPUs)
}

// Cost is a case's cost block: the server's dollars per hour and how it was stated (basis
// "server", or "per_gpu" with the GPU rate and count), and what a million tokens cost at
// the case's throughput: USD/h ÷ 3600 ÷ (tokens/s) × 10⁶, for output tokens and for total
// (prompt + output) tokens. A figure is null when its throughput is null or 0 (Reason says
// so). The cost is of the server's time while it served the case's load: an idle server
// costs the same, so a lightly loaded case's tokens are dear.
type Cost struct {
	USDPerHour                *float64 `json:"usd_per_hour"`
	Basis                     string   `json:"basis"`
	USDPerGPUHour             *float64 `json:"usd_per_gpu_hour"`
	GPUs                      *int     `json:"gpus"`
	USDPerMillionOutputTokens *float64 `json:"usd_per_million_output_tokens"`
	USDPerMillionTotalTokens  *float64 `json:"usd_per_million_total_tokens"`
	Reason                    *string  `json:"reason"`
}

// CostOf prices a case's throughput at rate (valid).
func CostOf(rate CostRate, t Throughput) *Cost {
	perHour := rate.ServerUSDPerHour()
	c := &Cost{USDPerHour: f64Ptr(perHour), Basis: "server"}
	if rate.USDPerGPUHour != nil {
		c.Basis, c.USDPerGPUHour, c.GPUs = "per_gpu", f64Ptr(*rate.USDPerGPUHour), intPtr(*rate.GPUs)
	}
	perMillion := func(tps *float64) *float64 {
		if tps == nil || !(*tps > 0) {
			return nil
		}
		return f64Ptr(perHour / 3600 / *tps * 1e6)
	}
	c.USDPerMillionOutputTokens = perMillion(t.OutputTokensPerSecond)
	c.USDPerMillionTotalTokens = perMillion(t.TotalTokensPerSecond)
	if c.USDPerMillionOutputTokens == nil {
		c.Reason = strPtr("the case has no output token throughput")
	}
	return c
}

// applyCost sets every case's cost block when a rate is given (a rate that fails Validate
// sets none: the caller validates first).
func applyCost(rep *Report, rate *CostRate) {
	if rate == nil || rate.Validate() != nil {
		return
	}
	for _, c := range rep.Cases {
		if c != nil {
			c.Cost = CostOf(*rate, c.Throughput)
		}
	}
}

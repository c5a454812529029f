package join

// GPU energy of a case window: the difference of the GPU's cumulative energy counter
// (device_energy_consumed_millijoules) between the first and the last reading counted in the
// window, as an average power, over the whole case window; the power readings
// (device_power_usage_milliwatts) summarised beside it.

import (
	"fmt"

	"github.com/inferprobe/inferprobe/artifact"
)

// Energy statuses and reasons of a case's energy block. A case's energy is known only when
// it is observed; every other case says why not.
const (
	EnergyObserved  = "observed"
	EnergyUnknown   = "unknown"
	EnergyNotJoined = "not_joined"

	// EnergyNoSamples: no valid energy reading counted in the window (a collector without
	// NVML energy support, --no-gpu, a MIG instance, or a GPU older than Volta).
	EnergyNoSamples = "no_energy_samples"
	// EnergyTooFewSamples: one valid reading only, or readings without elapsed time.
	EnergyTooFewSamples = "too_few_energy_samples"
	// EnergyCounterReset: a reading below an earlier one — the counter wrapped or was reset
	// (the driver was reloaded) inside the window.
	EnergyCounterReset = "energy_counter_reset"
	// EnergyCounterImplausible: two readings imply more than MaxDevicePowerW.
	EnergyCounterImplausible = "energy_counter_implausible"
)

// MaxDevicePowerW is the highest average power (watts) two energy readings of one GPU may
// imply; above it the counter is taken as reset and grown back past its old value, or
// corrupt. The largest accelerator boards draw about 1,200 W.
const MaxDevicePowerW = 5000

// Energy is a case's GPU energy from the cumulative energy counter: over the counted
// readings [first, last] (CountedJoules over CountedSeconds, client clock), their mean
// power MeanPowerW (W), and Joules = MeanPowerW × WindowSeconds, the energy of the whole
// case window at that power. The sampled power figures (W) summarise the power readings
// counted in the window. For a group, Joules, CountedJoules, MeanPowerW and
// SampledPowerMeanW are the sums over its GPUs (energies add; Devices counts them) and
// SampledPowerMaxW is null (maxima of different GPUs do not add). Status is observed, or
// unknown / not_joined with Reason (a coverage reason of the window, or an Energy* reason);
// every figure is null unless observed. Readings count under the memory samples' rule: a
// reading's placed time ± its uncertainty inside the case window, its placed time inside
// the counted window; the first counted energy reading must lie within its polling interval
// of the counted window's start, the last within its interval of its end.
type Energy struct {
	Status            string   `json:"status"`
	Reason            *string  `json:"reason"`
	Joules            *float64 `json:"joules"`
	MeanPowerW        *float64 `json:"mean_power_w"`
	WindowSeconds     *float64 `json:"window_seconds"`
	CountedJoules     *float64 `json:"counted_joules"`
	CountedSeconds    *float64 `json:"counted_seconds"`
	EnergySamples     int      `json:"energy_samples"`
	PowerSamples      int      `json:"power_samples"`
	SampledPowerMeanW *float64 `json:"sampled_power_mean_w"`
	SampledPowerMaxW  *float64 `json:"sampled_power_max_w"`
	Devices           int      `json:"devices"`
}

// energyNotJoined is the energy block of a case the join did not reach.
func energyNotJoined(reason string) Energy {
	return Energy{Status: EnergyNotJoined, Reason: ptr(reason)}
}

func energyUnknown(reason string, e Energy) Energy {
	e.Status, e.Reason = EnergyUnknown, ptr(reason)
	return e
}

// energy computes one target's energy over case window c, whose coverage cov the memory
// samples gave (an empty coverage ends it with the same reason).
func (p *placement) energy(c CaseWindow, cov Coverage) Energy {
	if cov.Status == CoverageEmpty || cov.CountedWindowNS == nil {
		reason := CoverNoCollectorCoverage
		if cov.Reason != nil {
			reason = *cov.Reason
		}
		return energyUnknown(reason, Energy{})
	}
	a, b := c.StartNS, c.EndNS
	win := *cov.CountedWindowNS
	var energy, power []*placed
	for _, ps := range p.inRange(a-p.maxU, b+p.maxU) {
		if !ps.ok || ps.s.State != artifact.SampleValid {
			continue
		}
		if ps.at-ps.unc < a || ps.at+ps.unc > b || ps.at < win[0] || ps.at > win[1] {
			continue
		}
		switch ps.s.Metric {
		case artifact.MetricDeviceEnergyMillijoules:
			energy = append(energy, &ps)
		case artifact.MetricDevicePowerMilliwatts:
			power = append(power, &ps)
		}
	}
	e := Energy{EnergySamples: len(energy), PowerSamples: len(power), Devices: 1}
	if len(power) > 0 {
		sum, top := 0.0, 0.0
		for _, ps := range power {
			w := float64(*ps.s.ValueMilliwatts) / 1000
			sum += w
			top = max(top, w)
		}
		e.SampledPowerMeanW, e.SampledPowerMaxW = ptr(sum/float64(len(power))), ptr(top)
	}
	switch {
	case len(energy) == 0:
		return energyUnknown(EnergyNoSamples, e)
	case len(energy) == 1 || energy[len(energy)-1].at <= energy[0].at:
		return energyUnknown(EnergyTooFewSamples, e)
	}
	for i := 1; i < len(energy); i++ {
		prev, cur := energy[i-1], energy[i]
		if *cur.s.ValueMillijoules < *prev.s.ValueMillijoules {
			return energyUnknown(EnergyCounterReset, e)
		}
		if dt := cur.at - prev.at; dt > 0 && float64(*cur.s.ValueMillijoules-*prev.s.ValueMillijoules)/float64(dt)*1e6 > MaxDevicePowerW {
			return energyUnknown(EnergyCounterImplausible, e)
		}
	}
	first, last := energy[0], energy[len(energy)-1]
	switch {
	case first.at-win[0] > first.s.IntervalMS*1_000_000:
		return energyUnknown(CoverStartedAfterWindowStart, e)
	case win[1]-last.at > last.s.IntervalMS*1_000_000:
		return energyUnknown(CoverStoppedBeforeWindowEnd, e)
	}
	joules := float64(*last.s.ValueMillijoules-*first.s.ValueMillijoules) / 1000
	seconds := float64(last.at-first.at) / 1e9
	window := float64(b-a) / 1e9
	watts := joules / seconds
	e.Status = EnergyObserved
	e.CountedJoules, e.CountedSeconds, e.MeanPowerW = ptr(joules), ptr(seconds), ptr(watts)
	e.WindowSeconds, e.Joules = ptr(window), ptr(watts*window)
	return e
}

// groupEnergy adds the members' energies: observed when every member's is (Joules,
// CountedJoules, MeanPowerW and SampledPowerMeanW summed, the counted seconds the shortest
// member's, no power maximum), else unknown with the first member's reason, naming its rank.
func groupEnergy(members []*target, energies []Energy) Energy {
	g := Energy{Status: EnergyObserved, Devices: len(members)}
	var joules, counted, watts, sampled float64
	sampledAll := true
	for i, e := range energies {
		g.EnergySamples += e.EnergySamples
		g.PowerSamples += e.PowerSamples
		if e.Status != EnergyObserved {
			reason := "unknown"
			if e.Reason != nil {
				reason = *e.Reason
			}
			return energyUnknown(fmt.Sprintf("rank %d: %s", members[i].key.rank, reason), Energy{Devices: len(members),
				EnergySamples: g.EnergySamples, PowerSamples: g.PowerSamples})
		}
		joules += *e.Joules
		counted += *e.CountedJoules
		watts += *e.MeanPowerW
		if g.CountedSeconds == nil || *e.CountedSeconds < *g.CountedSeconds {
			g.CountedSeconds = ptr(*e.CountedSeconds)
		}
		g.WindowSeconds = e.WindowSeconds
		if e.SampledPowerMeanW == nil {
			sampledAll = false
		} else {
			sampled += *e.SampledPowerMeanW
		}
	}
	g.Joules, g.CountedJoules, g.MeanPowerW = ptr(joules), ptr(counted), ptr(watts)
	if sampledAll && len(energies) > 0 {
		g.SampledPowerMeanW = ptr(sampled)
	}
	return g
}

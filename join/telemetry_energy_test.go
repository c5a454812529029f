package join

import (
	"math"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
)

// energyAt is an energy-counter reading of GPU-A at atMS (client clock) of mj millijoules.
func energyAt(atMS, mj int64) artifact.TelemetrySample {
	s := rss(atMS, 0)
	s.Scope, s.CounterOwner, s.Metric, s.Source = artifact.ScopeGPUDevice, artifact.OwnerGPUDevice, artifact.MetricDeviceEnergyMillijoules, "nvml.total_energy_consumption"
	s.ValueBytes, s.ValueMillijoules = nil, artifact.Ptr(mj)
	return s
}

func powerAt(atMS, mw int64) artifact.TelemetrySample {
	s := energyAt(atMS, 0)
	s.Metric, s.Source, s.ValueMillijoules, s.ValueMilliwatts = artifact.MetricDevicePowerMilliwatts, "nvml.power_usage", nil, artifact.Ptr(mw)
	return s
}

// energySeries polls the counter every 100 ms from fromMS to toMS at a constant watts
// (the counter starts at 5,000 J), with power readings of the same draw.
func energySeries(fromMS, toMS int64, watts float64, edit func(*artifact.TelemetrySample)) []artifact.TelemetrySample {
	var out []artifact.TelemetrySample
	for at := fromMS; at <= toMS; at += 100 {
		e, p := energyAt(at, 5_000_000+int64(watts*float64(at))), powerAt(at, int64(watts*1000))
		if edit != nil {
			edit(&e)
			edit(&p)
		}
		out = append(out, e, p)
	}
	return out
}

func near(v *float64, want float64) bool {
	return v != nil && math.Abs(*v-want) <= 1e-9*math.Max(1, math.Abs(want))
}

// A case window [100, 900] ms with readings every 100 ms at 250 W: the counted readings span
// 800 ms (200 J), so the mean power is 250 W and the 0.8 s window's energy 200 J.
func TestCaseEnergy(t *testing.T) {
	samples := cat(series(0, 1000, nil), energySeries(0, 1000, 250, nil))
	res := mustJoin(t, input(samples, win("c1", 100, 900), win("c2", 150, 450)))
	e := res.Cases["c1"].Energy
	if e.Status != EnergyObserved || !near(e.Joules, 200) || !near(e.MeanPowerW, 250) || !near(e.WindowSeconds, 0.8) ||
		!near(e.CountedJoules, 200) || !near(e.CountedSeconds, 0.8) || e.EnergySamples != 9 || e.PowerSamples != 9 ||
		!near(e.SampledPowerMeanW, 250) || !near(e.SampledPowerMaxW, 250) || e.Devices != 1 {
		t.Fatalf("c1 energy %+v", e)
	}
	// [150, 450]: readings at 200, 300, 400 (200 ms, 50 J) → 250 W over the 0.3 s window: 75 J.
	if e := res.Cases["c2"].Energy; e.Status != EnergyObserved || !near(e.Joules, 75) || !near(e.CountedJoules, 50) {
		t.Fatalf("c2 energy %+v", e)
	}
	// Energy samples do not become memory maxima.
	if _, ok := res.Cases["c1"].Observations[artifact.MetricDeviceEnergyMillijoules]; ok {
		t.Fatal("energy listed among the memory observations")
	}
}

// Counters that reset (a driver reload) or jump implausibly, too few readings, a collector
// without energy readings, and a collector that stopped early each leave the energy unknown
// with the reason; an unjoined telemetry leaves it not_joined.
func TestCaseEnergyUnknown(t *testing.T) {
	reset := energySeries(0, 1000, 250, func(s *artifact.TelemetrySample) {
		if s.ValueMillijoules != nil && s.ObservedAtNS >= base+500*ms {
			*s.ValueMillijoules -= 5_000_000 // the driver was reloaded at 450 ms
		}
	})
	jump := energySeries(0, 1000, 250, func(s *artifact.TelemetrySample) {
		if s.ValueMillijoules != nil && s.ObservedAtNS >= base+500*ms {
			*s.ValueMillijoules += 10_000_000 // +10 kJ in 100 ms: 100 kW
		}
	})
	for name, tc := range map[string]struct {
		samples []artifact.TelemetrySample
		reason  string
	}{
		"reset":       {cat(series(0, 1000, nil), reset), EnergyCounterReset},
		"implausible": {cat(series(0, 1000, nil), jump), EnergyCounterImplausible},
		"none":        {series(0, 1000, nil), EnergyNoSamples},
		"one":         {cat(series(0, 1000, nil), []artifact.TelemetrySample{energyAt(500, 1)}), EnergyTooFewSamples},
		"late start":  {cat(series(0, 1000, nil), energySeries(600, 1000, 250, nil)), CoverStartedAfterWindowStart},
		"early stop":  {cat(series(0, 1000, nil), energySeries(0, 400, 250, nil)), CoverStoppedBeforeWindowEnd},
		"no coverage": {series(2000, 3000, nil), CoverNoCollectorCoverage},
	} {
		t.Run(name, func(t *testing.T) {
			e := mustJoin(t, input(tc.samples, win("c1", 100, 900))).Cases["c1"].Energy
			if e.Status != EnergyUnknown || reasonOf(e.Reason) != tc.reason || e.Joules != nil || e.MeanPowerW != nil {
				t.Fatalf("energy %+v, want unknown %s", e, tc.reason)
			}
		})
	}
	in := input(cat(series(0, 1000, nil), energySeries(0, 1000, 250, nil)), win("c1", 100, 900))
	in.DirectServer = false
	e := mustJoin(t, in).Cases["c1"].Energy
	if e.Status != EnergyNotJoined || reasonOf(e.Reason) != ReasonRouteUndeclared {
		t.Fatalf("unjoined energy %+v", e)
	}
}

// A group's GPUs' energies add (unlike memory maxima); one member without energy makes the
// group's unknown, naming the rank.
func TestGroupEnergyAdds(t *testing.T) {
	member := func(rank, pid int64, gpu string) func(*artifact.TelemetrySample) {
		return func(s *artifact.TelemetrySample) {
			s.Identity.PID, s.Identity.Rank, s.Identity.WorldSize = pid, artifact.Ptr(rank), artifact.Ptr(int64(2))
			s.Identity.GroupID, s.Identity.DeviceUUID = artifact.Ptr("tp"), artifact.Ptr(gpu)
		}
	}
	r0 := cat(series(0, 1000, member(0, 200, "GPU-0")), energySeries(0, 1000, 300, member(0, 200, "GPU-0")))
	r1 := cat(series(0, 1000, member(1, 201, "GPU-1")), energySeries(0, 1000, 100, member(1, 201, "GPU-1")))
	c := mustJoin(t, input(cat(r0, r1), win("c1", 100, 900))).Cases["c1"]
	if e := c.Energy; e.Status != EnergyObserved || e.Devices != 2 || !near(e.Joules, 320) || !near(e.MeanPowerW, 400) ||
		!near(e.SampledPowerMeanW, 400) || e.SampledPowerMaxW != nil {
		t.Fatalf("group energy %+v", e)
	}
	if !near(c.Members[0].Energy.Joules, 240) || !near(c.Members[1].Energy.Joules, 80) {
		t.Fatalf("members %+v / %+v", c.Members[0].Energy, c.Members[1].Energy)
	}
	c = mustJoin(t, input(cat(r0, series(0, 1000, member(1, 201, "GPU-1"))), win("c1", 100, 900))).Cases["c1"]
	if e := c.Energy; e.Status != EnergyUnknown || !strings.HasPrefix(reasonOf(e.Reason), "rank 1: "+EnergyNoSamples) || e.Joules != nil {
		t.Fatalf("group energy %+v", e)
	}
}

// A sample that carries its reading in the wrong field, or an energy reading on a memory
// metric, is invalid telemetry.
func TestEnergySampleValidation(t *testing.T) {
	good := energyAt(0, 10)
	if err := ValidateSample(&good); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*artifact.TelemetrySample){
		"bytes on energy":    func(s *artifact.TelemetrySample) { s.ValueBytes = artifact.Ptr(int64(1)) },
		"no value":           func(s *artifact.TelemetrySample) { s.ValueMillijoules = nil },
		"negative":           func(s *artifact.TelemetrySample) { s.ValueMillijoules = artifact.Ptr(int64(-1)) },
		"missing with value": func(s *artifact.TelemetrySample) { s.State = artifact.SampleMissing },
		"power on energy":    func(s *artifact.TelemetrySample) { s.ValueMilliwatts = artifact.Ptr(int64(1)) },
		"wrong scope":        func(s *artifact.TelemetrySample) { s.Scope = artifact.ScopeServerProcess },
	} {
		s := energyAt(0, 10)
		edit(&s)
		if err := ValidateSample(&s); err == nil {
			t.Errorf("%s: accepted %+v", name, s)
		}
	}
	m := rss(0, 1)
	m.ValueMillijoules = artifact.Ptr(int64(1))
	if err := ValidateSample(&m); err == nil {
		t.Error("an energy reading on a memory sample was accepted")
	}
}

// Energy and power samples round-trip through a telemetry file; memory samples keep their
// key set (no energy keys written).
func TestReadEnergyTelemetry(t *testing.T) {
	in := []artifact.TelemetrySample{rss(0, 7), energyAt(0, 12_345), powerAt(0, 300_000)}
	data := writeSamples(t, in)
	if strings.Count(string(data), "value_millijoules") != 1 || strings.Count(string(data), "value_milliwatts") != 1 {
		t.Fatalf("file:\n%s", data)
	}
	out, err := ReadTelemetry(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 || *out[1].ValueMillijoules != 12_345 || *out[2].ValueMilliwatts != 300_000 || out[1].ValueBytes != nil {
		t.Fatalf("read %+v", out)
	}
	bad := strings.Replace(string(data), `"value_milliwatts":300000`, `"value_milliwatts":300000,"value_watts":3`, 1)
	if _, err := ReadTelemetry(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "unknown field value_watts") {
		t.Fatalf("unknown key: %v", err)
	}
}

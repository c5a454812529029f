package collect

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/scrape/gpu"
)

// Each poll reads the energy counter (mJ) and the power draw (mW) of a whole GPU: the
// counter grows by the fake's step between polls.
func TestEnergyAndPowerEachPoll(t *testing.T) {
	f := gpuFake()
	c, s, _ := setup(t, f, "GPU-aaaa")
	for range 3 {
		if _, done, err := c.Poll(context.Background()); done || err != nil {
			t.Fatal(done, err)
		}
	}
	var energy []int64
	for _, x := range s.samples {
		switch x.Metric {
		case artifact.MetricDeviceEnergyMillijoules:
			if x.ValueMillijoules == nil || x.ValueBytes != nil || x.ValueMilliwatts != nil || x.Scope != artifact.ScopeGPUDevice {
				t.Fatalf("energy sample %+v", x)
			}
			energy = append(energy, *x.ValueMillijoules)
		case artifact.MetricDevicePowerMilliwatts:
			val(t, x, 500_000, SourceNVMLPower)
		}
	}
	if fmt.Sprint(energy) != "[7000000 7050000 7100000]" {
		t.Fatalf("energy readings %v", energy)
	}
	if len(s.warns) != 0 {
		t.Errorf("warnings %q", s.warns)
	}
}

// A GPU without the energy counter (or power reading) is warned about once and not read
// again: no sample for it, the other counters go on.
func TestEnergyUnsupportedWarnsOnce(t *testing.T) {
	f := gpuFake()
	f.Devices[0].EnergyErr = fmt.Errorf("nvmlDeviceGetTotalEnergyConsumption: %w (Not Supported)", gpu.ErrUnsupported)
	f.Devices[0].PowerErr = fmt.Errorf("nvmlDeviceGetPowerUsage: %w (Not Supported)", gpu.ErrUnsupported)
	c, s, _ := setup(t, f, "GPU-aaaa")
	for range 3 {
		if _, done, err := c.Poll(context.Background()); done || err != nil {
			t.Fatal(done, err)
		}
	}
	if len(s.samples) != 12 {
		t.Fatalf("%d samples, want 4 a poll", len(s.samples))
	}
	for _, x := range s.samples {
		if x.Metric == artifact.MetricDeviceEnergyMillijoules || x.Metric == artifact.MetricDevicePowerMilliwatts {
			t.Fatalf("sample %+v of an unsupported counter", x)
		}
	}
	if len(s.warns) != 2 || !strings.Contains(s.warns[0], "no energy counter") || !strings.Contains(s.warns[1], "no power draw") {
		t.Fatalf("warnings %q", s.warns)
	}
}

// A MIG instance records no energy or power (NVML's are the whole GPU's), and says so.
func TestMIGRecordsNoEnergy(t *testing.T) {
	f := gpuFake()
	f.Devices = append(f.Devices, &gpu.FakeDevice{
		UUIDValue: "MIG-bbbb", MIGInfo: &gpu.MIGInfo{ParentUUID: "GPU-aaaa", GPUInstanceID: 2},
		Mem: gpu.Memory{TotalBytes: 10 << 30, UsedBytes: 7 << 30}, Procs: []gpu.Process{{PID: 4242}},
		EnergyMJ: 1000, PowerMW: 1000,
	})
	c, s, _ := setup(t, f, "MIG-bbbb")
	if _, _, err := c.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	m := byMetric(t, s.samples)
	if _, ok := m[artifact.MetricDeviceEnergyMillijoules]; ok || len(m) != 4 {
		t.Fatalf("metrics %v", m)
	}
	if len(s.warns) != 1 || !strings.Contains(s.warns[0], "MIG instance") {
		t.Fatalf("warnings %q", s.warns)
	}
}

package collect

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/scrape/gpu"
)

type fakeProc struct {
	mu       sync.Mutex
	pid      int
	start    int64
	rss      uint64
	rssErr   error
	running  bool
	runErr   error
	children []int
}

func (p *fakeProc) PID() int       { return p.pid }
func (p *fakeProc) StartNS() int64 { return p.start }
func (p *fakeProc) RSSBytes(context.Context) (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rss, p.rssErr
}
func (p *fakeProc) Running(context.Context) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running, p.runErr
}
func (p *fakeProc) Descendants(context.Context, int) []int { return p.children }

type sink struct {
	mu      sync.Mutex
	samples []artifact.TelemetrySample
	warns   []string
}

func (s *sink) Write(rec artifact.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(s.samples, *rec.(*artifact.TelemetrySample))
	return nil
}

func (s *sink) Close() error  { return nil }
func (s *sink) warn(m string) { s.warns = append(s.warns, m) }

func u64(v uint64) *uint64 { return &v }
func str(v string) *string { return &v }
func i64(v int64) *int64   { return &v }

const t0 = int64(1_700_000_000_000_000_000)

func setup(t *testing.T, f *gpu.Fake, uuid string) (*Collector, *sink, *fakeProc) {
	t.Helper()
	p := &fakeProc{pid: 4242, start: 1_600_000_000_000_000_000, rss: 123456789, running: true}
	s := &sink{}
	cfg := Config{
		RunID:    "run-1",
		Interval: 100 * time.Millisecond,
		Host:     artifact.Host{Name: "node1", BootID: str("boot-9")},
		Process:  p,
		Sink:     s,
		Warn:     s.warn,
		Now:      func() time.Time { return time.Unix(0, t0) },
	}
	if f != nil {
		if err := f.Init(); err != nil {
			t.Fatal(err)
		}
		d, err := OpenDevice(f, uuid, 0)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Device = d
	}
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, s, p
}

func byMetric(t *testing.T, ss []artifact.TelemetrySample) map[string]artifact.TelemetrySample {
	t.Helper()
	m := map[string]artifact.TelemetrySample{}
	for _, s := range ss {
		if _, dup := m[s.Metric]; dup {
			t.Fatalf("metric %s twice in one poll", s.Metric)
		}
		scope, owner, ok := artifact.MetricScope(s.Metric)
		if !ok || s.Scope != scope || s.CounterOwner != owner {
			t.Errorf("%s: scope/owner %s/%s", s.Metric, s.Scope, s.CounterOwner)
		}
		if (s.State == artifact.SampleValid) != (sampleValue(s) != nil) {
			t.Errorf("%s: state %s with value %v", s.Metric, s.State, sampleValue(s))
		}
		if n := countValues(s); n > 1 {
			t.Errorf("%s: %d value fields set", s.Metric, n)
		}
		if s.RunID != "run-1" || s.ClockDomain != "node1/boot-9/unix_epoch_ns" || s.IntervalMS != 100 ||
			s.ObservedAtNS != t0 || s.Provenance != artifact.ProvenanceObserved {
			t.Errorf("%s: header %+v", s.Metric, s)
		}
		m[s.Metric] = s
	}
	return m
}

// sampleValue is the sample's value field for its metric (artifact.ValueField).
func sampleValue(s artifact.TelemetrySample) *int64 {
	switch artifact.ValueField(s.Metric) {
	case "value_millijoules":
		return s.ValueMillijoules
	case "value_milliwatts":
		return s.ValueMilliwatts
	}
	return s.ValueBytes
}

func countValues(s artifact.TelemetrySample) int {
	n := 0
	for _, v := range []*int64{s.ValueBytes, s.ValueMillijoules, s.ValueMilliwatts} {
		if v != nil {
			n++
		}
	}
	return n
}

func val(t *testing.T, s artifact.TelemetrySample, want int64, source string) {
	t.Helper()
	if v := sampleValue(s); s.State != artifact.SampleValid || v == nil || *v != want || s.Source != source {
		t.Errorf("%s: state %s value %v source %s; want valid %d %s", s.Metric, s.State, v, s.Source, want, source)
	}
}

func gpuFake() *gpu.Fake {
	return &gpu.Fake{Devices: []*gpu.FakeDevice{{
		UUIDValue: "GPU-aaaa",
		Mem:       gpu.Memory{TotalBytes: 80 << 30, UsedBytes: 50 << 30, ReservedBytes: u64(512 << 20), FreeBytes: 80<<30 - 50<<30 - 512<<20},
		Procs:     []gpu.Process{{PID: 1}, {PID: 4242, UsedBytes: u64(48 << 30)}},
		EnergyMJ:  7_000_000, EnergyStepMJ: 50_000, PowerMW: 500_000,
	}}}
}

func TestNoGPU(t *testing.T) {
	c, s, _ := setup(t, nil, "")
	if _, done, err := c.Poll(context.Background()); done || err != nil {
		t.Fatal(done, err)
	}
	m := byMetric(t, s.samples)
	if len(m) != 1 {
		t.Fatalf("samples %v", s.samples)
	}
	rss := m[artifact.MetricProcessRSSBytes]
	val(t, rss, 123456789, SourcePsutil)
	id := rss.Identity
	if id.Host != "node1" || id.PID != 4242 || id.ProcessStartNS != 1_600_000_000_000_000_000 ||
		id.DeviceUUID != nil || id.GPUInstanceID != nil || *id.BootID != "boot-9" || id.GroupID != nil || id.WorldSize != nil {
		t.Errorf("identity %+v", id)
	}
}

func TestV2Device(t *testing.T) {
	f := gpuFake()
	c, s, _ := setup(t, f, "GPU-aaaa")
	if len(s.warns) != 0 {
		t.Errorf("warnings %v for a listed PID", s.warns)
	}
	if _, done, err := c.Poll(context.Background()); done || err != nil {
		t.Fatal(done, err)
	}
	m := byMetric(t, s.samples)
	if len(m) != 6 {
		t.Fatalf("%d metrics", len(m))
	}
	val(t, m[artifact.MetricDeviceMemoryUsedBytes], 50<<30, SourceNVMLv2)
	val(t, m[artifact.MetricDeviceEnergyMillijoules], 7_000_000, SourceNVMLEnergy)
	val(t, m[artifact.MetricDevicePowerMilliwatts], 500_000, SourceNVMLPower)
	val(t, m[artifact.MetricDeviceMemoryReservedBytes], 512<<20, SourceNVMLv2)
	val(t, m[artifact.MetricProcessGPUUsedBytes], 48<<30, SourceNVMLProcesses)
	for _, x := range m {
		if x.Identity.DeviceUUID == nil || *x.Identity.DeviceUUID != "GPU-aaaa" || x.Identity.GPUInstanceID != nil {
			t.Errorf("%s identity %+v", x.Metric, x.Identity)
		}
	}
}

func TestV1Fallback(t *testing.T) {
	f := gpuFake()
	f.Devices[0].Mem = gpu.Memory{TotalBytes: 80 << 30, UsedBytes: 51 << 30}
	f.Devices[0].NoV2 = true
	c, s, _ := setup(t, f, "")
	for range 2 {
		if _, _, err := c.Poll(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.warns) != 1 || !strings.Contains(s.warns[0], "v1") {
		t.Errorf("want one v1 warning, got %q", s.warns)
	}
	m := byMetric(t, s.samples[:6])
	used := m[artifact.MetricDeviceMemoryUsedBytes]
	val(t, used, 51<<30, SourceNVMLv1)
	if used.Detail == nil || !strings.Contains(*used.Detail, "includes driver-reserved") {
		t.Errorf("used detail %v", used.Detail)
	}
	res := m[artifact.MetricDeviceMemoryReservedBytes]
	if res.State != artifact.SampleMissing || res.ValueBytes != nil || res.Source != SourceNVMLv1 || res.Detail == nil {
		t.Errorf("reserved %+v", res)
	}
}

// A driver that has the v2 symbol but answers NOT_SUPPORTED or
// FUNCTION_NOT_FOUND for the device: each reading comes from v1 and says so.
func TestV2UnsupportedAtCallTimeFallsBackToV1(t *testing.T) {
	for _, code := range []string{"Not Supported", "Function Not Found"} {
		t.Run(code, func(t *testing.T) {
			f := gpuFake()
			f.Devices[0].V2Err = fmt.Errorf("nvmlDeviceGetMemoryInfo_v2: %w (%s)", gpu.ErrUnsupported, code)
			c, s, _ := setup(t, f, "GPU-aaaa")
			for range 2 {
				if _, done, err := c.Poll(context.Background()); done || err != nil {
					t.Fatal(done, err)
				}
			}
			if len(s.warns) != 1 || !strings.Contains(s.warns[0], "v1") || !strings.Contains(s.warns[0], code) {
				t.Errorf("want one v1 warning naming %q, got %q", code, s.warns)
			}
			for _, poll := range [][]artifact.TelemetrySample{s.samples[:6], s.samples[6:]} {
				m := byMetric(t, poll)
				used := m[artifact.MetricDeviceMemoryUsedBytes]
				val(t, used, 50<<30+512<<20, SourceNVMLv1) // v1's used includes the reserved 512 MiB
				if used.Detail == nil || !strings.Contains(*used.Detail, "includes driver-reserved") || !strings.Contains(*used.Detail, code) {
					t.Errorf("used detail %v", used.Detail)
				}
				res := m[artifact.MetricDeviceMemoryReservedBytes]
				if res.State != artifact.SampleMissing || res.Source != SourceNVMLv1 || res.Detail == nil {
					t.Errorf("reserved %+v", res)
				}
				val(t, m[artifact.MetricProcessGPUUsedBytes], 48<<30, SourceNVMLProcesses)
			}
		})
	}
}

// Any other error of the v2 call is the reading's error: v1 is not tried.
func TestV2ErrorIsMissing(t *testing.T) {
	f := gpuFake()
	f.Devices[0].V2Err = errors.New("nvmlDeviceGetMemoryInfo_v2: GPU is lost")
	c, s, _ := setup(t, f, "GPU-aaaa")
	if _, _, err := c.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	used := byMetric(t, s.samples)[artifact.MetricDeviceMemoryUsedBytes]
	if used.State != artifact.SampleMissing || used.Source != SourceNVMLv2 || used.Detail == nil || !strings.Contains(*used.Detail, "GPU is lost") {
		t.Errorf("used %+v", used)
	}
	if len(s.warns) != 0 {
		t.Errorf("warnings %q", s.warns)
	}
}

func TestMIG(t *testing.T) {
	f := gpuFake()
	f.Devices = append(f.Devices, &gpu.FakeDevice{
		UUIDValue: "MIG-bbbb",
		MIGInfo:   &gpu.MIGInfo{ParentUUID: "GPU-aaaa", GPUInstanceID: 2},
		Mem:       gpu.Memory{Version: 2, TotalBytes: 10 << 30, UsedBytes: 7 << 30, ReservedBytes: u64(1 << 20)},
		Procs:     []gpu.Process{{PID: 4242}},
	})
	c, s, _ := setup(t, f, "MIG-bbbb")
	if _, _, err := c.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	m := byMetric(t, s.samples)
	val(t, m[artifact.MetricInstanceMemoryUsedBytes], 7<<30, SourceNVMLv2)
	val(t, m[artifact.MetricInstanceMemoryReservedBytes], 1<<20, SourceNVMLv2)
	if _, ok := m[artifact.MetricDeviceMemoryUsedBytes]; ok {
		t.Error("device-wide metric written for a MIG instance")
	}
	pg := m[artifact.MetricProcessGPUUsedBytes]
	if pg.State != artifact.SampleMissing || pg.Detail == nil || !strings.Contains(*pg.Detail, "not available") {
		t.Errorf("process gpu %+v", pg)
	}
	id := m[artifact.MetricInstanceMemoryUsedBytes].Identity
	if id.DeviceUUID == nil || *id.DeviceUUID != "GPU-aaaa" || id.GPUInstanceID == nil || *id.GPUInstanceID != "MIG-bbbb" {
		t.Errorf("identity %+v", id)
	}
}

func TestReadErrorsAreMissing(t *testing.T) {
	f := gpuFake()
	c, s, p := setup(t, f, "GPU-aaaa")
	p.rssErr = errors.New("permission denied")
	f.Set(func() {
		f.Devices[0].MemErr = errors.New("nvml: GPU is lost")
		f.Devices[0].ProcsErr = errors.New("nvml: unknown error")
		f.Devices[0].EnergyErr = errors.New("nvml: GPU is lost")
		f.Devices[0].PowerErr = errors.New("nvml: GPU is lost")
	})
	if _, done, err := c.Poll(context.Background()); done || err != nil {
		t.Fatal(done, err)
	}
	m := byMetric(t, s.samples)
	if len(m) != 6 {
		t.Fatalf("%d metrics", len(m))
	}
	for _, x := range m {
		if x.State != artifact.SampleMissing || x.Detail == nil || *x.Detail == "" {
			t.Errorf("%s: %+v", x.Metric, x)
		}
	}
	if !strings.Contains(*m[artifact.MetricDeviceMemoryUsedBytes].Detail, "GPU is lost") {
		t.Errorf("detail %q", *m[artifact.MetricDeviceMemoryUsedBytes].Detail)
	}
	// Collection continues and recovers.
	p.rssErr = nil
	f.Set(func() {
		f.Devices[0].MemErr, f.Devices[0].ProcsErr, f.Devices[0].EnergyErr, f.Devices[0].PowerErr = nil, nil, nil, nil
	})
	s.samples = nil
	if _, _, err := c.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	val(t, byMetric(t, s.samples)[artifact.MetricDeviceMemoryUsedBytes], 50<<30, SourceNVMLv2)
	// A UUID read failure makes every GPU counter missing but keeps RSS.
	f.Set(func() { f.Devices[0].UUIDErr = errors.New("nvml: timeout") })
	s.samples = nil
	if _, done, _ := c.Poll(context.Background()); done {
		t.Fatal("UUID read error ended collection")
	}
	m = byMetric(t, s.samples)
	val(t, m[artifact.MetricProcessRSSBytes], 123456789, SourcePsutil)
	if x := m[artifact.MetricDeviceMemoryUsedBytes]; x.State != artifact.SampleMissing || !strings.Contains(*x.Detail, "UUID") {
		t.Errorf("%+v", x)
	}
}

func TestUUIDChange(t *testing.T) {
	f := gpuFake()
	c, s, _ := setup(t, f, "")
	f.Set(func() { f.Devices[0].UUIDValue = "GPU-cccc" })
	out, done, err := c.Poll(context.Background())
	if out != DeviceChanged || !done || err != nil {
		t.Fatal(out, done, err)
	}
	last := s.samples[len(s.samples)-1]
	if last.State != artifact.SampleInvalid || last.ValueBytes != nil || last.Metric != artifact.MetricDeviceMemoryUsedBytes ||
		!strings.Contains(*last.Detail, "GPU-aaaa") || !strings.Contains(*last.Detail, "GPU-cccc") {
		t.Errorf("last sample %+v", last)
	}
	if *last.Identity.DeviceUUID != "GPU-aaaa" {
		t.Error("identity must keep the original device")
	}
	n := 0
	for _, x := range s.samples {
		if x.State == artifact.SampleInvalid {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d invalid samples", n)
	}
}

func TestServerExit(t *testing.T) {
	f := gpuFake()
	c, s, p := setup(t, f, "")
	p.mu.Lock()
	p.running = false
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := c.Run(ctx)
	if out != ServerExited || err != nil {
		t.Fatal(out, err)
	}
	if len(s.samples) != 1 || s.samples[0].State != artifact.SampleInvalid || s.samples[0].Metric != artifact.MetricProcessRSSBytes ||
		!strings.Contains(*s.samples[0].Detail, "4242") {
		t.Errorf("samples %+v", s.samples)
	}
}

func TestStartCheckWarnings(t *testing.T) {
	f := gpuFake()
	f.Devices[0].Procs = []gpu.Process{{PID: 5000, UsedBytes: u64(1)}}
	p := &fakeProc{pid: 4242, start: 1, running: true, children: []int{4300, 5000}}
	var warns []string
	if err := f.Init(); err != nil {
		t.Fatal(err)
	}
	d, _ := f.DeviceByIndex(0)
	cfg := Config{RunID: "r", Interval: time.Second, Process: p, Device: d, Host: artifact.Host{Name: "h"},
		Sink: &artifact.Memory{}, Warn: func(m string) { warns = append(warns, m) }}
	if _, err := New(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "4242") || !strings.Contains(warns[0], "child PID 5000") {
		t.Errorf("warnings %q", warns)
	}
	p.children = nil
	warns = nil
	if _, err := New(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if len(warns) != 1 || strings.Contains(warns[0], "child") {
		t.Errorf("warnings %q", warns)
	}
	f.Set(func() { f.Devices[0].ProcsErr = errors.New("not supported") })
	warns = nil
	if _, err := New(context.Background(), cfg); err != nil || len(warns) != 1 || !strings.Contains(warns[0], "could not check") {
		t.Errorf("err %v warnings %q", err, warns)
	}
}

func TestConfigErrors(t *testing.T) {
	p := &fakeProc{pid: 1, start: 1, running: true}
	base := Config{RunID: "r", Interval: time.Second, Process: p, Sink: &artifact.Memory{}, Host: artifact.Host{Name: "h"}}
	cases := map[string]func(*Config){
		"no run":          func(c *Config) { c.RunID = "" },
		"tiny interval":   func(c *Config) { c.Interval = time.Microsecond },
		"neg duration":    func(c *Config) { c.Duration = -1 },
		"no process":      func(c *Config) { c.Process = nil },
		"group no rank":   func(c *Config) { c.GroupID, c.WorldSize = str("g"), i64(2) },
		"group no size":   func(c *Config) { c.GroupID, c.Rank = str("g"), i64(0) },
		"rank too big":    func(c *Config) { c.GroupID, c.Rank, c.WorldSize = str("g"), i64(2), i64(2) },
		"size w/o group":  func(c *Config) { c.WorldSize = i64(2) },
		"negative rank":   func(c *Config) { c.Rank = i64(-1) },
		"empty group":     func(c *Config) { c.GroupID, c.Rank, c.WorldSize = str(""), i64(0), i64(1) },
		"uuid unreadable": func(c *Config) { c.Device = badDevice{} },
	}
	for name, mut := range cases {
		cfg := base
		mut(&cfg)
		if _, err := New(context.Background(), cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	cfg := base
	cfg.GroupID, cfg.Rank, cfg.WorldSize, cfg.ReplicaID = str("tp"), i64(1), i64(2), str("r0")
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	id := c.Identity()
	if *id.GroupID != "tp" || *id.Rank != 1 || *id.WorldSize != 2 || *id.ReplicaID != "r0" || id.BootID != nil {
		t.Errorf("identity %+v", id)
	}
}

type badDevice struct{ gpu.Device }

func (badDevice) UUID() (string, error) { return "", errors.New("nvml: unknown") }

func TestRunDurationAndCancel(t *testing.T) {
	c, s, _ := setup(t, nil, "")
	c.cfg.Interval = 5 * time.Millisecond
	c.cfg.Duration = 60 * time.Millisecond
	out, err := c.Run(context.Background())
	if out != DurationElapsed || err != nil {
		t.Fatal(out, err)
	}
	if n := len(s.samples); n < 1 {
		t.Errorf("no sample before the duration ended")
	}
	c.cfg.Duration = 0
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(30*time.Millisecond, cancel)
	if out, err := c.Run(ctx); out != Stopped || err != nil {
		t.Fatal(out, err)
	}
	// Sink errors end the run.
	c.cfg.Sink = artifact.SinkFunc(func(artifact.Record) error { return errors.New("disk full") })
	if _, err := c.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("emit error: %v", err)
	}
}

package collect

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/scrape/gpu"
	"github.com/inferprobe/inferprobe/scrape/proc"
)

// Client-local samplers (profile --system-sampler).
const (
	SamplerAuto      = "auto"       // NVML device 0 when available, and the client's own RSS
	SamplerNone      = "none"       // no samples
	SamplerPsutil    = "psutil"     // the client's own RSS only
	SamplerNvidiaSMI = "nvidia-smi" // `nvidia-smi --query-gpu` for device 0, and the client's RSS
)

// ClientSampler samples the client host every interval until Stop.
type ClientSampler struct {
	kind      string
	sessionID string
	every     time.Duration
	sink      artifact.Sink
	self      *proc.Process
	dev       gpu.Device
	smi       string

	stop chan struct{}
	wg   sync.WaitGroup
	err  error
}

// NewClientSampler prepares the --system-sampler kind. auto falls back to RSS only when NVML
// is not available; psutil reads RSS only; nvidia-smi needs the nvidia-smi program (an error
// otherwise, which the CLI reports as an unusable setting); none returns nil.
func NewClientSampler(ctx context.Context, kind, sessionID string, every time.Duration, sink artifact.Sink) (*ClientSampler, error) {
	return newClientSampler(ctx, kind, sessionID, every, sink, gpu.Open)
}

// newClientSampler is NewClientSampler with open, which opens the NVML library that auto
// reads (gpu.Open, or a Fake in tests).
func newClientSampler(ctx context.Context, kind, sessionID string, every time.Duration, sink artifact.Sink, open func() (gpu.Library, error)) (*ClientSampler, error) {
	if every <= 0 {
		return nil, errors.New("the sample interval must be > 0")
	}
	s := &ClientSampler{kind: kind, sessionID: sessionID, every: every, sink: sink, stop: make(chan struct{})}
	switch kind {
	case SamplerNone:
		return nil, nil
	case SamplerAuto:
		if lib, err := open(); err == nil && lib.Init() == nil {
			if dev, err := lib.DeviceByIndex(0); err == nil {
				s.dev = dev
			}
		}
	case SamplerPsutil:
	case SamplerNvidiaSMI:
		p, err := exec.LookPath("nvidia-smi")
		if err != nil {
			return nil, errors.New("--system-sampler nvidia-smi: nvidia-smi is not on PATH")
		}
		s.smi = p
	default:
		return nil, fmt.Errorf("--system-sampler must be auto, none, psutil or nvidia-smi, not %q", kind)
	}
	self, err := proc.Open(ctx, os.Getpid())
	if err != nil {
		return nil, err
	}
	s.self = self
	return s, nil
}

// Start samples at once and then every interval, until Stop.
func (s *ClientSampler) Start(ctx context.Context) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(s.every)
		defer t.Stop()
		for {
			if err := s.sink.Write(s.sample(ctx)); err != nil && s.err == nil {
				s.err = err
			}
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Stop takes a last sample, stops, and returns the first write error.
func (s *ClientSampler) Stop(ctx context.Context) error {
	close(s.stop)
	s.wg.Wait()
	if err := s.sink.Write(s.sample(ctx)); err != nil && s.err == nil {
		s.err = err
	}
	if s.self != nil {
		_ = s.self.Close()
	}
	return s.err
}

func (s *ClientSampler) sample(ctx context.Context) *artifact.SystemSample {
	r := &artifact.SystemSample{
		SessionID: s.sessionID, TimestampNS: time.Now().UnixNano(),
		Sampler: "psutil", Metadata: map[string]any{}, ObservationScope: artifact.ScopeClientLocal,
	}
	if rss, err := s.self.RSSBytes(ctx); err == nil {
		r.ProcessRSSBytes = artifact.Ptr(int64(rss))
	} else {
		r.Metadata["rss_error"] = err.Error()
	}
	switch {
	case s.dev != nil:
		r.Sampler = "nvml"
		if uuid, err := s.dev.UUID(); err == nil {
			r.DeviceID = artifact.Ptr(uuid)
		}
		if m, err := s.dev.Memory(); err == nil {
			readNVMLMemory(r, m)
		} else {
			r.Metadata["device_error"] = err.Error()
		}
	case s.smi != "":
		r.Sampler = "nvidia-smi"
		s.readSMI(ctx, r)
	}
	return r
}

// readNVMLMemory fills the device memory fields from one NVML reading: free is NVML's own
// figure (from v2, total − used would count the driver-reserved bytes as free), and the
// source says which call answered (v1's used includes driver-reserved memory; why v1 is in
// metadata). A value over the int64 range stays null.
func readNVMLMemory(r *artifact.SystemSample, m gpu.Memory) {
	asInt := func(v uint64) *int64 {
		if v > math.MaxInt64 {
			return nil
		}
		return artifact.Ptr(int64(v))
	}
	r.DeviceUsedBytes, r.DeviceFreeBytes, r.DeviceTotalBytes = asInt(m.UsedBytes), asInt(m.FreeBytes), asInt(m.TotalBytes)
	r.DeviceMemorySource = artifact.Ptr(SourceNVMLv2)
	if m.Version != 2 {
		r.DeviceMemorySource = artifact.Ptr(SourceNVMLv1)
		r.Metadata["device_memory_v1_reason"] = m.V1Reason
	}
}

// readSMI fills the device fields from one `nvidia-smi --query-gpu` line of device 0
// (MiB values, as nvidia-smi reports them); a failure is noted in metadata, values stay null.
func (s *ClientSampler) readSMI(ctx context.Context, r *artifact.SystemSample) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, s.smi, "--query-gpu=uuid,name,memory.used,memory.free,memory.total,utilization.gpu",
		"--format=csv,noheader,nounits", "-i", "0").Output()
	if err != nil {
		r.Metadata["device_error"] = err.Error()
		return
	}
	f := strings.Split(strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0]), ",")
	if len(f) != 6 {
		r.Metadata["device_error"] = "unexpected nvidia-smi output"
		return
	}
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	r.DeviceID, r.DeviceName = artifact.Ptr(f[0]), artifact.Ptr(f[1])
	mib := func(v string) *int64 {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil
		}
		return artifact.Ptr(n << 20)
	}
	r.DeviceUsedBytes, r.DeviceFreeBytes, r.DeviceTotalBytes = mib(f[2]), mib(f[3]), mib(f[4])
	r.DeviceMemorySource = artifact.Ptr(SamplerNvidiaSMI)
	if u, err := strconv.ParseFloat(f[5], 64); err == nil {
		r.GPUUtilizationPercent = &u
	}
}

package analyze

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/join"
)

// sessionLine is the header's session line, "" for a completed session: the final status
// (interrupted, incomplete), or — when the artifact ends on the opening "running" record, as
// after kill -9 — that the session never closed.
func sessionLine(s Summary) string {
	switch {
	case s.SessionStatus == nil || *s.SessionStatus == "completed":
		return ""
	case !s.SessionClosed:
		return "Session status: never closed (no final infer.session record: the producer was killed, or is still running)"
	}
	return "Session status: " + *s.SessionStatus
}

// insufficient is the marker after a case's percentile of metric at level ("p50") over
// successful requests when it has fewer values than the sufficiency rule needs:
// " [insufficient n=12<20]"; "" when sufficient or without an estimate.
func (c *CaseReport) insufficient(metric, level string) string {
	m, ok := c.Latency.Metrics[metric]
	if !ok {
		return ""
	}
	e, ok := m.Successful[level]
	if !ok || e.Sufficient || e.ValueMs == nil {
		return ""
	}
	return fmt.Sprintf(" [insufficient n=%d<%d]", e.N, e.NMin)
}

// memoryWords names the server memory metrics the memory line shows, in its order.
var memoryWords = []struct{ metric, words string }{
	{artifact.MetricProcessRSSBytes, "process RSS"},
	{artifact.MetricProcessGPUUsedBytes, "process GPU used"},
	{artifact.MetricDeviceMemoryUsedBytes, "device used"},
	{artifact.MetricDeviceMemoryReservedBytes, "device reserved"},
	{artifact.MetricAllocatorAllocatedBytes, "allocator allocated"},
	{artifact.MetricAllocatorReservedBytes, "allocator reserved"},
	{artifact.MetricEngineCacheOccupiedBytes, "engine cache"},
	{artifact.MetricInstanceMemoryUsedBytes, "instance used"},
	{artifact.MetricInstanceMemoryReservedBytes, "instance reserved"},
}

// memoryLine is a case's memory line, "" with nothing observed:
//
//	memory: client-local peak RSS 70.0 MiB, device used 1.00 GiB; server max process RSS 2.41 GiB (21 samples), device used 70.1 GiB (21 samples)
//
// A server group prints each rank ("server rank 0 (pid 7): process RSS …"). Sizes are binary
// (KiB, MiB, GiB); server values are the highest recorded in the counted window.
func memoryLine(m Memory) string {
	var parts []string
	var client []string
	if m.PeakProcessRSSBytes != nil {
		client = append(client, "peak RSS "+bytesText(*m.PeakProcessRSSBytes))
	}
	if m.PeakDeviceUsedBytes != nil {
		client = append(client, "device used "+bytesText(*m.PeakDeviceUsedBytes))
	}
	if len(client) > 0 {
		parts = append(parts, "client-local "+strings.Join(client, ", "))
	}
	if s := observationsText(m.ServerObservations); s != "" {
		parts = append(parts, "server max "+s)
	}
	for _, mem := range m.ServerMembers {
		obs := make(map[string]any, len(mem.Observations))
		for k, v := range mem.Observations {
			obs[k] = v
		}
		if s := observationsText(obs); s != "" {
			parts = append(parts, fmt.Sprintf("server rank %d (pid %d) max %s", mem.Rank, mem.PID, s))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "  memory: " + strings.Join(parts, "; ")
}

// observationsText lists the server observations with a recorded maximum, in memoryWords
// order, then any other metric by name.
func observationsText(obs map[string]any) string {
	var out []string
	seen := map[string]bool{}
	add := func(metric, words string) {
		seen[metric] = true
		o, ok := obs[metric].(*join.Observation)
		if !ok || o == nil || o.MaximumRecordedBytes == nil {
			return
		}
		out = append(out, fmt.Sprintf("%s %s (%d %s)", words, bytesText(*o.MaximumRecordedBytes), o.ValidSamples, Plural(o.ValidSamples, "sample", "samples")))
	}
	for _, w := range memoryWords {
		add(w.metric, w.words)
	}
	var rest []string
	for k := range obs {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		add(k, strings.ReplaceAll(strings.TrimSuffix(k, "_bytes"), "_", " "))
	}
	return strings.Join(out, ", ")
}

// bytesText formats a byte count in binary units with three significant digits: "512 B",
// "70.0 MiB", "1.00 GiB", "123 TiB".
func bytesText(n int64) string {
	if n > -1024 && n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, unit := float64(n), ""
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"} {
		v, unit = v/1024, u
		if math.Abs(v) < 1024 {
			break
		}
	}
	digits := 2
	switch a := math.Abs(v); {
	case a >= 100:
		digits = 0
	case a >= 10:
		digits = 1
	}
	return strconv.FormatFloat(v, 'f', digits, 64) + " " + unit
}

// energyLine is a case's energy line, "" when no server telemetry was joined:
//
//	energy: 1,234 J over 60.0 s (mean 20.6 W, 2 GPUs), 0.0412 J/output token, 1.23 J/request
//	energy: unknown (energy_counter_reset)
func energyLine(e Energy) string {
	switch e.Status {
	case join.EnergyNotJoined, "":
		return ""
	case join.EnergyObserved:
	default:
		reason := ""
		if e.Reason != nil {
			reason = " (" + *e.Reason + ")"
		}
		return "  energy: " + e.Status + reason
	}
	gpus := ""
	if e.Devices > 1 {
		gpus = fmt.Sprintf(", %d GPUs", e.Devices)
	}
	line := fmt.Sprintf("  energy: %s J over %s s (mean %s W%s)", sig(*e.Joules), sig(*e.WindowSeconds), sig(*e.MeanPowerW), gpus)
	if e.JoulesPerOutputToken != nil {
		line += fmt.Sprintf(", %s J/output token", sig(*e.JoulesPerOutputToken))
	}
	if e.JoulesPerRequest != nil {
		line += fmt.Sprintf(", %s J/request", sig(*e.JoulesPerRequest))
	}
	return line
}

// costLine is a case's cost line, "" without a cost rate:
//
//	cost: $4.00/h (2 GPUs × $2.00/h): $1.85 per million output tokens, $0.62 per million total tokens
func costLine(c *Cost) string {
	if c == nil || c.USDPerHour == nil {
		return ""
	}
	rate := fmt.Sprintf("$%s/h", sig(*c.USDPerHour))
	if c.Basis == "per_gpu" && c.GPUs != nil && c.USDPerGPUHour != nil {
		rate += fmt.Sprintf(" (%d %s × $%s/h)", *c.GPUs, Plural(*c.GPUs, "GPU", "GPUs"), sig(*c.USDPerGPUHour))
	}
	if c.USDPerMillionOutputTokens == nil {
		reason := "no throughput"
		if c.Reason != nil {
			reason = *c.Reason
		}
		return fmt.Sprintf("  cost: %s: %s", rate, reason)
	}
	line := fmt.Sprintf("  cost: %s: $%s per million output tokens", rate, sig(*c.USDPerMillionOutputTokens))
	if c.USDPerMillionTotalTokens != nil {
		line += fmt.Sprintf(", $%s per million total tokens", sig(*c.USDPerMillionTotalTokens))
	}
	return line
}

// sig writes v with three significant digits (at least), without an exponent for the
// magnitudes reports show.
func sig(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	digits := 2 - int(math.Floor(math.Log10(a)))
	return strconv.FormatFloat(v, 'f', min(digits, 12), 64)
}

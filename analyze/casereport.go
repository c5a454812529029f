package analyze

import (
	"encoding/json"

	"github.com/inferprobe/inferprobe/artifact"
)

// Cache is a case's cache block, from its infer.cache_state record; an artifact without one
// reads as requested "unspecified", verified "unverified", run_kind null.
type Cache struct {
	Requested string               `json:"requested"`
	Reset     *artifact.CacheReset `json:"reset"`
	Verified  string               `json:"verified"`
	Reason    string               `json:"reason"`
	RunKind   *string              `json:"run_kind"`
}

// ServerCoverage says whether server telemetry observed a case's window.
type ServerCoverage struct {
	Status          string    `json:"status"`
	Reason          *string   `json:"reason"`
	CountedWindowNs *[2]int64 `json:"counted_window_ns"`
}

// Memory is a case's memory block: the highest client-local device memory and process RSS
// (bytes) sampled during the case (infer.system_sample records, observation_scope
// client_local — never a server claim), and server observations (empty until server
// telemetry is joined; coverage not_joined).
type Memory struct {
	ObservationScope    string         `json:"observation_scope"`
	PeakDeviceUsedBytes *int64         `json:"peak_device_used_bytes"`
	PeakProcessRSSBytes *int64         `json:"peak_process_rss_bytes"`
	ServerObservations  map[string]any `json:"server_observations"`
	ServerCoverage      ServerCoverage `json:"server_coverage"`
	// ServerMembers lists a server group's ranks (groups only; server_observations then
	// stays empty and values of different members are never added).
	ServerMembers []ServerMember `json:"server_members,omitempty"`
}

// CaseReport is one case of the report. SuccessfulRequests counts its successful requests
// (population.successful). SLO is present only when a policy was given; Cost is null without
// a cost rate (Options.Cost).
type CaseReport struct {
	SuccessfulRequests int                 `json:"successful_requests"`
	Population         Population          `json:"population"`
	Intervals          Intervals           `json:"intervals"`
	Throughput         Throughput          `json:"throughput"`
	LatencyMs          map[string]*float64 `json:"latency_ms"`
	Latency            LatencyBlock        `json:"latency"`
	Streaming          Streaming           `json:"streaming"`
	Tokens             Tokens              `json:"tokens"`
	Lengths            Lengths             `json:"lengths"`
	Arrivals           Arrivals            `json:"arrivals"`
	Prompts            Prompts             `json:"prompts"`
	Cache              Cache               `json:"cache"`
	Memory             Memory              `json:"memory"`
	Client             ClientAudit         `json:"client"`
	GPU                GPU                 `json:"gpu"`
	// Energy is the GPU energy over the case window (server telemetry with the GPU's energy
	// counter); Cost prices its tokens (null without a cost rate, analyze --cost-per-hour).
	Energy Energy      `json:"energy"`
	Cost   *Cost       `json:"cost"`
	SLO    *Evaluation `json:"slo,omitempty"`
}

// caseInput is what a case's populations and intervals are computed from: its measured
// requests and phase window, and the workload's seed, measurement limits and the case's
// arrival spec when the artifact recorded a workload.
func caseInput(in *Input, id string, w *artifact.PhaseWindow, opts Options) CaseInput {
	wl := in.Artifact.Workload
	c := CaseInput{
		CaseID:           id,
		Requests:         in.Cases[id],
		Window:           w,
		WorkloadRecorded: wl != nil,
		Scheduler:        opts.Scheduler,
		ServerSource:     opts.Server != nil,
	}
	if wl != nil {
		c.Seed = wl.Seed
		c.Measurement = &Measurement{RequestCount: wl.Measurement.RequestCount, DurationSeconds: wl.Measurement.DurationSeconds}
		for k := range wl.Cases {
			if wc := &wl.Cases[k]; wc.CaseID == id {
				c.Arrival = fromArrival(wc.Arrival)
				if sh := wl.Shard; sh != nil && sh.Shards > 1 {
					c.slice = &shardSlice{shard: sh.Shard, shards: sh.Shards}
					if wc.Concurrency != nil {
						c.slice.concurrency = *wc.Concurrency
					}
				}
			}
		}
	}
	return c
}

// caseReport computes one case's blocks; withServer says whether spans were joined (the
// latency block then has the server metrics).
func caseReport(in CaseInput, rule Rule, policy *Policy, source string, cache *artifact.CacheState, samples []sample, withServer bool) *CaseReport {
	pop, iv := Populate(in)
	c := &CaseReport{
		SuccessfulRequests: pop.Successful,
		Population:         pop,
		Intervals:          iv,
		Throughput:         ThroughputOf(in.Requests, iv.Rate),
		LatencyMs:          LegacyLatency(in.Requests),
		Latency:            LatencyOf(in.Requests, rule, withServer),
		Streaming:          StreamingOf(in.Requests),
		Arrivals:           ArrivalsOf(in.Requests, in.Window),
		Prompts:            PromptsOf(in.Requests, in.Window),
		Cache:              cacheBlock(cache),
		Memory:             memoryBlock(in.Requests, iv, samples),
		Client:             ClientAuditOf(in.Requests, in.Window),
		Energy:             energyBlock(),
	}
	c.Tokens, c.Lengths = TokensOf(in.Requests)
	if policy != nil {
		c.SLO = Evaluate(policy, source, in.Requests, iv.Rate, &pop)
		c.SLO.RealizedOfferedRatePerSecond = iv.RealizedOfferedRatePerSecond
	}
	return c
}

// joinServer sets the request's server-evidence fields from server by x_request_id (a
// dropped request was never sent, so it joins nothing); without evidence they are cleared.
func joinServer(r *Request, server *ServerEvidence) {
	r.Span, r.SpanMissingReason, r.ServerAdmitted = nil, "", false
	if server == nil || r.XRequestID == nil || r.Status == StatusDropped {
		return
	}
	id := *r.XRequestID
	if attrs, ok := server.Spans[id]; ok {
		r.Span = attrs
		r.ServerAdmitted = true
	}
	if reason, ok := server.Quarantined[id]; ok {
		r.Span = nil
		r.SpanMissingReason = reason
		r.ServerAdmitted = true
	}
	if server.Admitted[id] {
		r.ServerAdmitted = true
	}
}

func fromArrival(a artifact.ArrivalSpec) *ArrivalSpec {
	out := &ArrivalSpec{Mode: a.Mode, RatePerSecond: a.RatePerSecond, BurstSize: a.BurstSize, BurstIntervalSeconds: a.BurstIntervalSeconds}
	if a.Trace != nil {
		out.TraceArrivals = i64Ptr(a.Trace.Arrivals)
	}
	return out
}

func cacheBlock(c *artifact.CacheState) Cache {
	if c == nil {
		return Cache{Requested: "unspecified", Verified: "unverified", Reason: "the artifact does not record a cache state"}
	}
	out := Cache{Requested: c.Requested, Reset: c.Reset, Verified: c.Verified, Reason: c.Reason}
	if c.RunKind != "" {
		out.RunKind = strPtr(c.RunKind)
	}
	return out
}

// sample is one client-local infer.system_sample reading.
type sample struct {
	at              int64
	deviceUsed, rss *int64
}

// systemSamples decodes the artifact's infer.system_sample records; a malformed one is
// skipped (client-local telemetry is best effort).
func systemSamples(others []artifact.Raw) []sample {
	var out []sample
	for i := range others {
		if others[i].Kind.EventType != artifact.EventSystemSample {
			continue
		}
		var s struct {
			TimestampNs     *int64 `json:"timestamp_ns"`
			DeviceUsedBytes *int64 `json:"device_used_bytes"`
			ProcessRSSBytes *int64 `json:"process_rss_bytes"`
		}
		if json.Unmarshal(others[i].JSON, &s) != nil || s.TimestampNs == nil {
			continue
		}
		out = append(out, sample{at: *s.TimestampNs, deviceUsed: s.DeviceUsedBytes, rss: s.ProcessRSSBytes})
	}
	return out
}

// memoryBlock takes the peaks of the samples inside the case: its measured span, or without
// one the span of its successful requests.
func memoryBlock(requests []Request, iv Intervals, samples []sample) Memory {
	m := Memory{
		ObservationScope:   "client_local",
		ServerObservations: map[string]any{},
		ServerCoverage:     ServerCoverage{Status: "not_joined", Reason: strPtr("no server telemetry was supplied")},
	}
	var lo, hi int64
	found := false
	if iv.MeasuredSpan != nil {
		lo, hi, found = iv.MeasuredSpan.StartedAtNs, iv.MeasuredSpan.EndedAtNs, true
	} else {
		lo, hi, found = startEndSpan(requests, true)
	}
	if !found {
		return m
	}
	for _, s := range samples {
		if s.at < lo || s.at > hi {
			continue
		}
		if s.deviceUsed != nil && (m.PeakDeviceUsedBytes == nil || *s.deviceUsed > *m.PeakDeviceUsedBytes) {
			m.PeakDeviceUsedBytes = i64Ptr(*s.deviceUsed)
		}
		if s.rss != nil && (m.PeakProcessRSSBytes == nil || *s.rss > *m.PeakProcessRSSBytes) {
			m.PeakProcessRSSBytes = i64Ptr(*s.rss)
		}
	}
	return m
}

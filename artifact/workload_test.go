package artifact

import (
	"encoding/json"
	"testing"
)

func TestTrafficDigest(t *testing.T) {
	base := sampleWorkload()
	d0 := base.WorkloadDigest
	if len(d0) != 64 {
		t.Fatalf("digest %q", d0)
	}
	// Excluded: endpoint-side settings, timeouts, drain timeout, reset URL,
	// trace source, chat template, session.
	same := sampleWorkload()
	same.SessionID = "other"
	same.Measurement.TimeoutSeconds = 5
	same.Measurement.DrainTimeoutSeconds = 1
	same.Cache.ResetURL = nil
	same.ChatTemplate.ClientTemplateDigest = Ptr("abc")
	same.Decoding.ExtraBody = json.RawMessage(`{"ignore_eos":true,"temperature":0.0}`) // 0 and 0.0 are one value
	if d, _ := same.TrafficDigest(); d != d0 {
		t.Errorf("excluded fields changed the digest")
	}
	// Included: each of these changes it.
	changes := map[string]func(*Workload){
		"seed":          func(w *Workload) { w.Seed = 43 },
		"rate":          func(w *Workload) { w.Cases[1].Arrival.RatePerSecond = Ptr(4.0) },
		"max_in_flight": func(w *Workload) { w.Measurement.MaxInFlight = Ptr(int64(64)) },
		"overflow":      func(w *Workload) { w.Measurement.Overflow = Ptr("drop") },
		"warmup":        func(w *Workload) { w.Warmup.Requests = 5 },
		"tokenizer":     func(w *Workload) { w.Tokenizer.Name = Ptr("cl100k_base") },
		"cache":         func(w *Workload) { w.Cache.Requested = "unspecified" },
		"extra_body":    func(w *Workload) { w.Decoding.ExtraBody = json.RawMessage(`{"temperature":0.5,"ignore_eos":true}`) },
		"prompts":       func(w *Workload) { w.Prompts.PrefixGroups = Ptr(int64(2)) },
		"count":         func(w *Workload) { w.Measurement.RequestCount = Ptr(int64(201)) },
	}
	for name, change := range changes {
		w := sampleWorkload()
		change(&w)
		if d, _ := w.TrafficDigest(); d == d0 {
			t.Errorf("changing %s kept the digest", name)
		}
	}
	// A closed-loop-only workload ignores the open-loop shaping settings.
	closed := sampleWorkload()
	closed.Cases = closed.Cases[:1]
	dc, _ := closed.TrafficDigest()
	closed.Measurement.MaxInFlight, closed.Measurement.Overflow = Ptr(int64(1)), Ptr("drop")
	if d, _ := closed.TrafficDigest(); d != dc {
		t.Errorf("closed loop digest depends on max_in_flight/overflow")
	}
	// A replay trace counts by its offsets, not where they were read.
	replay := sampleWorkload()
	replay.Cases[1].Arrival = ArrivalSpec{Mode: "replay", Trace: &ArrivalTrace{Source: "offset_ms trace", Arrivals: 3, Digest: "ab"}}
	dr, _ := replay.TrafficDigest()
	replay.Cases[1].Arrival.Trace.Source = "inferprobe artifact"
	replay.Cases[1].Arrival.Trace.CaseID = Ptr("c1")
	if d, _ := replay.TrafficDigest(); d != dr {
		t.Errorf("replay source changed the digest")
	}
}

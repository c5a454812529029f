// Package vllm scrapes a vLLM server's Prometheus /metrics around and during
// the phases of a run and explains each case from them (stormlog.md §4.1–§4.3;
// vllm.md §3).
//
// Scraping: a Scraper GETs the metrics (API key only to the endpoint's own
// origin, redirects never followed, environment proxies ignored), checks the
// Limits (8 MiB, 20,000 series, 65,536-character lines), parses the text with
// prometheus/common expfmt (UTF-8 name validation, for vLLM's "vllm:" names)
// and returns an infer.vllm_scrape v1 artifact.VLLMScrape stamped on the client
// clock. A PhaseSampler hooks the scraper to a run's phases (phase_start,
// interval, phase_end scrapes); failed scrapes are recorded and the run goes
// on.
//
// Catalogue: the families vLLM 0.30.0 exposes, by report field, with the
// retired names mapped to their successors (Catalogue, RetiredNames,
// Discover).
//
// Deltas: CaseTelemetry differences a case's measured-phase boundary scrapes
// per engine label (engines are never summed): counters and histograms per
// extra label set, gauges over every scrape of the window, and derived rates,
// prefix-cache hit ratio, KV-cache occupancy and MFU state. Every delta that
// cannot be trusted is unresolved with its reason, never 0. Telemetry builds
// the report's telemetry.vllm block and RenderText its text lines.
//
// Everything here is engine-aggregate: a scrape describes every request the
// engine served, from every client, and attributes no GPU time to a request.
package vllm

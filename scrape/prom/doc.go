// Package prom scrapes an inference server's Prometheus /metrics around and during
// the phases of a run; it is the producer of infer.vllm_scrape records.
//
// Scraping: a Scraper GETs the metrics (API key only to the endpoint's own
// origin, redirects never followed, environment proxies ignored), checks the
// Limits (8 MiB, 20,000 series, 65,536-character lines), parses the text with
// prometheus/common expfmt (UTF-8 name validation, for vLLM's "vllm:" names;
// whitespace read as the Prometheus server's scraper reads it, see Parse)
// and returns an infer.vllm_scrape v1 artifact.MetricsScrape stamped on the client
// clock, with its discovery against the catalogue (engine.Discover). A
// PhaseSampler hooks the scraper to a run's phases (phase_start, interval,
// phase_end scrapes) and tallies them (engine.Tally); failed scrapes are
// recorded and the run goes on. Scraper.Capabilities turns the tally into the
// run's infer.capabilities record of component vllm.metrics.
//
// The deltas and the report's telemetry.vllm block are computed from the
// recorded scrapes by package analyze. Everything here is engine-aggregate: a
// scrape describes every request the engine served, from every client, and
// attributes no GPU time to a request.
package prom

// Package engine holds the catalogues of the Prometheus families inference engines
// expose on /metrics (today vLLM's, in vllm.go), shared by the scraper, which stamps each scrape with
// its discovery (Discover), and by the analysis, which names and explains
// each field from it (Lookup, Resolve, ClassifyName).
//
// The catalogue lists, for VerifiedVersion, every family by its report field
// (Entry: kind, subsystem, unit, meaning, extra labels, the server setting it
// needs), the names vLLM retired with their successors (Retired), and the
// optional subsystems known by prefix only. A Tally folds a run's scrapes
// into counts and the union of their discoveries without keeping them.
//
// It depends on package artifact and the standard library only.
package engine

// Package artifact defines inferprobe's records and where they go: one Go type
// per record (event_type + schema_version) — every record a producer emits is
// one of them —, the Sink interface that every consumer of records implements,
// the one Fanout that hands each record to every sink, the durable
// single-goroutine Writer of the JSONL artifact (the first sink of every run),
// and a streaming reader. Transient records (RequestSent, RunJudgement) reach
// live sinks only; the Writer skips them. The client metric definitions (TTFT,
// e2e, TPOT and their from-intended forms) are computed here, on the request
// record (Request.ClientMetric), for every reader.
//
// The record names and fields are those of Stormlog's `infer` JSONL artifact,
// whose rules are:
//
//   - one JSON object per line, discriminated by "event_type" and
//     "schema_version" (the same event_type can mean different records in
//     different versions: infer.request v1 is a client request, v2 a
//     correlation-model record);
//   - integers are written as JSON integers, never with a decimal point or an
//     exponent (nanosecond timestamps exceed float64 precision), and the reader
//     rejects integer fields spelled as floats;
//   - an unknown or unavailable value is null, never 0 (nullable fields are Go
//     pointers);
//   - non-finite sample values are the strings "NaN", "+Inf" and "-Inf" (see
//     Float);
//   - the first line is an infer.session record with status "running", the
//     last one an infer.session with "completed", "interrupted" or
//     "incomplete";
//   - a process killed at any moment (kill -9) leaves every complete line
//     parseable; a cut last line is reported by the reader as Truncated, not
//     as an error.
//
// Digests (workload_digest, SLO digest) are SHA-256 over Canonical JSON,
// written as 64 lowercase hex digits without a prefix, as upstream writes them.
package artifact

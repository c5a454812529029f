// Package artifact defines inferprobe's JSONL artifact: one Go type per record
// (event_type + schema_version), a durable single-goroutine writer, and a
// streaming reader.
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

// Package analyze turns the measured records of an inferprobe artifact into the numbers people
// decide on, each with who was counted, over which interval, and with how much confidence:
//
//   - quantiles by linear interpolation at rank p·(n−1), each with a distribution-free
//     order-statistic confidence interval (Le Boudec, Performance Evaluation of Computer and
//     Communication Systems, Theorem 2.1), a sample count and a sufficiency verdict
//     (stats.go, latency.go);
//   - SLO policies given as --slo KEY:MS flags or as a stormlog.infer.slo v1 document, the
//     per-request judgement against them, and per-case attainment and goodput as lower and
//     upper bounds over every offered request (slo.go, sloparse.go, judge.go); client
//     metrics are (*artifact.Request).ClientMetric's, server ones the joined span's;
//   - per-case populations (every status in exactly one bucket), hard cohort checks and soft
//     notes (population.go), and the interval every rate divides by (intervals.go);
//   - the report's telemetry.vllm block: per-engine deltas of a case's /metrics scrapes over
//     its measured phase, never summed across engines and never read as 0 when they cannot
//     be trusted (vllmphase.go, vllmdelta.go, vllmderive.go), and the vLLM spans joined to
//     the requests (vllm.go, join.Spans).
//
// Requests are read once, into Request (the artifact.Request record with the server evidence
// joined to it); ReadInput streams a file into that view without keeping the decoded records.
//
// Every unavailable figure is nil (JSON null), never 0, and no figure is ever NaN or ±Inf.
package analyze

// Package analyze turns the measured records of an inferprobe artifact into the numbers people
// decide on, each with who was counted, over which interval, and with how much confidence.
//
// The contract is Stormlog's "Analyze an artifact", "Metric boundaries" and "Inference SLOs
// and goodput" rules (shared/research/stormlog.md §2.2, §2.6, §3 and §5 items 27–67):
//
//   - quantiles by linear interpolation at rank p·(n−1), each with a distribution-free
//     order-statistic confidence interval (Le Boudec, Performance Evaluation of Computer and
//     Communication Systems, Theorem 2.1), a sample count and a sufficiency verdict
//     (stats.go, latency.go);
//   - SLO policies given as --slo KEY:MS flags or as a stormlog.infer.slo v1 document, the
//     per-request judgement against them, and per-case attainment and goodput as lower and
//     upper bounds over every offered request (slo.go, judge.go);
//   - per-case populations (every status in exactly one bucket), hard cohort checks and soft
//     notes, and the interval every rate divides by (population.go).
//
// Every unavailable figure is nil (JSON null), never 0, and no figure is ever NaN or ±Inf.
package analyze

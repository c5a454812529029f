// Package compare decides between two runs of one workload: `inferprobe compare BASE
// CANDIDATE` (Options → Run → Result → RenderText, WriteJSON, WriteHTML). Each run is read
// as `inferprobe analyze` reads it (one artifact, several, or a directory of shards), its
// cases are matched by id, and the two workloads must have one digest (or the mismatch is
// allowed and named). Different models, APIs, engines and SLO policies are named.
//
// For every case and per-request metric (the client metrics, their _from_intended forms,
// e2e per output token, and the server metrics of joined spans), over the successful
// requests:
//
//   - each quantile's difference and relative difference with a distribution-free interval
//     made of order statistics (QuantileDiff: each run's quantile interval at 1 − α/2, the
//     intervals combined by Bonferroni; no bootstrap, which would be costly at a million
//     requests and unreliable for the high quantiles of small samples);
//   - a rank test for a shift (BrunnerMunzel: like Mann–Whitney it uses ranks only, but it
//     tests P(B < C) = ½ without assuming the two distributions have one shape or spread —
//     two engine builds seldom change only a location — and it stays valid when the spreads
//     differ, where Mann–Whitney's level does not hold);
//
// and for the shares of offered requests that succeeded and that met the SLO, the
// difference with Newcombe's hybrid score interval (widened over unknown outcomes).
// Every test of a comparison belongs to one family: Holm's step-down adjustment keeps the
// chance of any false "better" or "worse" at most α = 1 − confidence. A metric's verdict is
// its rank test's; each quantile and share has its own. A quantile whose runs are too small
// for its interval gets no verdict ("insufficient sample"), never a guess.
//
// Rates (throughput, goodput, energy and cost per token) are one measurement per run: they
// are shown side by side without an interval or verdict.
//
// Regression gates (Gate, --fail-on) test one-sided hypotheses — "the candidate's p99 TTFT
// exceeds the base's by more than 5%" — with the same order-statistic construction, Holm-
// adjusted over the gates; Result.Fired makes the command exit 3. A gate that cannot be
// tested (too few requests, a metric a run lacks) says so and does not fire.
//
// The tests take each run's requests as independent draws. Requests of one run share its
// queue, so their latencies are correlated in time; the comparison is then less certain
// than it states. Compare runs long enough to span many queue cycles, and repeat a
// borderline comparison.
package compare

// Package capacity finds the largest load a server sustains within an SLO: a capacity
// search over a control variable (closed-loop concurrency or open-loop rate).
//
// A probe runs the workload at one value and answers each Test statistically (Judge): a
// percentile criterion passes when the upper order-statistic confidence bound of its
// failure-penalised quantile is within its threshold and fails when the lower bound is
// beyond it; an attainment target passes when the Clopper-Pearson lower bound of the share
// of offered requests that met reaches it and fails when the upper bound falls short.
// Otherwise the probe is extended — run again, fresh, with twice the requests — until it is
// decided or its request budget is spent, and then it is undecided, never guessed. The
// nominal confidence is split over the looks and tests of a probe (Plan), so stopping at
// the first decisive look keeps each probe's error below 1 − confidence.
//
// Search brackets the capacity by geometric growth, then refines the bracket at the root of
// an isotonic fit of every probe's margins, until the bracket is within the tolerance with
// both ends decided. It runs against a Prober; RunProber is the one that sends real load
// through the run pipeline, one artifact per probe run. The result is the infer.search
// record (artifact.Search).
package capacity

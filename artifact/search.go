package artifact

// EventSearch is the event type of a capacity search's record, SearchSchemaVersion its
// version, and KindSearch the pair.
const (
	EventSearch         = "infer.search"
	SearchSchemaVersion = 1
)

// KindSearch is the kind of the infer.search v1 record.
var KindSearch = Kind{EventSearch, SearchSchemaVersion}

// Control variables of a search (Search.Over).
const (
	OverConcurrency = "concurrency" // closed loop: workers, an integer
	OverRate        = "rate"        // open loop: arrivals per second
)

// Search outcomes (Search.Status).
const (
	// SearchFound: a passing value and a failing one bracket the capacity within the
	// tolerance, both decided.
	SearchFound = "found"
	// SearchAboveRange: the range's maximum passed; the capacity is at least Max.
	SearchAboveRange = "above_range"
	// SearchNone: no value of the range was shown to meet the SLO (the minimum failed, or
	// nothing passed).
	SearchNone = "none"
	// SearchUndecided: undecided probes or the probe budget left a bracket wider than the
	// tolerance; Capacity, when set, is a value shown to pass (a lower bound).
	SearchUndecided = "undecided"
	// SearchInterrupted: the search was cut short (Ctrl+C, SIGTERM) before it ended;
	// Capacity, when set, is a value shown to pass (a lower bound), the bracket what was
	// learnt so far, and the probe that was running is recorded undecided.
	SearchInterrupted = "interrupted"
)

// Boundary shapes (Search.Boundary).
const (
	BoundarySmooth      = "smooth"       // the binding criterion's bound moves gradually across the bracket
	BoundaryCliff       = "cliff"        // it jumps by at least half its threshold within the bracket
	BoundaryNonMonotone = "non_monotone" // a higher value passed after a lower one failed
	BoundaryUnknown     = "unknown"      // no bracket (none, above_range)
)

// Probe decisions (SearchProbe.Decision, SearchTest.Decision).
const (
	DecisionPass          = "pass"
	DecisionFail          = "fail"
	DecisionExtend        = "extend" // a test only: not decided yet at this size
	DecisionUndecided     = "undecided"
	DecisionUnsustainable = "unsustainable" // rate mode: the backlog guard stopped the probe
)

// Search is the infer.search v1 record: one capacity search's result, written alone to the
// search artifact (DIR/search.jsonl), beside one ordinary run artifact per probe.
//
// SearchID names the search (the base run id). Over is "concurrency" or "rate"; Min, Max
// and every value are in its unit (workers, or requests per second). Tolerance is relative
// (0.1: the bracket's width is at most 10 % of its lower end; in concurrency mode adjacent
// integers also end the search). Confidence is the nominal confidence of every probe
// decision, in (0, 1). Status is found, above_range, none or undecided. Capacity is the
// largest value shown to pass below every failing value (null when none passed);
// BracketLower and BracketUpper are that value and the lowest failing one (each null when
// there is none). BindingCriterion is the test that failed at BracketUpper with the largest
// margin ("client.e2e p95", "attainment", "attainment client.ttft"), "backlog" when that
// probe was unsustainable, or null. Boundary is smooth, cliff, non_monotone or unknown.
// ProbesSpent counts the probed values, RunsSpent the runs they took (extensions included)
// and RequestsSpent every measured request of those runs. Warnings explain undecided probes
// and non-monotone results ([] when none).
type Search struct {
	SearchID         string        `json:"search_id"`
	Over             string        `json:"over"`
	Min              float64       `json:"min"`
	Max              float64       `json:"max"`
	Tolerance        float64       `json:"tolerance"`
	Confidence       float64       `json:"confidence"`
	Status           string        `json:"status"`
	Capacity         *float64      `json:"capacity"`
	BracketLower     *float64      `json:"bracket_lower"`
	BracketUpper     *float64      `json:"bracket_upper"`
	BindingCriterion *string       `json:"binding_criterion"`
	Boundary         string        `json:"boundary"`
	ProbesSpent      int           `json:"probes_spent"`
	RunsSpent        int           `json:"runs_spent"`
	RequestsSpent    int           `json:"requests_spent"`
	Probes           []SearchProbe `json:"probes"`
	Warnings         []string      `json:"warnings"`
}

func (Search) selfEncoding() {}

// RecordKind returns KindSearch.
func (Search) RecordKind() Kind { return KindSearch }

// MarshalJSON writes the record with its event_type and schema_version.
func (s Search) MarshalJSON() ([]byte, error) {
	type plain Search
	return withKind(KindSearch, plain(s))
}

// SearchProbe is one probed value: its decision (pass, fail, undecided, unsustainable), the
// measured requests of its deciding (last) run, the runs it took (Stages; each extension is
// a fresh run with twice the requests), the seed and artifact path of its last run, the
// rule confidence each look used (the nominal confidence split over looks and tests), its
// tests' bounds at its last run, and why it is undecided or unsustainable ("" otherwise).
type SearchProbe struct {
	Index          int          `json:"index"`
	Value          float64      `json:"value"`
	Decision       string       `json:"decision"`
	Requests       int          `json:"requests"`
	Stages         int          `json:"stages"`
	Seed           int64        `json:"seed"`
	Artifact       string       `json:"artifact"`
	LookConfidence float64      `json:"look_confidence"`
	Tests          []SearchTest `json:"tests"`
	Reason         string       `json:"reason"`
}

// SearchTest is one statistical question of a probe. Kind "quantile": Key is the criterion
// ("client.e2e"), Level the quantile level, Threshold the criterion's max_ms, Lower/Upper
// the order-statistic confidence bounds of the failure-penalised quantile in ms (Upper null
// when it falls among failures: unbounded). Kind "attainment": Key is "attainment" (every
// criterion) or "attainment <criterion>", Level the attainment target, Threshold equal to
// it, Lower/Upper the Clopper-Pearson bounds of the share of offered requests that met
// (unknown counted as missed for Lower, as met for Upper). Estimate is the point value (the
// quantile in ms, or met/offered), null when there is none. Decision is pass, fail or
// extend; Reason why a bound is missing ("" otherwise).
type SearchTest struct {
	Kind      string   `json:"kind"`
	Key       string   `json:"key"`
	Level     float64  `json:"level"`
	Threshold float64  `json:"threshold"`
	Lower     *float64 `json:"lower"`
	Upper     *float64 `json:"upper"`
	Estimate  *float64 `json:"estimate"`
	Decision  string   `json:"decision"`
	Reason    string   `json:"reason"`
}

// Test kinds (SearchTest.Kind).
const (
	TestQuantile   = "quantile"
	TestAttainment = "attainment"
)

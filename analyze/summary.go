package analyze

import (
	"regexp"
	"sort"
	"strings"
)

// Summary is the report's summary over measured requests: totals, failures by status,
// failure rate (nil without requests), the number of cases, and how the session ended (the
// last infer.session record's status: completed, interrupted, incomplete, or running when
// the producer never wrote its final line).
type Summary struct {
	TotalRequests      int            `json:"total_requests"`
	SuccessfulRequests int            `json:"successful_requests"`
	FailedRequests     int            `json:"failed_requests"`
	FailureRate        *float64       `json:"failure_rate"`
	FailuresByStatus   map[string]int `json:"failures_by_status"`
	// FailureReasons are the most common reasons of the failed requests (at most
	// MaxFailureReasons, most frequent first): what to fix first when a run fails.
	FailureReasons []FailureReason `json:"failure_reasons"`
	// FailureReasonsOmitted counts the distinct reasons beyond FailureReasons, and
	// FailedRequestsOmitted the failed requests they account for (0 and 0 when every reason
	// is listed).
	FailureReasonsOmitted int     `json:"failure_reasons_omitted"`
	FailedRequestsOmitted int     `json:"failed_requests_omitted"`
	CaseCount             int     `json:"case_count"`
	SessionStatus         *string `json:"session_status"`
	// SessionClosed says whether the artifact holds a final infer.session record (completed,
	// interrupted or incomplete); false when it ends on the opening "running" record, as
	// after kill -9, or without any.
	SessionClosed bool `json:"session_closed"`
}

// MaxFailureReasons bounds Summary.FailureReasons.
const MaxFailureReasons = 5

// FailureReason is one distinct (status, http_status, error_type, server_error_type,
// server_error_code, error_message) among the failed measured requests, with how many had
// it; fields the records leave null are null. ServerErrorType and ServerErrorCode are the
// type and code of the error object the server sent (the records' fields of those names),
// so that e.g. a stream_error of type InternalServerError is told from one of another type.
type FailureReason struct {
	Status          string  `json:"status"`
	HTTPStatus      *int64  `json:"http_status"`
	ErrorType       *string `json:"error_type"`
	ServerErrorType *string `json:"server_error_type"`
	ServerErrorCode *string `json:"server_error_code"`
	ErrorMessage    *string `json:"error_message"`
	Count           int     `json:"count"`
}

// failureReasons tallies the reasons of failed requests.
type failureReasons map[failureKey]int

type failureKey struct {
	status, errType, msg string
	srvType, srvCode     string
	http                 int64
	hasHTTP, hasType     bool
	hasMsg               bool
	hasSrvType, hasCode  bool
}

func (f failureReasons) add(r *Request) {
	k := failureKey{status: r.Status}
	if r.HTTPStatus != nil {
		k.http, k.hasHTTP = *r.HTTPStatus, true
	}
	if r.ErrorType != nil {
		k.errType, k.hasType = *r.ErrorType, true
	}
	if r.ServerErrorType != nil {
		k.srvType, k.hasSrvType = *r.ServerErrorType, true
	}
	if r.ServerErrorCode != nil {
		k.srvCode, k.hasCode = *r.ServerErrorCode, true
	}
	if r.ErrorMessage != nil {
		k.msg, k.hasMsg = *r.ErrorMessage, true
		if strings.Contains(k.msg, "->") {
			// "read tcp 127.0.0.1:49388->127.0.0.1:8000: …": the local port differs per
			// connection; without it, the same failure is one reason.
			k.msg = localPortRe.ReplaceAllString(k.msg, "$1:*->")
		}
	}
	f[k]++
}

var localPortRe = regexp.MustCompile(`(\S+?):\d+->`)

// top returns the MaxFailureReasons most frequent reasons, ties in key order, and how many
// distinct reasons and failed requests the rest hold.
func (f failureReasons) top() (top []FailureReason, omitted, omittedRequests int) {
	keys := make([]failureKey, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		switch {
		case f[a] != f[b]:
			return f[a] > f[b]
		case a.status != b.status:
			return a.status < b.status
		case a.http != b.http:
			return a.http < b.http
		case a.errType != b.errType:
			return a.errType < b.errType
		case a.srvType != b.srvType:
			return a.srvType < b.srvType
		case a.srvCode != b.srvCode:
			return a.srvCode < b.srvCode
		}
		return a.msg < b.msg
	})
	shown := min(len(keys), MaxFailureReasons)
	for _, k := range keys[shown:] {
		omittedRequests += f[k]
	}
	out := make([]FailureReason, 0, shown)
	for _, k := range keys[:shown] {
		fr := FailureReason{Status: k.status, Count: f[k]}
		if k.hasHTTP {
			fr.HTTPStatus = i64Ptr(k.http)
		}
		if k.hasType {
			fr.ErrorType = strPtr(k.errType)
		}
		if k.hasSrvType {
			fr.ServerErrorType = strPtr(k.srvType)
		}
		if k.hasCode {
			fr.ServerErrorCode = strPtr(k.srvCode)
		}
		if k.hasMsg {
			fr.ErrorMessage = strPtr(k.msg)
		}
		out = append(out, fr)
	}
	return out, len(keys) - shown, omittedRequests
}

// summarize sets each measured request's server evidence from server (joinServer) and counts
// them into the report's summary; ids are the cases with requests, sorted by case id.
func summarize(in *Input, server *ServerEvidence) (sum Summary, ids []string) {
	sum = Summary{FailuresByStatus: map[string]int{}}
	reasons := failureReasons{}
	ids = make([]string, 0, len(in.Cases))
	for id, requests := range in.Cases {
		if len(requests) == 0 {
			continue
		}
		ids = append(ids, id)
		for i := range requests {
			r := &requests[i]
			joinServer(r, server)
			sum.TotalRequests++
			if r.Status == StatusOK {
				sum.SuccessfulRequests++
			} else {
				sum.FailedRequests++
				sum.FailuresByStatus[r.Status]++
				reasons.add(r)
			}
		}
	}
	sort.Strings(ids)
	sum.FailureReasons, sum.FailureReasonsOmitted, sum.FailedRequestsOmitted = reasons.top()
	sum.FailureRate = share(sum.FailedRequests, sum.TotalRequests)
	sum.CaseCount = len(ids)
	a := in.Artifact
	if n := len(a.Sessions); n > 0 {
		sum.SessionStatus = strPtr(a.Sessions[n-1].Status)
	}
	if final := a.FinalSession(); final != nil {
		sum.SessionStatus = strPtr(final.Status)
		sum.SessionClosed = true
	}
	return sum, ids
}

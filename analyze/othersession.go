package analyze

import (
	"fmt"
	"sort"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
)

// ReasonOtherSession is IgnoredRecords.Reason for records whose session_id no infer.session
// record of the artifact declares (lines spliced in from another run's artifact).
const ReasonOtherSession = "other_session"

// IgnoredRecords counts the records of one session that the analysis ignored, and why
// (ReasonOtherSession): Records counts its infer.request v1 records (every phase) and
// infer.phase_window records. None of them is counted anywhere else in the report.
type IgnoredRecords struct {
	Reason    string `json:"reason"`
	SessionID string `json:"session_id"`
	Records   int    `json:"records"`
}

// Text is the report's line for the ignored records, e.g.
// "3 records from another session (id 9f…) ignored".
func (ig IgnoredRecords) Text() string {
	noun := "records"
	if ig.Records == 1 {
		noun = "record"
	}
	return fmt.Sprintf("%d %s from another session (id %q) ignored: no infer.session record of the artifact declares it", ig.Records, noun, ig.SessionID)
}

// sessionCounts tallies records by session id while an Input is built.
type sessionCounts map[string]int

// excludeOtherSessions drops from in the records of sessions that no infer.session record
// declares: the measured requests of every case (a case left without requests is removed),
// the warmup join keys (warmupSessions gives each one's session id, in order), the phase
// windows; requests (every request record's session, every phase) is subtracted from
// RequestRecords. The dropped sessions are listed in in.Ignored, by session id (empty when
// none). When it drops a phase window, in.Artifact becomes a shallow copy with its own
// PhaseWindows, so that the caller's artifact is never changed. An artifact without
// infer.session records is left as it is (Validate refuses it).
func (in *Input) excludeOtherSessions(requests sessionCounts, warmupSessions []string) {
	in.Ignored = []IgnoredRecords{}
	a := in.Artifact
	if len(a.Sessions) == 0 {
		return
	}
	declared := a.DeclaredSessions()
	ignored := sessionCounts{}
	for id, n := range requests {
		if !declared[id] {
			ignored[id] += n
			in.RequestRecords -= n
		}
	}
	if len(ignored) > 0 {
		in.dropRequests(declared, warmupSessions)
	}
	var windows []artifact.PhaseWindow
	for i, w := range a.PhaseWindows {
		if declared[w.SessionID] {
			if windows != nil {
				windows = append(windows, w)
			}
			continue
		}
		if windows == nil {
			windows = append(make([]artifact.PhaseWindow, 0, len(a.PhaseWindows)), a.PhaseWindows[:i]...)
		}
		ignored[w.SessionID]++
	}
	if windows != nil {
		cp := *a
		cp.PhaseWindows = windows
		in.Artifact = &cp
	}
	in.Ignored = ignored.list()
}

// dropRequests removes the measured requests and warmup join keys of undeclared sessions.
func (in *Input) dropRequests(declared map[string]bool, warmupSessions []string) {
	for id, list := range in.Cases {
		kept := list[:0]
		for i := range list {
			if declared[list[i].SessionID] {
				kept = append(kept, list[i])
			}
		}
		clear(list[len(kept):]) // let the dropped requests' data go
		if len(kept) == 0 {
			delete(in.Cases, id)
		} else {
			in.Cases[id] = kept
		}
	}
	if len(warmupSessions) != len(in.Warmup) {
		return
	}
	kept := in.Warmup[:0]
	for i, jr := range in.Warmup {
		if declared[warmupSessions[i]] {
			kept = append(kept, jr)
		}
	}
	in.Warmup = kept
}

// list is the tally as IgnoredRecords of other sessions, by session id.
func (c sessionCounts) list() []IgnoredRecords {
	out := make([]IgnoredRecords, 0, len(c))
	for id, n := range c {
		out = append(out, IgnoredRecords{Reason: ReasonOtherSession, SessionID: id, Records: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SessionID < out[j].SessionID })
	return out
}

// ignoredNote is Validate's addition when every request record was another session's.
func (in *Input) ignoredNote() string {
	if len(in.Ignored) == 0 {
		return ""
	}
	parts := make([]string, len(in.Ignored))
	for i, ig := range in.Ignored {
		parts[i] = fmt.Sprintf("%d of session %q", ig.Records, ig.SessionID)
	}
	return " of its own sessions (ignored: " + strings.Join(parts, ", ") + ")"
}

// requestSessions tallies the session ids of records.
func requestSessions(records []artifact.Request) sessionCounts {
	c := sessionCounts{}
	for i := range records {
		c[records[i].SessionID]++
	}
	return c
}

func nonNilIgnored(list []IgnoredRecords) []IgnoredRecords {
	if list == nil {
		return []IgnoredRecords{}
	}
	return list
}

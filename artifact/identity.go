package artifact

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"time"
)

// NewSessionID returns a random (version 4) UUID in its 36-character text
// form, e.g. "9b2f0c1e-3a4d-4e8f-9a1b-2c3d4e5f6a7b".
func NewSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// Host identifies the machine and boot whose wall clock timestamps come from.
type Host struct {
	// Name is the hostname ("unknown" when the OS cannot report one).
	Name string
	// BootID is /proc/sys/kernel/random/boot_id, nil when it cannot be read
	// (non-Linux hosts, restricted /proc).
	BootID *string
}

// ClockDomain returns the host's wall clock domain; see ClockDomain.
func (h Host) ClockDomain() string { return ClockDomain(h.Name, h.BootID) }

// BootIDPath is where Linux publishes the boot id.
const BootIDPath = "/proc/sys/kernel/random/boot_id"

// HostIdentity returns this machine's hostname and boot id.
func HostIdentity() Host {
	return hostIdentity(os.Hostname, os.ReadFile)
}

func hostIdentity(hostname func() (string, error), readFile func(string) ([]byte, error)) Host {
	name, err := hostname()
	if err != nil || name == "" {
		name = "unknown"
	}
	h := Host{Name: name}
	if b, err := readFile(BootIDPath); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			h.BootID = &id
		}
	}
	return h
}

// ClockDomain names a wall clock, one boot of one host (hostnames can repeat
// across machines): "{host}/{boot_id}/unix_epoch_ns", or "{host}/unix_epoch_ns"
// when there is no boot id — a name that never counts as a shared clock,
// even when both sides' hostnames are equal.
func ClockDomain(host string, bootID *string) string {
	if bootID != nil && *bootID != "" {
		return host + "/" + *bootID + "/unix_epoch_ns"
	}
	return host + "/unix_epoch_ns"
}

// Redacted marks what RedactURL removed.
const Redacted = "<redacted>"

// RedactURL returns a URL as it may be recorded — never with its credentials or
// query string, as the workload record requires of the cache reset URL: the user
// information and fragment are dropped, and a query string, which can carry
// a key, is replaced by "?<redacted>". Scheme, host, port and path are kept.
// "" stays ""; text that does not parse as a URL, or an opaque URL
// ("scheme:data"), is reduced to "<redacted>" / "scheme:<redacted>".
func RedactURL(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Redacted
	}
	if u.Opaque != "" {
		return u.Scheme + ":" + Redacted
	}
	u.User = nil
	u.Fragment, u.RawFragment = "", ""
	if u.RawQuery != "" {
		u.RawQuery = Redacted
	}
	u.ForceQuery = false
	return u.String()
}

// EchoURL is a URL as the user typed it, for an error message: the text itself — never
// parsed and re-encoded, so "not a url" stays "not a url" — without what can carry a
// credential: the user information (everything before the last '@' of the authority, which
// is the text after "//" up to the next '/', or without "//" the text up to the first '/')
// becomes "<redacted>", a query string "?<redacted>", and the fragment is dropped. Quote it
// (%q) when printing: it may hold any character.
func EchoURL(raw string) string {
	s, _, _ := strings.Cut(raw, "#")
	s, query, hasQuery := strings.Cut(s, "?")
	start := 0
	if i := strings.Index(s, "//"); i >= 0 {
		start = i + 2
	}
	end := len(s)
	if j := strings.IndexByte(s[start:], '/'); j >= 0 {
		end = start + j
	}
	if at := strings.LastIndexByte(s[start:end], '@'); at >= 0 {
		s = s[:start] + Redacted + s[start+at:]
	}
	if hasQuery && query != "" {
		s += "?" + Redacted
	}
	return s
}

// ClosingSession is a profile run's last line: the infer.session record with the final
// status (StatusCompleted, StatusInterrupted or StatusIncomplete), its summary — producer
// ProducerProfile, host, this process's pid, start and end (Unix ns, and the duration in
// seconds), the infer.request records written — and errText (nil unless incomplete).
func ClosingSession(sessionID string, host Host, started, ended time.Time, status string, requests int64, errText *string) *Session {
	return &Session{
		SessionID: sessionID, TimestampNS: ended.UnixNano(), Status: status,
		Summary: &SessionSummary{
			SessionID: sessionID, Source: ProducerProfile, Host: host.Name, PID: int64(os.Getpid()),
			StartedAtNS: started.UnixNano(), EndedAtNS: ended.UnixNano(), DurationSeconds: ended.Sub(started).Seconds(),
			Status: status, RequestsRecorded: requests, Error: errText,
		},
	}
}

// XRequestIDPrefix is the part of every X-Request-Id a run sends before the request id:
// "inferprobe-<run_id>-". The full header is XRequestIDPrefix(runID) + request_id.
func XRequestIDPrefix(runID string) string { return "inferprobe-" + runID + "-" }

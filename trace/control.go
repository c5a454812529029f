package trace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
)

// ControlBase is the origin of endpoint (scheme://host[:port], credentials, path, query and
// fragment removed): the default base of /start_profile and /stop_profile. It returns an
// error when endpoint is not an absolute http or https URL.
func ControlBase(endpoint string) (string, error) {
	u, err := parseHTTP(endpoint)
	if err != nil {
		return "", err
	}
	return u.Scheme + "://" + u.Host, nil
}

// parseHTTP parses an absolute http or https URL with a host.
func parseHTTP(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("trace control URL %q: %w", redact(raw), err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("trace control URL %q: want an absolute http or https URL", redact(raw))
	}
	return u, nil
}

// redact is raw without credentials, query and fragment (raw itself when it cannot be
// parsed and holds no '@'; "(unparsable)" otherwise).
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if strings.Contains(raw, "@") {
			return "(unparsable)"
		}
		return raw
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

// endpoints are the start and stop URLs under base (its path kept, its query dropped).
func endpoints(base string) (start, stop string, err error) {
	u, err := parseHTTP(base)
	if err != nil {
		return "", "", err
	}
	u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = "", false, "", ""
	p := strings.TrimRight(u.Path, "/")
	u.Path, u.RawPath = p+"/start_profile", ""
	start = u.String()
	u.Path = p + "/stop_profile"
	return start, u.String(), nil
}

// newHTTPClient is a client that never follows a redirect (the 3xx comes back as the reply).
func newHTTPClient() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// reply is what one control call returned: the HTTP status (0 without a reply) and the
// error (nil for a 2xx).
type reply struct {
	status int
	err    error
}

// post sends an empty POST to u, bounded by timeout, and reads (at most 64 KiB of) the body.
// A non-2xx status, a transport error, a timeout or a body that cannot be read is an error.
func post(ctx context.Context, hc *http.Client, u string, timeout time.Duration) reply {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, http.NoBody)
	if err != nil {
		return reply{err: err}
	}
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is in the record already, and may hold credentials
		}
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no reply within %s", timeout)
		}
		return reply{err: err}
	}
	defer resp.Body.Close()
	_, rerr := io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	r := reply{status: resp.StatusCode}
	switch {
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		r.err = fmt.Errorf("HTTP %d", resp.StatusCode)
	case rerr != nil:
		r.err = fmt.Errorf("reading the reply: %w", rerr)
	}
	return r
}

// startOutcome classifies a /start_profile reply: 2xx acknowledged; 404, 405 (no profiler
// routes), 401, 403, 407 (a proxy) rejected; anything else — another status, a redirect, a
// transport error, a timeout, an unreadable body — unknown.
func startOutcome(r reply) string {
	switch {
	case r.err == nil && r.status >= 200 && r.status <= 299:
		return artifact.StartAcknowledged
	case r.status == 404 || r.status == 405 || r.status == 401 || r.status == 403 || r.status == 407:
		return artifact.StartRejected
	}
	return artifact.StartUnknown
}

// ServerClockDomain is the clock domain of the server behind a profiler control URL:
// client (the client host's own domain) when its host is a loopback address or
// "localhost" — the server runs on this host — else "<host>/unix_epoch_ns", a domain that
// is placed on the client's clock only by an infer.clock_alignment record. An unparsable
// URL or one without a host gives client.
func ServerClockDomain(controlURL, client string) string {
	u, err := url.Parse(controlURL)
	if err != nil || u.Hostname() == "" {
		return client
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return client
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return client
	}
	return artifact.ClockDomain(host, nil)
}

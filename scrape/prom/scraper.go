package prom

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/engine"
)

// Config configures a Scraper.
type Config struct {
	// URL is the metrics endpoint (http or https, no user information).
	// DefaultMetricsURL derives it from the chat endpoint for the bare
	// --vllm-metrics flag.
	URL string
	// Endpoint is the run's chat endpoint. The API key is sent with a scrape
	// only when URL has the same origin (scheme, host and port).
	Endpoint string
	// APIKey is the endpoint's bearer token; "" sends none. It is never
	// recorded.
	APIKey string
	// Timeout bounds one scrape, connection to last body byte. Default 60 s
	// (the profile's --timeout default).
	Timeout time.Duration
	// Interval is the --vllm-metrics-interval, recorded as interval_ms on
	// every scrape (at least 1 ms). Default 1 s.
	Interval time.Duration
	// SessionID, RunID and ClockDomain identify the run on every record.
	SessionID   string
	RunID       string
	ClockDomain string
	// Limits bound one scrape; zero fields mean the defaults.
	Limits Limits
	// Transport, when set, replaces the default transport (which ignores
	// environment proxies). Redirects are never followed either way.
	Transport http.RoundTripper
	// Now is the client clock; default time.Now.
	Now func() time.Time
}

// Scraper GETs one vLLM /metrics endpoint and turns each answer into an
// infer.vllm_scrape record. Safe for concurrent use.
type Scraper struct {
	cfg       Config
	url       string // as requested
	sourceURL string // as recorded
	sendKey   bool
	client    *http.Client
}

// DefaultMetricsURL is the bare --vllm-metrics URL: the endpoint's origin
// (scheme, host, port) plus "/metrics". Errors: an endpoint that is not an
// absolute http(s) URL.
func DefaultMetricsURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("vllm metrics: endpoint %q is not an absolute http(s) URL", artifact.EchoURL(endpoint))
	}
	return u.Scheme + "://" + u.Host + "/metrics", nil
}

// NewScraper checks cfg and builds a scraper. Errors (usage errors for the
// CLI): a URL that is not absolute http(s), carries user information, or a
// negative timeout or interval.
func NewScraper(cfg Config) (*Scraper, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("vllm metrics: %q is not an absolute http(s) URL", artifact.EchoURL(cfg.URL))
	}
	if u.User != nil {
		return nil, errors.New("vllm metrics: the URL must not carry credentials (the API key is sent to the endpoint's own origin)")
	}
	if cfg.Timeout < 0 || cfg.Interval < 0 {
		return nil, errors.New("vllm metrics: timeout and interval must not be negative")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 60 * time.Second
	}
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Limits = cfg.Limits.withDefaults()
	tr := cfg.Transport
	if tr == nil {
		tr = &http.Transport{
			Proxy:                 nil, // environment proxies are ignored, as for the endpoint
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:          2,
			MaxIdleConnsPerHost:   2,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: cfg.Timeout,
		}
	}
	s := &Scraper{
		cfg:       cfg,
		url:       u.String(),
		sourceURL: artifact.RedactURL(u.String()),
		client: &http.Client{
			Transport:     tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	s.sendKey = cfg.APIKey != "" && sameOrigin(u, cfg.Endpoint)
	return s, nil
}

// sameOrigin compares scheme, host and port, default ports made explicit.
func sameOrigin(u *url.URL, endpoint string) bool {
	e, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	origin := func(u *url.URL) string {
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
		}
		return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Hostname()) + ":" + port
	}
	return e.Host != "" && origin(u) == origin(e)
}

// SourceURL is the metrics URL as records carry it (no query string).
func (s *Scraper) SourceURL() string { return s.sourceURL }

// SendsAPIKey reports whether scrapes carry the endpoint's bearer token.
func (s *Scraper) SendsAPIKey() bool { return s.sendKey }

// KeyWithheld reports whether an API key is configured but withheld because
// the metrics URL is on another origin; the run should say so once.
func (s *Scraper) KeyWithheld() bool { return s.cfg.APIKey != "" && !s.sendKey }

// Authorization is the session config's vllm_metrics.authorization: "bearer"
// when scrapes carry the key, nil otherwise.
func (s *Scraper) Authorization() *string {
	if s.sendKey {
		return artifact.Ptr("bearer")
	}
	return nil
}

// Interval returns the configured interval between interval scrapes.
func (s *Scraper) Interval() time.Duration { return s.cfg.Interval }

// Timeout returns the per-scrape timeout.
func (s *Scraper) Timeout() time.Duration { return s.cfg.Timeout }

// Limits returns the limits in force.
func (s *Scraper) Limits() Limits { return s.cfg.Limits }

// Scrape GETs the metrics once and returns its record: marker is one of the
// Marker* constants; caseID and phase "" are recorded as null. It never
// fails: an HTTP status other than 2xx ("HTTP 503"; a redirect names its
// target and is not followed), a transport error or timeout, a body over the
// limits ("oversized: …") or one that is not Prometheus text ("unparseable
// response …") gives a record with status "error" and the reason. Times are
// on the client clock: observed_at_ns when the request is sent,
// completed_at_ns when the body has been read.
func (s *Scraper) Scrape(ctx context.Context, marker, caseID, phase string) artifact.MetricsScrape {
	start := s.cfg.Now()
	rec := artifact.MetricsScrape{
		Header:           artifact.HeaderOf(artifact.KindMetricsScrape),
		ObservationScope: artifact.ScopeEngineAggregate,
		SessionID:        s.cfg.SessionID,
		RunID:            s.cfg.RunID,
		ObservedAtNS:     start.UnixNano(),
		TimestampNS:      start.UnixNano(),
		SourceURL:        s.sourceURL,
		Marker:           marker,
		IntervalMS:       max(s.cfg.Interval.Milliseconds(), 1),
		Status:           artifact.ScrapeError,
		ClockDomain:      s.cfg.ClockDomain,
	}
	if caseID != "" {
		rec.CaseID = artifact.Ptr(caseID)
	}
	if phase != "" {
		rec.Phase = artifact.Ptr(phase)
	}
	finish := func() {
		end := s.cfg.Now()
		rec.CompletedAtNS = artifact.Ptr(end.UnixNano())
		rec.DurationMS = artifact.Ptr(float64(end.Sub(start).Nanoseconds()) / 1e6)
	}
	fail := func(format string, args ...any) artifact.MetricsScrape {
		finish()
		rec.Error = artifact.Ptr(fmt.Sprintf(format, args...))
		return rec
	}
	if !artifact.ValidScrapeMarker(marker) {
		return fail("invalid marker %q", marker)
	}
	body, status, ctype, err := s.get(ctx)
	if status != 0 {
		rec.HTTPStatus = artifact.Ptr(status)
	}
	if err != nil {
		return fail("%s", err.Error())
	}
	sum := sha256.Sum256(body)
	rec.ContentDigest = artifact.Ptr(hex.EncodeToString(sum[:]))
	rec.ContentBytes = artifact.Ptr(int64(len(body)))
	c, err := Parse(body, s.cfg.Limits)
	if err != nil {
		if errors.Is(err, ErrUnparseable) && ctype != "" {
			return fail("%s (Content-Type %s)", err.Error(), ctype)
		}
		return fail("%s", err.Error())
	}
	finish()
	d := engine.Discover(c)
	rec.Status, rec.Scrape, rec.Discovery = artifact.ScrapeOK, c, &d
	return rec
}

// get performs the request and reads the body within the limits.
func (s *Scraper) get(ctx context.Context) (body []byte, status int, ctype string, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, 0, "", fmt.Errorf("request: %v", err)
	}
	// Ask for the classic text format: an OpenMetrics answer names counters
	// and _created stamps differently.
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=1.0,*/*;q=0.1")
	req.Header.Set("User-Agent", "inferprobe")
	if s.sendKey {
		req.Header.Set("Authorization", "Bearer "+s.cfg.APIKey)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, 0, "", s.transportError(ctx, err)
	}
	defer func() {
		_, _ = io.CopyN(io.Discard, resp.Body, 64<<10) // let the connection be reused
		resp.Body.Close()
	}()
	ctype = resp.Header.Get("Content-Type")
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		if loc := resp.Header.Get("Location"); resp.StatusCode >= 300 && resp.StatusCode < 400 && loc != "" {
			target := loc
			if u, err := resp.Request.URL.Parse(loc); err == nil {
				target = u.String()
			}
			return nil, resp.StatusCode, ctype, fmt.Errorf("HTTP %d: redirect to %s not followed", resp.StatusCode, artifact.RedactURL(target))
		}
		return nil, resp.StatusCode, ctype, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	lim := s.cfg.Limits.MaxBodyBytes
	if resp.ContentLength > lim {
		return nil, resp.StatusCode, ctype, fmt.Errorf("%w: Content-Length %d is over the %d-byte limit", ErrOversized, resp.ContentLength, lim)
	}
	body, err = io.ReadAll(io.LimitReader(resp.Body, lim+1))
	if err != nil {
		return nil, resp.StatusCode, ctype, fmt.Errorf("reading the body: %v", s.transportError(ctx, err))
	}
	if int64(len(body)) > lim {
		return nil, resp.StatusCode, ctype, fmt.Errorf("%w: body over the %d-byte limit", ErrOversized, lim)
	}
	return body, resp.StatusCode, ctype, nil
}

// transportError words a failed request without its URL (which the record
// carries redacted in source_url).
func (s *Scraper) transportError(ctx context.Context, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("timeout after %s", s.cfg.Timeout)
	case errors.Is(err, context.Canceled):
		return errors.New("cancelled")
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("request failed: %v", err)
}

// Sum GETs the metrics once and returns the sum of family's samples over every label set
// (e.g. vllm:num_requests_running over engines); nothing is recorded. Errors: a failed
// request (as Scrape words it), a body over the limits or not Prometheus text, a family
// the answer does not carry, or one that is a histogram or summary.
func (s *Scraper) Sum(ctx context.Context, family string) (float64, error) {
	body, _, _, err := s.get(ctx)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", s.sourceURL, err)
	}
	c, err := Parse(body, s.cfg.Limits)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", s.sourceURL, err)
	}
	values, ok := c.Values[family]
	if !ok {
		return 0, fmt.Errorf("scrape %s: no %s", s.sourceURL, family)
	}
	var sum float64
	for _, v := range values {
		if v.Dist != nil {
			return 0, fmt.Errorf("scrape %s: %s is not a gauge or counter", s.sourceURL, family)
		}
		sum += float64(v.Sample)
	}
	return sum, nil
}

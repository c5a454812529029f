package prom

import (
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
)

// metricsServer serves body at /metrics and records the Authorization
// header of each request.
type metricsServer struct {
	*httptest.Server
	mu    sync.Mutex
	auth  []string
	hits  atomic.Int64
	serve func(w http.ResponseWriter, r *http.Request)
}

func newMetricsServer(t *testing.T, serve func(w http.ResponseWriter, r *http.Request)) *metricsServer {
	m := &metricsServer{serve: serve}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.hits.Add(1)
		m.mu.Lock()
		m.auth = append(m.auth, r.Header.Get("Authorization"))
		m.mu.Unlock()
		m.serve(w, r)
	}))
	t.Cleanup(m.Close)
	return m
}

func textBody(body string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write([]byte(body))
	}
}

func newScraper(t *testing.T, cfg Config) *Scraper {
	t.Helper()
	if cfg.SessionID == "" {
		cfg.SessionID, cfg.RunID, cfg.ClockDomain = "sess", "run-1", "host/boot/unix_epoch_ns"
	}
	s, err := NewScraper(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestScrapeRecordsAnOKScrape(t *testing.T) {
	srv := newMetricsServer(t, textBody(preText))
	clock := []time.Time{time.Unix(100, 0), time.Unix(100, 250_000_000)}
	i := 0
	s := newScraper(t, Config{URL: srv.URL + "/metrics?token=secret", Endpoint: srv.URL + "/v1", Interval: 500 * time.Millisecond,
		Now: func() time.Time { i++; return clock[min(i-1, 1)] }})
	r := s.Scrape(context.Background(), artifact.ScrapeMarkerPhaseStart, "case1", "measured")
	if r.Status != artifact.ScrapeOK || r.Error != nil || r.Scrape == nil || r.Discovery == nil {
		t.Fatalf("record %+v", r)
	}
	if r.ObservedAtNS != 100e9 || r.TimestampNS != 100e9 || *r.CompletedAtNS != 100_250_000_000 || *r.DurationMS != 250 {
		t.Errorf("times %d %d %d %v", r.ObservedAtNS, r.TimestampNS, *r.CompletedAtNS, *r.DurationMS)
	}
	if r.IntervalMS != 500 || *r.HTTPStatus != 200 || *r.ContentBytes != int64(len(preText)) || len(*r.ContentDigest) != 64 {
		t.Errorf("record %+v", r)
	}
	if strings.Contains(r.SourceURL, "secret") || !strings.HasSuffix(r.SourceURL, "/metrics?<redacted>") {
		t.Errorf("source_url %q", r.SourceURL)
	}
	if *r.CaseID != "case1" || *r.Phase != "measured" || r.SessionID != "sess" || r.RunID != "run-1" || r.ClockDomain != "host/boot/unix_epoch_ns" {
		t.Errorf("identity %+v", r)
	}
	if got := s.Scrape(context.Background(), artifact.ScrapeMarkerManual, "", ""); got.CaseID != nil || got.Phase != nil {
		t.Errorf("manual scrape case/phase %v %v, want null", got.CaseID, got.Phase)
	}
	line := string(toJSON(t, r))
	if !strings.HasPrefix(line, `{"event_type":"infer.vllm_scrape","schema_version":1,`) {
		t.Errorf("line starts %.80s", line)
	}
}

// The API key goes only to the endpoint's own origin.
func TestAPIKeyOnlyToTheEndpointsOrigin(t *testing.T) {
	same := newMetricsServer(t, textBody(preText))
	other := newMetricsServer(t, textBody(preText))
	s := newScraper(t, Config{URL: same.URL + "/metrics", Endpoint: same.URL + "/v1/chat/completions", APIKey: "sk-test"})
	if r := s.Scrape(context.Background(), artifact.ScrapeMarkerManual, "", ""); r.Status != artifact.ScrapeOK {
		t.Fatal(*r.Error)
	}
	if same.auth[0] != "Bearer sk-test" || !s.SendsAPIKey() || s.KeyWithheld() || *s.Authorization() != "bearer" {
		t.Errorf("same origin: header %q", same.auth[0])
	}
	s = newScraper(t, Config{URL: other.URL + "/metrics", Endpoint: same.URL + "/v1/chat/completions", APIKey: "sk-test"})
	s.Scrape(context.Background(), artifact.ScrapeMarkerManual, "", "")
	if other.auth[0] != "" || s.SendsAPIKey() || !s.KeyWithheld() || s.Authorization() != nil {
		t.Errorf("other origin: header %q", other.auth[0])
	}
	for _, c := range []struct {
		metrics, endpoint string
		same              bool
	}{
		{"http://h:80/metrics", "http://H/v1", true},
		{"https://h/metrics", "https://h:443/v1", true},
		{"http://h/metrics", "https://h/v1", false},
		{"http://h:8001/metrics", "http://h:8000/v1", false},
		{"http://h/metrics", "http://g/v1", false},
		{"http://h/metrics", "::bad", false},
	} {
		u, _ := url.Parse(c.metrics)
		if got := sameOrigin(u, c.endpoint); got != c.same {
			t.Errorf("sameOrigin(%s, %s) = %v", c.metrics, c.endpoint, got)
		}
	}
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	target := newMetricsServer(t, textBody(preText))
	redirect := newMetricsServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/metrics?key=x", http.StatusFound)
	})
	s := newScraper(t, Config{URL: redirect.URL + "/metrics"})
	r := s.Scrape(context.Background(), artifact.ScrapeMarkerManual, "", "")
	if r.Status != artifact.ScrapeError || *r.HTTPStatus != 302 || r.Scrape != nil {
		t.Fatalf("record %+v", r)
	}
	if want := "HTTP 302: redirect to " + target.URL + "/metrics?<redacted> not followed"; *r.Error != want {
		t.Errorf("error %q, want %q", *r.Error, want)
	}
	if target.hits.Load() != 0 {
		t.Error("the redirect target was requested")
	}
}

func TestFailedScrapes(t *testing.T) {
	unavailable := newMetricsServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "Service Unavailable", http.StatusServiceUnavailable)
	})
	r := newScraper(t, Config{URL: unavailable.URL + "/metrics"}).Scrape(context.Background(), artifact.ScrapeMarkerPhaseStart, "c", "measured")
	if r.Status != artifact.ScrapeError || *r.Error != "HTTP 503" || *r.HTTPStatus != 503 || r.Scrape != nil || r.Discovery != nil || r.CompletedAtNS == nil {
		t.Errorf("503: %+v", r)
	}
	html := newMetricsServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!DOCTYPE html>\n<html><body>Please sign in</body></html>\n"))
	})
	r = newScraper(t, Config{URL: html.URL + "/metrics"}).Scrape(context.Background(), artifact.ScrapeMarkerManual, "", "")
	if r.Status != artifact.ScrapeError || !strings.HasPrefix(*r.Error, "unparseable response") || !strings.Contains(*r.Error, "text/html") || *r.HTTPStatus != 200 || r.Scrape != nil || r.ContentBytes == nil {
		t.Errorf("html: %+v error %q", r, deref2(r.Error))
	}
	// A connection refused is a transport error without an HTTP status.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	r = newScraper(t, Config{URL: deadURL + "/metrics"}).Scrape(context.Background(), artifact.ScrapeMarkerManual, "", "")
	if r.Status != artifact.ScrapeError || r.HTTPStatus != nil || !strings.HasPrefix(*r.Error, "request failed:") || strings.Contains(*r.Error, deadURL) {
		t.Errorf("refused: %+v error %q", r, deref2(r.Error))
	}
	slow := newMetricsServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	r = newScraper(t, Config{URL: slow.URL + "/metrics", Timeout: 100 * time.Millisecond}).Scrape(context.Background(), artifact.ScrapeMarkerManual, "", "")
	if r.Status != artifact.ScrapeError || *r.Error != "timeout after 100ms" {
		t.Errorf("slow: error %q", deref2(r.Error))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r = newScraper(t, Config{URL: slow.URL + "/metrics"}).Scrape(ctx, artifact.ScrapeMarkerManual, "", "")
	if *r.Error != "cancelled" {
		t.Errorf("cancelled: error %q", deref2(r.Error))
	}
	if r := newScraper(t, Config{URL: slow.URL + "/metrics"}).Scrape(context.Background(), "later", "", ""); r.Status != artifact.ScrapeError || !strings.Contains(*r.Error, "invalid marker") {
		t.Errorf("bad marker: %+v", r)
	}
}

func deref2(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func TestOversizedBodies(t *testing.T) {
	big := strings.Repeat("# padding to make the body large\n", 400)
	lim := Limits{MaxBodyBytes: 4096}
	declared := newMetricsServer(t, textBody(big)) // net/http sets Content-Length
	r := newScraper(t, Config{URL: declared.URL + "/metrics", Limits: lim}).Scrape(context.Background(), artifact.ScrapeMarkerManual, "", "")
	if r.Status != artifact.ScrapeError || !strings.HasPrefix(*r.Error, "oversized") || r.ContentBytes != nil {
		t.Errorf("Content-Length over the limit: %+v %q", r, deref2(r.Error))
	}
	chunked := newMetricsServer(t, func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 400; i++ {
			_, _ = w.Write([]byte("# padding to make the body large\n"))
			w.(http.Flusher).Flush()
		}
	})
	r = newScraper(t, Config{URL: chunked.URL + "/metrics", Limits: lim}).Scrape(context.Background(), artifact.ScrapeMarkerManual, "", "")
	if r.Status != artifact.ScrapeError || !strings.HasPrefix(*r.Error, "oversized") {
		t.Errorf("chunked body over the limit: %q", deref2(r.Error))
	}
	// A small gzip body that inflates past the limit is refused as well.
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, _ = zw.Write([]byte(strings.Repeat("a 1\n", 100_000)))
	_ = zw.Close()
	bomb := newMetricsServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(zb.Bytes())
	})
	r = newScraper(t, Config{URL: bomb.URL + "/metrics", Limits: Limits{MaxBodyBytes: 64 << 10}}).Scrape(context.Background(), artifact.ScrapeMarkerManual, "", "")
	if r.Status != artifact.ScrapeError || !strings.HasPrefix(*r.Error, "oversized") {
		t.Errorf("gzip bomb: %q", deref2(r.Error))
	}
	var series strings.Builder
	for i := 0; i < 30; i++ {
		series.WriteString("vllm:x{i=\"" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + "\"} 1\n")
	}
	many := newMetricsServer(t, textBody(series.String()))
	r = newScraper(t, Config{URL: many.URL + "/metrics", Limits: Limits{MaxSeries: 20}}).Scrape(context.Background(), artifact.ScrapeMarkerManual, "", "")
	if r.Status != artifact.ScrapeError || *r.Error != "oversized: more than 20 series" {
		t.Errorf("too many series: %q", deref2(r.Error))
	}
	long := newMetricsServer(t, textBody("a{l=\""+strings.Repeat("x", 200)+"\"} 1\n"))
	r = newScraper(t, Config{URL: long.URL + "/metrics", Limits: Limits{MaxLineChars: 100}}).Scrape(context.Background(), artifact.ScrapeMarkerManual, "", "")
	if r.Status != artifact.ScrapeError || *r.Error != "oversized: line 1 has more than 100 characters" {
		t.Errorf("long line: %q", deref2(r.Error))
	}
}

// A gzip-encoded exposition is read transparently.
func TestGzipBody(t *testing.T) {
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, _ = zw.Write([]byte(preText))
	_ = zw.Close()
	srv := newMetricsServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(zb.Bytes())
	})
	r := newScraper(t, Config{URL: srv.URL + "/metrics"}).Scrape(context.Background(), artifact.ScrapeMarkerManual, "", "")
	if r.Status != artifact.ScrapeOK || *r.ContentBytes != int64(len(preText)) {
		t.Errorf("gzip: %+v", r)
	}
}

func TestNewScraperAndDefaultURL(t *testing.T) {
	for _, bad := range []string{"", "metrics", "ftp://h/metrics", "http:///metrics", "http://user:pw@h/metrics"} {
		if _, err := NewScraper(Config{URL: bad}); err == nil {
			t.Errorf("URL %q accepted", bad)
		} else if strings.Contains(err.Error(), "pw") {
			t.Errorf("error %q shows the password", err)
		}
	}
	if _, err := NewScraper(Config{URL: "http://h/metrics", Timeout: -1}); err == nil {
		t.Error("negative timeout accepted")
	}
	s := newScraper(t, Config{URL: "http://h/metrics"})
	if s.Timeout() != 60*time.Second || s.Interval() != time.Second || s.Limits() != DefaultLimits() {
		t.Errorf("defaults %v %v %+v", s.Timeout(), s.Interval(), s.Limits())
	}
	for endpoint, want := range map[string]string{
		"http://127.0.0.1:8000/v1":                     "http://127.0.0.1:8000/metrics",
		"https://vllm.example/v1/chat/completions?x=1": "https://vllm.example/metrics",
	} {
		if got, err := DefaultMetricsURL(endpoint); err != nil || got != want {
			t.Errorf("DefaultMetricsURL(%s) = %q, %v", endpoint, got, err)
		}
	}
	if _, err := DefaultMetricsURL("/v1"); err == nil {
		t.Error("a relative endpoint accepted")
	}
}

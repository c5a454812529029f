package daemon

import (
	"net/url"
	"os"
	"regexp"
	"time"

	"github.com/inferprobe/inferprobe/artifact"
	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/scrape/prom"
)

// Target is a validated target.
type Target struct {
	Name           string
	Endpoint       string
	Model          string
	apiKey         string
	MetricsURL     string // "" when not scraped
	ScrapeInterval time.Duration
}

// nameRe is the rule for target and probe names (they label every series).
var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// envNameRe is the rule for an environment variable's name (api_key_env).
var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// scrapeIntervalRange is the range of a target's scrape_interval: 100 ms to 1 h.
var scrapeIntervalRange = artifact.Range{Min: 0.1, Max: 3600, Unit: "seconds"}

// loadTarget validates a target: its name, one URL, the model, the API key from the
// environment and the /metrics scrape.
func loadTarget(key string, t TargetFile) (*Target, error) {
	if !nameRe.MatchString(t.Name) {
		return nil, cfgErr(key+".name", "want 1-64 letters, digits, '_', '.', '-', not %q", t.Name)
	}
	if (t.Endpoint == "") == (t.BaseURL == "") {
		return nil, cfgErr(key, "exactly one of endpoint and base_url is required")
	}
	if t.Model == "" {
		return nil, cfgErr(key+".model", "required")
	}
	for _, u := range []struct{ key, v string }{{"endpoint", t.Endpoint}, {"base_url", t.BaseURL}} {
		if u.v == "" {
			continue
		}
		pu, err := url.Parse(u.v)
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			return nil, cfgErr(key+"."+u.key, "want an absolute http(s) URL, not %q", artifact.EchoURL(u.v))
		}
	}
	tg := &Target{Name: t.Name, Endpoint: t.Endpoint, Model: t.Model, ScrapeInterval: DefaultScrapeInterval}
	if t.BaseURL != "" {
		endpoint, err := loadgen.ChatCompletionsURL(t.BaseURL)
		if err != nil {
			return nil, cfgErr(key+".base_url", "is the /v1 base (…/v1); give a full …/chat/completions URL as endpoint")
		}
		tg.Endpoint = endpoint
	}
	if t.APIKeyEnv != "" {
		if !envNameRe.MatchString(t.APIKeyEnv) {
			return nil, cfgErr(key+".api_key_env", "%q is not an environment variable name", t.APIKeyEnv)
		}
		v, ok := os.LookupEnv(t.APIKeyEnv)
		if !ok || v == "" {
			return nil, cfgErr(key+".api_key_env", "$%s is not set", t.APIKeyEnv)
		}
		tg.apiKey = v
	}
	if t.ScrapeInterval != nil {
		tg.ScrapeInterval = time.Duration(*t.ScrapeInterval)
		if err := scrapeIntervalRange.CheckDuration(tg.ScrapeInterval); err != nil {
			return nil, cfgErr(key+".scrape_interval", "%v", err)
		}
	}
	switch t.MetricsURL {
	case "":
	case MetricsURLDefault:
		u, err := prom.DefaultMetricsURL(tg.Endpoint)
		if err != nil {
			return nil, cfgErr(key+".metrics_url", "%v", err)
		}
		tg.MetricsURL = u
	default:
		tg.MetricsURL = t.MetricsURL
	}
	if tg.MetricsURL != "" {
		if _, err := tg.scraper(); err != nil {
			return nil, cfgErr(key+".metrics_url", "%v", err)
		}
	}
	return tg, nil
}

// scrapeConfig is the target's vLLM /metrics scraper configuration (a run's pipeline adds
// its session, run and clock domain).
func (t *Target) scrapeConfig() prom.Config {
	return prom.Config{
		URL: t.MetricsURL, Endpoint: t.Endpoint, APIKey: t.apiKey, Timeout: min(t.ScrapeInterval, 10*time.Second),
		Interval: t.ScrapeInterval,
	}
}

// scraper returns a vLLM /metrics scraper of the target for the health loop.
func (t *Target) scraper() (*prom.Scraper, error) { return prom.NewScraper(t.scrapeConfig()) }

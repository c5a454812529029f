package run

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/inferprobe/inferprobe/loadgen"
	"github.com/inferprobe/inferprobe/loadgen/client"
	"github.com/inferprobe/inferprobe/loadgen/prompt"
)

// Warnings are the start-of-run warnings of a workload: a prompt target too short for the
// nonce of unique and shared-prefix prompts, prompts repeated across runs without a cache
// reset (a fixed seed: not when the run has a seed of its own, Config.RunSeeded), a cold
// cache intent without a reset URL, environment proxies that are ignored, and credentials in
// the endpoint URL, which are never sent (nor recorded).
func Warnings(cfg *loadgen.Config) []string {
	var w []string
	if cfg.PromptMode != prompt.Repeat {
		for _, in := range cfg.InputTokens {
			if in < 32 {
				w = append(w, fmt.Sprintf("--input-tokens %d is below 32: the ~8-token nonce of --prompt-mode %s cannot hit the target length and prefix share", in, cfg.PromptMode))
				break
			}
		}
		if cfg.CacheResetURL == "" && !cfg.RunSeeded {
			w = append(w, fmt.Sprintf("prompts are the same for every run with --seed %d; without --cache-reset-url a repeated run starts with them already cached", cfg.Seed))
		}
	}
	if cfg.CacheState == loadgen.CacheCold && cfg.CacheResetURL == "" {
		w = append(w, "--cache-state cold without --cache-reset-url records the intent only; nothing clears the cache")
	}
	if u, err := url.Parse(cfg.Endpoint); err == nil && u.User != nil {
		w = append(w, "the endpoint URL's user:password is not sent (inferprobe never sends or records URL credentials); give a token with --api-key or $OPENAI_API_KEY")
	}
	if proxies := client.IgnoredProxyEnv(); len(proxies) > 0 {
		w = append(w, fmt.Sprintf("environment proxies (%s) are ignored; point --endpoint at a proxy to use one", strings.Join(proxies, ", ")))
	}
	return w
}

package join

// maxRequestIDLen bounds the gen_ai.request.id values CandidateRequestIDs
// works on; longer values give no candidates.
const maxRequestIDLen = 4096

// CandidateRequestIDs returns the X-Request-Id values that could have
// produced vLLM's gen_ai.request.id value id, most likely first, without
// duplicates. The join looks each up among the run's recorded x_request_id
// values and uses the first that matches: the recorded value is matched,
// never rebuilt.
//
// Forms handled:
//
//   - chat: "chatcmpl-<X>" → X; a multi-conversation batch sub-request
//     "chatcmpl-<X>_<i>" → X also (after X_<i>);
//   - completions: "cmpl-<X>-<i>" (i = prompt index) → X first, then X-<i>;
//   - the internal uniquifying suffix "<external>-<8 hex>" that vLLM adds
//     since 2025-12-23 → also tried without it (after the literal form);
//   - parallel sampling (n>1) children of vLLM before 2025-12-23, which
//     reported the child id "<i>_chatcmpl-<X>" →
//     the leading "<i>_" is stripped;
//   - any other value (no vLLM prefix) → the value itself.
//
// An empty id, or one over 4096 bytes, has no candidates (nil).
func CandidateRequestIDs(id string) []string {
	if id == "" || len(id) > maxRequestIDLen {
		return nil
	}
	out := make([]string, 0, 4)
	add := func(s string) {
		if s == "" {
			return
		}
		for _, o := range out {
			if o == s {
				return
			}
		}
		out = append(out, s)
	}
	bases := make([]string, 0, 2)
	if rest, ok := stripChildIndex(id); ok {
		bases = append(bases, rest)
	}
	bases = append(bases, id)
	for _, base := range bases {
		variants := [2]string{base}
		if s, ok := stripRandomSuffix(base); ok {
			variants[1] = s
		}
		for _, v := range variants {
			if v == "" {
				continue
			}
			switch {
			case hasPrefix(v, chatPrefix):
				x := v[len(chatPrefix):]
				add(x)
				if y, ok := stripTrailingIndex(x, '_'); ok {
					add(y)
				}
			case hasPrefix(v, completionPrefix):
				x := v[len(completionPrefix):]
				if y, ok := stripTrailingIndex(x, '-'); ok {
					add(y)
				}
				add(x)
			default:
				add(v)
			}
		}
	}
	return out
}

// RecoverRequestID returns the best-effort X-Request-Id in a vLLM
// gen_ai.request.id: the first of CandidateRequestIDs when id has a
// "chatcmpl-" or "cmpl-" prefix (possibly after a "<i>_" child index), else
// nil (a random server-side id, or another endpoint's prefix, belongs to no
// client request). "cmpl-q05-warmup-r0000-0" gives "q05-warmup-r0000".
func RecoverRequestID(id string) *string {
	rest, ok := stripChildIndex(id)
	if !ok {
		rest = id
	}
	if !hasPrefix(rest, chatPrefix) && !hasPrefix(rest, completionPrefix) {
		return nil
	}
	c := firstCandidate(id)
	if c == "" {
		return nil
	}
	return &c
}

// firstCandidate is CandidateRequestIDs(id)[0] without building the list.
func firstCandidate(id string) string {
	if id == "" || len(id) > maxRequestIDLen {
		return ""
	}
	base := id
	if rest, ok := stripChildIndex(id); ok {
		base = rest
	}
	switch {
	case hasPrefix(base, chatPrefix):
		return base[len(chatPrefix):]
	case hasPrefix(base, completionPrefix):
		x := base[len(completionPrefix):]
		if y, ok := stripTrailingIndex(x, '-'); ok && y != "" {
			return y
		}
		return x
	}
	return base
}

const (
	chatPrefix       = "chatcmpl-"
	completionPrefix = "cmpl-"
)

func hasPrefix(s, p string) bool { return len(s) > len(p) && s[:len(p)] == p }

// stripChildIndex removes a leading "<digits>_" when a vLLM prefix follows.
func stripChildIndex(s string) (string, bool) {
	i := 0
	for i < len(s) && i < 10 && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 || i >= len(s) || s[i] != '_' {
		return "", false
	}
	rest := s[i+1:]
	if hasPrefix(rest, chatPrefix) || hasPrefix(rest, completionPrefix) {
		return rest, true
	}
	return "", false
}

// stripRandomSuffix removes a trailing "-<8 lowercase hex>".
func stripRandomSuffix(s string) (string, bool) {
	const n = 8
	if len(s) < n+2 || s[len(s)-n-1] != '-' {
		return "", false
	}
	for i := len(s) - n; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", false
		}
	}
	return s[:len(s)-n-1], true
}

// stripTrailingIndex removes a trailing "<sep><digits>" (at most 9 digits).
func stripTrailingIndex(s string, sep byte) (string, bool) {
	i := len(s)
	for i > 0 && len(s)-i < 9 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	if i == len(s) || i < 2 || s[i-1] != sep {
		return "", false
	}
	return s[:i-1], true
}

package agent

import (
	"encoding/base64"
	"sort"
	"strings"
)

// MinSecretLen is the shortest secret a Masker masks: shorter values would
// mask ordinary words.
const MinSecretLen = 4

// Mask is what a Masker writes in place of a secret.
const Mask = "***"

// Masker replaces known secret values, and their base64 forms, with "***".
// The zero value and a nil *Masker mask nothing. It is safe for concurrent use.
type Masker struct {
	r *strings.Replacer
}

// NewMasker returns a Masker for the given secrets. Empty values and values
// shorter than MinSecretLen are ignored.
func NewMasker(secrets ...string) *Masker {
	seen := map[string]bool{}
	var vals []string
	add := func(v string) {
		if len(v) >= MinSecretLen && !seen[v] {
			seen[v] = true
			vals = append(vals, v)
		}
	}
	for _, s := range secrets {
		s = strings.TrimSpace(s)
		if len(s) < MinSecretLen {
			continue
		}
		add(s)
		add(base64.StdEncoding.EncodeToString([]byte(s)))
		add(base64.RawStdEncoding.EncodeToString([]byte(s)))
		add(base64.URLEncoding.EncodeToString([]byte(s)))
		add(base64.RawURLEncoding.EncodeToString([]byte(s)))
	}
	if len(vals) == 0 {
		return &Masker{}
	}
	// Longest first, so that a secret containing another is masked whole.
	sort.SliceStable(vals, func(i, j int) bool { return len(vals[i]) > len(vals[j]) })
	pairs := make([]string, 0, 2*len(vals))
	for _, v := range vals {
		pairs = append(pairs, v, Mask)
	}
	return &Masker{r: strings.NewReplacer(pairs...)}
}

// Mask returns s with every known secret replaced by "***".
func (m *Masker) Mask(s string) string {
	if m == nil || m.r == nil || s == "" {
		return s
	}
	return m.r.Replace(s)
}

package checkpoint

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Kind is the kind of a recomputation policy.
type Kind uint8

// The policy kinds.
const (
	None     Kind = iota // keep every activation; recompute marks are ignored
	Manual               // recompute what the graph's recompute marks say
	Sqrt                 // keep about √n of the chain's n saved activations as segment boundaries
	Segments             // split the chain into Policy.Segments segments
	Budget               // fit the peak under Policy.Budget bytes with the least recompute
)

var kindNames = [...]string{None: "none", Manual: "manual", Sqrt: "sqrt", Segments: "segments", Budget: "budget"}

// String returns the kind's name.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Policy says what to recompute. Budget, when positive, is also checked
// under the other kinds: a plan whose arena exceeds it is refused.
type Policy struct {
	Kind     Kind
	Segments int   // the number of segments, for Kind Segments
	Budget   int64 // bytes; the target of Kind Budget, a limit for the others
}

// String returns the policy as the -recompute and -memory-budget flags
// spell it, e.g. "sqrt", "segments=4", "budget=536870912".
func (p Policy) String() string {
	var s string
	switch p.Kind {
	case Segments:
		s = "segments=" + strconv.Itoa(p.Segments)
	case Budget:
		return "budget=" + strconv.FormatInt(p.Budget, 10)
	default:
		s = p.Kind.String()
	}
	if p.Budget > 0 {
		s += ",budget=" + strconv.FormatInt(p.Budget, 10)
	}
	return s
}

// ParsePolicy parses the -recompute flag: "" or "none", "manual", "sqrt"
// or "segments=K" (K >= 1). The budget is set separately (ParseBytes).
func ParsePolicy(s string) (Policy, error) {
	switch s := strings.TrimSpace(s); {
	case s == "" || s == "none":
		return Policy{Kind: None}, nil
	case s == "manual":
		return Policy{Kind: Manual}, nil
	case s == "sqrt":
		return Policy{Kind: Sqrt}, nil
	case strings.HasPrefix(s, "segments="):
		k, err := strconv.Atoi(strings.TrimPrefix(s, "segments="))
		if err != nil || k < 1 {
			return Policy{}, fmt.Errorf("checkpoint policy %q: segments=K needs an integer K >= 1", s)
		}
		return Policy{Kind: Segments, Segments: k}, nil
	}
	return Policy{}, fmt.Errorf("unknown checkpoint policy %q (expected none, manual, sqrt or segments=K)", s)
}

// ParseBytes parses a byte count: a plain integer, or a number with a unit
// B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of
// 1024), case-insensitive, with or without a space: "536870912",
// "512MiB", "1.5GB", "2 GiB". The result is rounded down to whole bytes
// and must be positive.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	num, unit := strings.TrimSpace(t[:i]), strings.ToLower(strings.TrimSpace(t[i:]))
	mult := map[string]float64{
		"": 1, "b": 1,
		"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("byte count %q: unknown unit %q (use B, KB, MB, GB, KiB, MiB, GiB, ...)", s, t[i:])
	}
	if unit == "" || unit == "b" {
		if n, err := strconv.ParseInt(num, 10, 64); err == nil {
			if n <= 0 {
				return 0, fmt.Errorf("byte count %q must be positive", s)
			}
			return n, nil
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" {
		return 0, fmt.Errorf("byte count %q: expected a number such as 536870912, 512MiB or 1.5GB", s)
	}
	v := math.Floor(f * mult)
	if !(v >= 1) || v > math.MaxInt64/2 {
		return 0, fmt.Errorf("byte count %q is out of range", s)
	}
	return int64(v), nil
}

// FormatBytes formats n bytes for people: the exact count with its size
// in MiB (or KiB), e.g. "805306368 bytes (768.0 MiB)".
func FormatBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%d bytes (%.1f MiB)", n, float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d bytes (%.1f KiB)", n, float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

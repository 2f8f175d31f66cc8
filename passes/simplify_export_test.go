package passes

import (
	"sort"

	"github.com/kilnml/kiln/ir"
)

// SimplifyRuleNames returns the name of every rule in the table, sorted,
// with "cse" (merges) added.
func SimplifyRuleNames() []string {
	seen := map[string]bool{"cse": true}
	for _, rules := range simplifyRuleTable {
		for _, r := range rules {
			seen[r.name] = true
		}
	}
	var names []string
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// SimplifyMaxRounds is the cap on the fixed point's rounds.
const SimplifyMaxRounds = simplifyMaxRounds

// WithFlipFlopRule runs f with one more rule for transpose that never
// settles: it writes the perm out when it is absent and leaves it out when
// it is written, so every sweep changes the graph.
func WithFlipFlopRule(f func()) {
	saved := simplifyRules[ir.OpTranspose]
	simplifyRules[ir.OpTranspose] = []simplifyRule{{"flip-flop", func(s *simplifier, id ir.ID) bool {
		v := &s.g.Values[id]
		if _, ok := v.Attrs.Get("perm"); ok {
			var attrs ir.Attrs
			for _, a := range v.Attrs {
				if a.Key != "perm" {
					attrs = append(attrs, a)
				}
			}
			return s.rewrite(id, ir.OpTranspose, attrs, v.Args[0])
		}
		p, _ := s.perm(id)
		return s.rewrite(id, ir.OpTranspose, v.Attrs.With("perm", ir.Ints(p...)), v.Args[0])
	}}}
	defer func() { simplifyRules[ir.OpTranspose] = saved }()
	f()
}

// CheckPassTable exports checkPassTable for tests.
var CheckPassTable = checkPassTable

package ir

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Frozen reports whether value id is a frozen param: a param that keeps
// its initial value (its attribute frozen=true), so autodiff takes no
// gradient for it and the optimizer gives it no state and no update.
func (g *Graph) Frozen(id ID) bool {
	v := &g.Values[id]
	return v.Op == OpParam && v.Attrs.Bool("frozen", false)
}

// Trainable returns the ids of the params that are not frozen, in order.
func (g *Graph) Trainable() []ID {
	var ids []ID
	for _, id := range g.Params() {
		if !g.Frozen(id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// MatchFrozen decides which of the params named names are frozen: with
// freeze, those whose name it matches; with train, those whose name it does
// not match; with neither, none. At most one of freeze and train may be
// set, and the one set must match at least one name.
func MatchFrozen(names []string, freeze, train *regexp.Regexp) ([]bool, error) {
	frozen := make([]bool, len(names))
	if freeze != nil && train != nil {
		return nil, errors.New("both a freeze and a train pattern are given; give one")
	}
	re, what := freeze, "freeze"
	if train != nil {
		re, what = train, "train"
	}
	if re == nil {
		return frozen, nil
	}
	matched := false
	for i, name := range names {
		m := re.MatchString(name)
		matched = matched || m
		frozen[i] = m == (freeze != nil)
	}
	if !matched {
		return nil, fmt.Errorf("%s pattern %q matches no param; the params are %s", what, Excerpt(re.String()), Excerpt(strings.Join(names, ", ")))
	}
	return frozen, nil
}

// Freeze marks the params of g that MatchFrozen selects by name as frozen
// (see Graph.Frozen); params frozen already stay frozen. It is a no-op when
// neither pattern is set.
func Freeze(g *Graph, freeze, train *regexp.Regexp) error {
	if freeze == nil && train == nil {
		return nil
	}
	params := g.Params()
	names := make([]string, len(params))
	for i, id := range params {
		names[i] = g.Values[id].Name
	}
	frozen, err := MatchFrozen(names, freeze, train)
	if err != nil {
		return err
	}
	for i, id := range params {
		if frozen[i] {
			v := &g.Values[id]
			v.Attrs = v.Attrs.With("frozen", BoolAttr(true))
		}
	}
	return nil
}

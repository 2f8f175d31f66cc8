package onnx

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/ir"
)

// Einsum is lowered at import to kiln ops whose gradients are exact:
// operands are contracted two at a time, left to right, each pair as one
// batched matmul between transposes and reshapes ([batch, free, summed] by
// [batch, summed, free]); a letter only one operand has and nothing later
// needs is summed out first. A letter repeated in one term takes the
// diagonal first: the two axes side by side, merged, every (n+1)-th
// element. A dim of 1 broadcasts against the letter's size in other terms.

// einsumTerm is an operand (or the result) in terms of its letters.
type einsumTerm struct {
	id      ir.ID
	letters []byte
}

func (t einsumTerm) has(c byte) bool { return strings.IndexByte(string(t.letters), c) >= 0 }

func emitEinsum(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	eq := strings.ReplaceAll(attrString(n, "equation", ""), " ", "")
	lhs, out, explicit := strings.Cut(eq, "->")
	specs := strings.Split(lhs, ",")
	if len(specs) != len(n.Input) {
		return nil, fmt.Errorf("equation %q names %d operands, the node has %d inputs", ir.Excerpt(eq), len(specs), len(n.Input))
	}
	terms := make([]einsumTerm, len(specs))
	size := map[byte]int{}
	maxEll := 0
	for k := range specs {
		x, err := im.id(n, k)
		if err != nil {
			return nil, err
		}
		if r := len(im.shapeOf(x)) - (len(specs[k]) - 3*strings.Count(specs[k], "...")); strings.Contains(specs[k], "...") {
			maxEll = max(maxEll, r)
		}
		terms[k].id = x
	}
	// An ellipsis stands for the leading dims it covers, named by the
	// uppercase letters from the right (broadcast dims share a name).
	ell := func(spec string, r int) (string, error) {
		before, after, ok := strings.Cut(spec, "...")
		if !ok {
			return spec, nil
		}
		m := r - len(before) - len(after)
		if m < 0 || strings.Contains(after, "...") {
			return "", fmt.Errorf("term %q does not fit rank %d", ir.Excerpt(spec), r)
		}
		return before + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[maxEll-m:maxEll] + after, nil
	}
	if maxEll > 26 {
		return nil, errors.New("an ellipsis of more than 26 dims")
	}
	var all []byte // every term's letters, repeats included
	for k := range terms {
		s := im.shapeOf(terms[k].id)
		spec, err := ell(specs[k], len(s))
		if err != nil {
			return nil, err
		}
		if len(spec) != len(s) {
			return nil, fmt.Errorf("term %q has %d letters for input %d of rank %d", ir.Excerpt(specs[k]), len(spec), k, len(s))
		}
		for j := 0; j < len(spec); j++ {
			c := spec[j]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
				return nil, fmt.Errorf("equation %q: %q is not a letter", ir.Excerpt(eq), c)
			}
			if d, ok := size[c]; ok && d != s[j] {
				// Sizes must agree, but for a 1, which broadcasts across
				// terms (not within one: a diagonal needs equal sizes).
				if d != 1 && s[j] != 1 || strings.IndexByte(spec[:j], c) >= 0 {
					return nil, fmt.Errorf("equation %q: letter %c has sizes %d and %d", ir.Excerpt(eq), c, d, s[j])
				}
				size[c] = max(d, s[j])
				continue
			}
			size[c] = s[j]
		}
		terms[k].letters = []byte(spec)
		all = append(all, terms[k].letters...)
		if terms[k], err = im.einsumDiagonals(terms[k]); err != nil {
			return nil, err
		}
	}
	// A term whose dim is 1 where the letter's size is larger is broadcast
	// to it (broadcast_to: its gradient sums back).
	for k, t := range terms {
		ts := im.shapeOf(t.id)
		full := make([]int, len(ts))
		grow := false
		for j, c := range t.letters {
			full[j] = size[c]
			grow = grow || full[j] != ts[j]
		}
		if grow {
			id, err := im.g.Add("", ir.OpBroadcastTo, ir.MakeAttrs("shape", ir.Ints(full...)), t.id)
			if err != nil {
				return nil, err
			}
			terms[k].id = id
		}
	}
	if explicit {
		var err error
		if out, err = ell(out, maxEll+len(strings.ReplaceAll(out, "...", ""))); err != nil {
			return nil, err
		}
	} else {
		// Implicit: the ellipsis dims, then the letters used once, sorted.
		count := map[byte]int{}
		for _, c := range all {
			count[c]++
		}
		var once []byte
		for c, k := range count {
			if k == 1 && c >= 'a' {
				once = append(once, c)
			}
		}
		sort.Slice(once, func(i, j int) bool { return once[i] < once[j] })
		out = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[:maxEll] + string(once)
	}
	for j := 0; j < len(out); j++ {
		if _, ok := size[out[j]]; !ok || strings.IndexByte(out[:j], out[j]) >= 0 {
			return nil, fmt.Errorf("equation %q: output letter %c is repeated or in no input", ir.Excerpt(eq), out[j])
		}
	}
	want := einsumTerm{letters: []byte(out)}
	cur := terms[0]
	for k := 1; k < len(terms); k++ {
		keep := want
		for _, t := range terms[k+1:] {
			keep.letters = append(append([]byte(nil), keep.letters...), t.letters...)
		}
		var err error
		if cur, err = im.einsumPair(cur, terms[k], keep, size); err != nil {
			return nil, err
		}
	}
	res, err := im.einsumReduce(cur, want)
	if err != nil {
		return nil, err
	}
	// Reorder to the output's letters.
	perm := make([]int, len(out))
	for j := range out {
		perm[j] = strings.IndexByte(string(res.letters), out[j])
	}
	return one(im.transposeIfNeeded(res.id, perm))
}

// einsumReduce sums out the letters of t that keep lacks.
func (im *importer) einsumReduce(t, keep einsumTerm) (einsumTerm, error) {
	var axes []int
	var rest []byte
	for j, c := range t.letters {
		if keep.has(c) {
			rest = append(rest, c)
		} else {
			axes = append(axes, j)
		}
	}
	if len(axes) == 0 {
		return t, nil
	}
	id, err := im.g.Add("", ir.OpSum, ir.MakeAttrs("axes", ir.Ints(axes...), "keepdims", ir.BoolAttr(false)), t.id)
	return einsumTerm{id, rest}, err
}

// einsumPair contracts a and b into the letters keep needs.
func (im *importer) einsumPair(a, b, keep einsumTerm, size map[byte]int) (einsumTerm, error) {
	both := func(t einsumTerm) einsumTerm {
		return einsumTerm{letters: append(append([]byte(nil), keep.letters...), t.letters...)}
	}
	var err error
	if a, err = im.einsumReduce(a, both(b)); err != nil {
		return a, err
	}
	if b, err = im.einsumReduce(b, both(a)); err != nil {
		return b, err
	}
	var batch, left, sum, right []byte
	for _, c := range a.letters {
		switch {
		case b.has(c) && keep.has(c):
			batch = append(batch, c)
		case b.has(c):
			sum = append(sum, c)
		default:
			left = append(left, c)
		}
	}
	for _, c := range b.letters {
		if !a.has(c) {
			right = append(right, c)
		}
	}
	dims := func(cs []byte) (int, []int) {
		p, s := 1, make([]int, len(cs))
		for j, c := range cs {
			s[j] = size[c]
			p *= s[j]
		}
		return p, s
	}
	nb, bs := dims(batch)
	nl, ls := dims(left)
	nk, _ := dims(sum)
	nr, rs := dims(right)
	x, err := im.einsumLayout(a, [][]byte{batch, left, sum}, []int{nb, nl, nk})
	if err != nil {
		return a, err
	}
	y, err := im.einsumLayout(b, [][]byte{batch, sum, right}, []int{nb, nk, nr})
	if err != nil {
		return b, err
	}
	z, err := im.g.Add("", ir.OpMatmul, nil, x, y)
	if err != nil {
		return a, err
	}
	shape := append(append(append([]int{}, bs...), ls...), rs...)
	if z, err = im.g.Add("", ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(shape...)), z); err != nil {
		return a, err
	}
	return einsumTerm{z, append(append(append([]byte(nil), batch...), left...), right...)}, nil
}

// einsumLayout transposes t to the letters of groups in order and
// reshapes it to one dim per group (sizes dims).
func (im *importer) einsumLayout(t einsumTerm, groups [][]byte, dims []int) (ir.ID, error) {
	var perm []int
	for _, g := range groups {
		for _, c := range g {
			perm = append(perm, strings.IndexByte(string(t.letters), c))
		}
	}
	v, err := im.transposeIfNeeded(t.id, perm)
	if err != nil {
		return ir.NoID, err
	}
	return im.g.Add("", ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(dims...)), v.id)
}

// transposeIfNeeded returns x transposed by perm, or x when perm keeps the
// order.
func (im *importer) transposeIfNeeded(x ir.ID, perm []int) (*val, error) {
	for j, p := range perm {
		if p != j {
			return im.add(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(perm...)), x)
		}
	}
	return &val{id: x}, nil
}

// einsumDiagonals takes the diagonal of t along every letter it repeats.
func (im *importer) einsumDiagonals(t einsumTerm) (einsumTerm, error) {
	c := &builder{im: im}
	for {
		j1, j2 := -1, -1
		for j := range t.letters {
			if k := strings.IndexByte(string(t.letters[:j]), t.letters[j]); k >= 0 {
				j1, j2 = k, j
				break
			}
		}
		if j1 < 0 {
			return t, c.err
		}
		s := im.shapeOf(t.id)
		perm := make([]int, 0, len(s))
		var letters []byte
		for j := range s {
			if j == j2 {
				continue
			}
			perm = append(perm, j)
			letters = append(letters, t.letters[j])
			if j == j1 {
				perm = append(perm, j2)
			}
		}
		v, err := im.transposeIfNeeded(t.id, perm)
		if err != nil {
			return t, err
		}
		n := s[j1]
		merged := make([]int, 0, len(s)-1)
		for j, p := range perm {
			switch {
			case j == j1:
				merged = append(merged, n*n)
			case j != j1+1:
				merged = append(merged, s[p])
			}
		}
		id := c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(merged...)), v.id)
		id = c.op(ir.OpSlice, ir.MakeAttrs("axis", ir.Int(j1), "start", ir.Int(0), "end", ir.Int(n*n), "step", ir.Int(n+1)), id)
		if c.err != nil {
			return t, c.err
		}
		t = einsumTerm{id, letters}
	}
}

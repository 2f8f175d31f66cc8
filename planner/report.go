package planner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kilnml/kiln/ir"
)

// reportTop is how many of the largest buffers and of the in-place reuses
// Report lists.
const reportTop = 10

// Report summarizes the plan's memory for people, in a few lines: steps and
// buffers; the arena, the lower bound and their ratio, and the step where
// the most bytes are live; the bytes of params, state and inputs, and the
// frozen params; the largest buffers; and the results computed in place of an argument.
func (p *Plan) Report() string {
	var b strings.Builder
	kernels := 0
	for _, st := range p.Steps {
		if st.Kind == Kernel {
			kernels++
		}
	}
	fmt.Fprintf(&b, "plan %s: %d steps (%d kernels, %d copies), %d buffers\n", p.Graph.Name, len(p.Steps), kernels, len(p.Steps)-kernels, len(p.Buffers))
	fmt.Fprintf(&b, "arena %d bytes, lower bound %d bytes, ratio %.3f\n", p.ArenaBytes, p.LowerBound, p.Ratio())
	if p.ChunkBytes > 0 {
		fmt.Fprintf(&b, "arena in %d chunks of at most %d bytes (no buffer straddles two)\n", p.Chunks(), p.ChunkBytes)
	}
	bs, _ := p.blocks()
	peak := peakStep(bs, len(p.Steps))
	var all int64
	for _, buf := range p.Buffers {
		all += alignUp(buf.Size)
	}
	fmt.Fprintf(&b, "most bytes live at step %d", peak)
	if peak < len(p.Steps) {
		fmt.Fprintf(&b, " (%s)", p.stepName(peak))
	}
	fmt.Fprintf(&b, "; every buffer in memory of its own would take %d bytes\n", all)

	sum := func(ids []int) int64 {
		var n int64
		for _, i := range ids {
			n += p.Buffers[i].Size
		}
		return n
	}
	fmt.Fprintf(&b, "params %d bytes (%d), state %d bytes (%d), inputs %d bytes (%d)\n",
		sum(p.Params), len(p.Params), sum(p.States), len(p.States), sum(p.Inputs), len(p.Inputs))
	var frozen []string
	for _, i := range p.Params {
		if p.Graph.Frozen(p.Buffers[i].Value) {
			frozen = append(frozen, "%"+p.Buffers[i].Name)
		}
	}
	if len(frozen) > 0 {
		fmt.Fprintf(&b, "frozen params (no gradient, no update): %s\n", ir.Excerpt(strings.Join(frozen, ", ")))
	}

	idx := make([]int, len(p.Buffers))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(x, y int) int { return cmpInt64(p.Buffers[y].Size, p.Buffers[x].Size) })
	b.WriteString("\nlargest buffers:\n")
	for _, i := range idx[:min(reportTop, len(idx))] {
		buf := &p.Buffers[i]
		fmt.Fprintf(&b, "  %-24s %-18s %-6s %10d bytes  offset %10d  live %d..%d\n", "%"+buf.Name, buf.Type, buf.Role, buf.Size, buf.Offset, buf.Start, buf.End)
	}

	var inPlace []int
	var saved int64
	for i := range p.Buffers {
		if p.Buffers[i].Alias >= 0 {
			inPlace = append(inPlace, i)
			saved += alignUp(p.Buffers[i].Size)
		}
	}
	fmt.Fprintf(&b, "\nin place: %d results take the memory of an argument that dies there (%d bytes)\n", len(inPlace), saved)
	for _, i := range inPlace[:min(reportTop, len(inPlace))] {
		buf := &p.Buffers[i]
		fmt.Fprintf(&b, "  %-24s %-12s in place of %%%s\n", "%"+buf.Name, p.Graph.Value(buf.Value).Op, p.Buffers[buf.Alias].Name)
	}
	if n := len(inPlace) - reportTop; n > 0 {
		fmt.Fprintf(&b, "  ... and %d more\n", n)
	}
	return b.String()
}

// Ratio returns ArenaBytes / LowerBound: 1 when the arena is as small as
// the live ranges allow (0 for an empty plan).
func (p *Plan) Ratio() float64 {
	if p.LowerBound == 0 {
		return 0
	}
	return float64(p.ArenaBytes) / float64(p.LowerBound)
}

// peakStep returns the first step at which the blocks live add up to the
// lower bound.
func peakStep(bs []block, steps int) int {
	delta := make([]int64, max(steps, 1)+1)
	for _, b := range bs {
		delta[b.start] += b.size
		delta[b.end+1] -= b.size
	}
	var live, most int64
	at := 0
	for s, d := range delta[:len(delta)-1] {
		if live += d; live > most {
			most, at = live, s
		}
	}
	return at
}

func (p *Plan) stepName(s int) string {
	st := p.Steps[s]
	if st.Kind == Copy {
		return fmt.Sprintf("copy %%%s <- %%%s", p.Buffers[st.Out].Name, p.Buffers[st.Args[0]].Name)
	}
	v := p.Graph.Value(ir.ID(st.Out))
	return fmt.Sprintf("%%%s = %s", v.Name, v.Op)
}

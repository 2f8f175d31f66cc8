package planner

import (
	"fmt"

	"github.com/kilnml/kiln/ir"
)

// ScheduleKind selects the order New gives the kernel steps.
type ScheduleKind uint8

// Schedules.
const (
	// ScheduleAuto plans with both orders below and keeps the plan with
	// the smaller arena (then the smaller lower bound; ties keep the
	// memory-aware order).
	ScheduleAuto ScheduleKind = iota
	// ScheduleMemory is the memory-aware list schedule (memorySchedule).
	ScheduleMemory
	// ScheduleTopo is the definition order, which ir.Check proves
	// topological: for a graph built by the passes, the order the values
	// were made.
	ScheduleTopo
)

var scheduleNames = [...]string{ScheduleAuto: "auto", ScheduleMemory: "memory", ScheduleTopo: "topo"}

// String returns the schedule's name.
func (k ScheduleKind) String() string {
	if int(k) < len(scheduleNames) {
		return scheduleNames[k]
	}
	return fmt.Sprintf("schedule(%d)", uint8(k))
}

// memorySchedule returns the computed (non-leaf) values of g in a
// topological order chosen to keep few bytes live. It is a list scheduler:
// among the values whose arguments are all computed, it runs next
//
//  1. a value whose execution frees at least as many bytes as it
//     allocates (it is the last reader of temporaries that are not kept),
//     the most bytes freed net first; such a value never raises the live
//     bytes, and taking it now releases memory as early as possible, which
//     is what orders the backward pass to consume each activation as soon
//     as its gradient is ready;
//  2. otherwise the value with the lowest id, that is the next value in the
//     order the graph was built, so that values that only allocate are
//     computed close to their first use rather than as soon as they could
//     be (a transposed weight computed at the start would stay live through
//     the whole forward pass).
//
// Ties go to the lower value id, so the order is deterministic. keep[v]
// marks values whose memory the schedule cannot free (inputs, params,
// state, outputs, gradients and update values, which live to the end).
//
// The new value of an update waits, when it could run, until every other
// reader of its target has run (unless nothing else is left to run): then
// it is the target's last reader and the planner can compute it straight
// into the target's memory, without a copy (directUpdates).
//
// It runs in O((V + E) log V).
func memorySchedule(g *ir.Graph, keep []bool) []ir.ID {
	n := len(g.Values)
	size := make([]int64, n)
	for i := range g.Values {
		size[i] = alignUp(int64(g.Values[i].Type.Bytes()))
	}
	// users[a] lists the distinct computed values that read a (CSR).
	seen := make([]int, n)
	for i := range seen {
		seen[i] = -1
	}
	count := make([]int, n+1)
	pending := make([]int, n)
	for v := range g.Values {
		if g.Values[v].Op.IsLeaf() {
			continue
		}
		for _, a := range g.Values[v].Args {
			if seen[a] == v {
				continue
			}
			seen[a] = v
			count[a+1]++
			if !g.Values[a].Op.IsLeaf() {
				pending[v]++
			}
		}
	}
	for i := range n {
		count[i+1] += count[i]
	}
	users := make([]ir.ID, count[n])
	fill := append([]int(nil), count[:n]...)
	for i := range seen {
		seen[i] = -1
	}
	for v := range g.Values {
		if g.Values[v].Op.IsLeaf() {
			continue
		}
		for _, a := range g.Values[v].Args {
			if seen[a] == v {
				continue
			}
			seen[a] = v
			users[fill[a]] = ir.ID(v)
			fill[a]++
		}
	}
	remaining := make([]int, n)
	for a := range n {
		remaining[a] = count[a+1] - count[a]
	}
	// freed[v]: bytes v frees, the arguments it is the last reader of.
	freed := make([]int64, n)
	frees := func(a ir.ID) bool { return !keep[a] && !g.Values[a].Op.IsLeaf() }
	for a := range n {
		if remaining[a] == 1 && frees(ir.ID(a)) {
			freed[users[count[a]]] += size[a]
		}
	}
	// waitFor[v]: readers of the target of update value v, other than v,
	// not yet scheduled; updateOf[t]: the value that updates t, or -1.
	waitFor := make([]int, n)
	updateOf := make([]ir.ID, n)
	for i := range updateOf {
		updateOf[i] = -1
	}
	for _, u := range g.Updates {
		if u.Value == u.Target || g.Values[u.Value].Op.IsLeaf() || updateOf[u.Target] >= 0 {
			continue
		}
		updateOf[u.Target] = u.Value
		for _, r := range users[count[u.Target]:count[u.Target+1]] {
			if r != u.Value {
				waitFor[u.Value]++
			}
		}
	}
	deferred := make([]bool, n)
	done := make([]bool, n)
	h := &readyHeap{pos: make([]int, n)}
	for i := range h.pos {
		h.pos[i] = -1
	}
	h.less = func(x, y ir.ID) bool {
		nx, ny := freed[x]-size[x], freed[y]-size[y]
		if (nx >= 0) != (ny >= 0) {
			return nx >= 0
		}
		if nx >= 0 && nx != ny {
			return nx > ny
		}
		return x < y
	}
	for v := range g.Values {
		if !g.Values[v].Op.IsLeaf() && pending[v] == 0 {
			h.push(ir.ID(v))
		}
	}
	order := make([]ir.ID, 0, n)
	var waiting []ir.ID // deferred update values, in the order deferred
	for h.len() > 0 || len(waiting) > 0 {
		if h.len() == 0 {
			// Only update values wait: run the first (a reader of its
			// target depends on it, or on another waiting one).
			v := waiting[0]
			waiting = waiting[1:]
			if deferred[v] {
				deferred[v], waitFor[v] = false, 0
				h.push(v)
			}
			continue
		}
		v := h.pop()
		if waitFor[v] > 0 {
			deferred[v] = true
			waiting = append(waiting, v)
			continue
		}
		done[v] = true
		order = append(order, v)
		for _, a := range g.Values[v].Args {
			if seen[a] == -2-int(v) {
				continue
			}
			seen[a] = -2 - int(v)
			if u := updateOf[a]; u >= 0 && u != v {
				if waitFor[u]--; waitFor[u] == 0 && deferred[u] {
					deferred[u] = false
					h.push(u)
				}
			}
			remaining[a]--
			if remaining[a] != 1 || !frees(a) {
				continue
			}
			// One reader of a is left: running it now frees a.
			for _, u := range users[count[a]:count[a+1]] {
				if !done[u] {
					freed[u] += size[a]
					h.fix(u)
					break
				}
			}
		}
		for _, u := range users[count[v]:count[v+1]] {
			if pending[u]--; pending[u] == 0 {
				h.push(u)
			}
		}
	}
	return order
}

// readyHeap is a binary heap of value ids ordered by less, which tracks
// each id's position so that a changed priority can be restored (fix).
type readyHeap struct {
	ids  []ir.ID
	pos  []int // pos[id] is id's index in ids, or -1
	less func(x, y ir.ID) bool
}

func (h *readyHeap) len() int { return len(h.ids) }

func (h *readyHeap) push(v ir.ID) {
	h.ids = append(h.ids, v)
	h.pos[v] = len(h.ids) - 1
	h.up(len(h.ids) - 1)
}

func (h *readyHeap) pop() ir.ID {
	v := h.ids[0]
	last := len(h.ids) - 1
	h.swap(0, last)
	h.ids = h.ids[:last]
	h.pos[v] = -1
	if last > 0 {
		h.down(0)
	}
	return v
}

// fix restores the heap after v's priority changed; v need not be in it.
func (h *readyHeap) fix(v ir.ID) {
	if i := h.pos[v]; i >= 0 {
		h.up(i)
		h.down(h.pos[v])
	}
}

func (h *readyHeap) swap(i, j int) {
	h.ids[i], h.ids[j] = h.ids[j], h.ids[i]
	h.pos[h.ids[i]] = i
	h.pos[h.ids[j]] = j
}

func (h *readyHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(h.ids[i], h.ids[p]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *readyHeap) down(i int) {
	for {
		c := 2*i + 1
		if c >= len(h.ids) {
			return
		}
		if r := c + 1; r < len(h.ids) && h.less(h.ids[r], h.ids[c]) {
			c = r
		}
		if !h.less(h.ids[c], h.ids[i]) {
			return
		}
		h.swap(i, c)
		i = c
	}
}

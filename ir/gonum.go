package ir

import (
	"sort"

	"gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/iterator"
	"gonum.org/v1/gonum/graph/simple"
	"gonum.org/v1/gonum/graph/topo"
)

// Directed is a read-only view of a graph as a gonum graph.Directed: one node
// per value (node ID = value ID) and an edge from each argument to its user.
// It lets topological order, dominators and cycle checks come from gonum.
type Directed struct {
	g     *Graph
	users [][]ID
}

var _ graph.Directed = (*Directed)(nil)

// Directed returns a gonum view of g. It reflects g at the time of the call.
func (g *Graph) Directed() *Directed { return &Directed{g: g, users: g.Users()} }

func (d *Directed) has(id int64) bool { return id >= 0 && id < int64(len(d.g.Values)) }

func nodesOf(ids []ID) graph.Nodes {
	seen := make(map[ID]bool, len(ids))
	ns := make([]graph.Node, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			ns = append(ns, simple.Node(id))
		}
	}
	return iterator.NewOrderedNodes(ns)
}

// Node returns the node for value id, or nil.
func (d *Directed) Node(id int64) graph.Node {
	if !d.has(id) {
		return nil
	}
	return simple.Node(id)
}

// Nodes returns every value as a node, in id order.
func (d *Directed) Nodes() graph.Nodes {
	ns := make([]graph.Node, len(d.g.Values))
	for i := range ns {
		ns[i] = simple.Node(i)
	}
	return iterator.NewOrderedNodes(ns)
}

// From returns the users of value id.
func (d *Directed) From(id int64) graph.Nodes {
	if !d.has(id) {
		return graph.Empty
	}
	return nodesOf(d.users[id])
}

// To returns the arguments of value id.
func (d *Directed) To(id int64) graph.Nodes {
	if !d.has(id) {
		return graph.Empty
	}
	return nodesOf(d.g.Values[id].Args)
}

// HasEdgeFromTo reports whether value vid uses value uid.
func (d *Directed) HasEdgeFromTo(uid, vid int64) bool {
	if !d.has(uid) || !d.has(vid) {
		return false
	}
	for _, a := range d.g.Values[vid].Args {
		if int64(a) == uid {
			return true
		}
	}
	return false
}

// HasEdgeBetween reports whether either value uses the other.
func (d *Directed) HasEdgeBetween(xid, yid int64) bool {
	return d.HasEdgeFromTo(xid, yid) || d.HasEdgeFromTo(yid, xid)
}

// Edge returns the edge from uid to vid, or nil.
func (d *Directed) Edge(uid, vid int64) graph.Edge {
	if !d.HasEdgeFromTo(uid, vid) {
		return nil
	}
	return simple.Edge{F: simple.Node(uid), T: simple.Node(vid)}
}

// TopoOrder returns the values in a topological order, ties broken by value
// id (gonum's stabilized sort), so the order is deterministic.
func (g *Graph) TopoOrder() ([]ID, error) {
	sorted, err := topo.SortStabilized(g.Directed(), func(ns []graph.Node) {
		sort.Slice(ns, func(i, j int) bool { return ns[i].ID() < ns[j].ID() })
	})
	if err != nil {
		return nil, err
	}
	out := make([]ID, len(sorted))
	for i, n := range sorted {
		out[i] = ID(n.ID())
	}
	return out, nil
}

package ir

import (
	"fmt"
	"slices"
	"strconv"
)

// ID names a value of a graph: its index in Graph.Values.
type ID int32

// NoID marks the absence of a value.
const NoID ID = -1

// Pos is a position in a .kir source file; the zero Pos means "built in Go".
type Pos struct {
	Line, Col int
}

// Value is one SSA value: a leaf (input, param, state) or the result of an op
// applied to earlier values. Values are stored in definition order, so a
// graph's Values slice is always a topological order.
type Value struct {
	Name  string // without the leading %
	Type  Type
	Op    Op
	Args  []ID
	Attrs Attrs
	Pos   Pos
}

// GradPair records that Grad holds the gradient of the loss with respect to Param.
type GradPair struct {
	Param, Grad ID
}

// Update records that at the end of a step the persistent value Target
// (a param or state) takes the value Value.
type Update struct {
	Target, Value ID
}

// Graph is a static dataflow graph: values in definition order, the outputs,
// and (after autodiff and the optimizer) gradients and state updates.
type Graph struct {
	Name    string
	File    string // source file name for error messages, if parsed
	Values  []Value
	Outputs []ID
	Grads   []GradPair
	Updates []Update
	// Recompute marks forward values to be recomputed in the backward pass
	// instead of kept from the forward pass (the .kir statement
	// `recompute %a, %b`): ids of computed values, strictly increasing. The
	// remat pass realizes the marks and clears them.
	Recompute []ID

	names map[string]ID
}

// New returns an empty graph named name.
func New(name string) *Graph {
	return &Graph{Name: name, names: map[string]ID{}}
}

// Lookup returns the value named name (without %).
func (g *Graph) Lookup(name string) (ID, bool) {
	g.ensureNames()
	id, ok := g.names[name]
	return id, ok
}

func (g *Graph) ensureNames() {
	if g.names != nil && len(g.names) == len(g.Values) {
		return
	}
	g.names = make(map[string]ID, len(g.Values))
	for i, v := range g.Values {
		g.names[v.Name] = ID(i)
	}
}

// Value returns the value with the given id.
func (g *Graph) Value(id ID) *Value { return &g.Values[id] }

// Type returns the type of value id.
func (g *Graph) Type(id ID) Type { return g.Values[id].Type }

// NameOf returns the printable name of value id, with its %.
func (g *Graph) NameOf(id ID) string {
	if id < 0 || int(id) >= len(g.Values) {
		return "%<" + strconv.Itoa(int(id)) + ">"
	}
	return "%" + g.Values[id].Name
}

// UniqueName returns name if no value has it yet, else name with a numeric
// suffix that makes it unique.
func (g *Graph) UniqueName(name string) string {
	g.ensureNames()
	if name == "" {
		name = "t"
	}
	if _, taken := g.names[name]; !taken {
		return name
	}
	for i := len(g.Values); ; i++ {
		n := name + "." + strconv.Itoa(i)
		if _, taken := g.names[n]; !taken {
			return n
		}
	}
}

// Grow makes room for n more values, so that the next n appends do not
// copy the graph's values.
func (g *Graph) Grow(n int) { g.Values = slices.Grow(g.Values, n) }

// Append adds v at the end of the graph without any checking and returns its
// id. Its name must be unique. Most callers want Add, which infers the type.
func (g *Graph) Append(v Value) ID {
	g.ensureNames()
	id := ID(len(g.Values))
	if len(g.Values) == cap(g.Values) {
		// Double: append grows a large slice by a quarter, and the passes
		// that add to a graph of 100,000 values copied it dozens of times.
		g.Grow(len(g.Values) + 16)
	}
	g.Values = append(g.Values, v)
	g.names[v.Name] = id
	return id
}

// Leaf adds an input, param or state value of type t.
func (g *Graph) Leaf(op Op, name string, t Type, attrs Attrs) (ID, error) {
	if !op.IsLeaf() {
		return NoID, fmt.Errorf("%s is not a leaf op", op)
	}
	if err := CheckName("value", name); err != nil {
		return NoID, err
	}
	if _, dup := g.Lookup(name); dup {
		return NoID, fmt.Errorf("duplicate value %%%s", name)
	}
	attrs, err := Canonical(op, attrs)
	if err != nil {
		return NoID, err
	}
	if t.DType == InvalidDType || t.DType.Size() == 0 {
		return NoID, fmt.Errorf("%%%s has no valid dtype", name)
	}
	if _, err := t.BytesChecked(); err != nil {
		return NoID, err
	}
	return g.Append(Value{Name: name, Type: Type{t.DType, t.Shape.Clone()}, Op: op, Attrs: attrs}), nil
}

// Add appends op applied to args with attrs, inferring its type. An empty
// name is replaced by a fresh one. The error names the op and the argument
// types when they do not fit.
func (g *Graph) Add(name string, op Op, attrs Attrs, args ...ID) (ID, error) {
	t, attrs, err := g.Infer(op, attrs, args)
	if err != nil {
		return NoID, err
	}
	if name == "" {
		name = g.UniqueName("t" + strconv.Itoa(len(g.Values)))
	} else if err := CheckName("value", name); err != nil {
		return NoID, err
	} else if _, dup := g.Lookup(name); dup {
		return NoID, fmt.Errorf("duplicate value %%%s", name)
	}
	return g.Append(Value{Name: name, Type: t, Op: op, Args: append([]ID(nil), args...), Attrs: attrs}), nil
}

// Infer returns the type of op applied to args with attrs, checking arity and
// attributes, and the canonical attributes (defaults filled in).
func (g *Graph) Infer(op Op, attrs Attrs, args []ID) (Type, Attrs, error) {
	if op <= 0 || op >= numOps {
		return Type{}, nil, fmt.Errorf("unknown op %d", op)
	}
	if op.IsLeaf() {
		return Type{}, nil, fmt.Errorf("%s is a declaration, not an op", op)
	}
	if err := CheckArity(op, len(args)); err != nil {
		return Type{}, nil, err
	}
	ts := make([]Type, len(args))
	for i, a := range args {
		if a < 0 || int(a) >= len(g.Values) {
			return Type{}, nil, fmt.Errorf("%s: argument %d is not a value of this graph", op, i)
		}
		ts[i] = g.Values[a].Type
	}
	attrs, err := Canonical(op, attrs)
	if err != nil {
		return Type{}, nil, err
	}
	t, err := op.Info().Infer(ts, attrs)
	if err != nil {
		return Type{}, nil, fmt.Errorf("%s: %v", op, err)
	}
	// A result of legal operands may be too large: a matmul, a broadcast,
	// a reshape's attribute.
	if _, err := t.BytesChecked(); err != nil {
		return Type{}, nil, fmt.Errorf("%s: result %v", op, err)
	}
	return t, attrs, nil
}

// Rename gives value id a new name, which must not be taken.
func (g *Graph) Rename(id ID, name string) error {
	g.ensureNames()
	if other, taken := g.names[name]; taken && other != id {
		return fmt.Errorf("duplicate value %%%s", name)
	}
	delete(g.names, g.Values[id].Name)
	g.Values[id].Name = name
	g.names[name] = id
	return nil
}

// Users returns, for every value, the ids of the values that use it as an
// argument, in increasing order (a value used twice by one user appears twice).
func (g *Graph) Users() [][]ID {
	users := make([][]ID, len(g.Values))
	for i, v := range g.Values {
		for _, a := range v.Args {
			users[a] = append(users[a], ID(i))
		}
	}
	return users
}

// IDsOf returns the ids of all values whose op is op, in order.
func (g *Graph) IDsOf(op Op) []ID {
	var ids []ID
	for i, v := range g.Values {
		if v.Op == op {
			ids = append(ids, ID(i))
		}
	}
	return ids
}

// Roots returns the values the graph delivers, which every pass keeps and
// no step may overwrite before they are read: its outputs, each param's
// gradient, and each update's new value and target, in that order (a value
// may come more than once).
func (g *Graph) Roots() []ID {
	roots := make([]ID, 0, len(g.Outputs)+len(g.Grads)+2*len(g.Updates))
	roots = append(roots, g.Outputs...)
	for _, gp := range g.Grads {
		roots = append(roots, gp.Grad)
	}
	for _, u := range g.Updates {
		roots = append(roots, u.Value, u.Target)
	}
	return roots
}

// RootMask returns, for each value, whether it is one of Roots.
func (g *Graph) RootMask() []bool {
	mask := make([]bool, len(g.Values))
	for _, id := range g.Roots() {
		mask[id] = true
	}
	return mask
}

// mapRoots replaces each id the graph's outputs, gradients and updates
// hold (the param of a gradient, the target of an update too) by f(id).
func (g *Graph) mapRoots(f func(ID) ID) {
	for i, o := range g.Outputs {
		g.Outputs[i] = f(o)
	}
	for i := range g.Grads {
		g.Grads[i].Param = f(g.Grads[i].Param)
		g.Grads[i].Grad = f(g.Grads[i].Grad)
	}
	for i := range g.Updates {
		g.Updates[i].Target = f(g.Updates[i].Target)
		g.Updates[i].Value = f(g.Updates[i].Value)
	}
}

// UpdatesParams reports whether an update of g targets a param: whether g
// is a training step, as opposed to a graph whose updates are only of state
// (the running statistics a forward pass keeps).
func (g *Graph) UpdatesParams() bool {
	for _, u := range g.Updates {
		if g.Values[u.Target].Op == OpParam {
			return true
		}
	}
	return false
}

// Inputs returns the ids of the input values in order.
func (g *Graph) Inputs() []ID { return g.IDsOf(OpInput) }

// Params returns the ids of the trainable params in order.
func (g *Graph) Params() []ID { return g.IDsOf(OpParam) }

// Clone returns a deep copy of g.
func (g *Graph) Clone() *Graph {
	c := &Graph{Name: g.Name, File: g.File}
	c.Values = make([]Value, len(g.Values))
	for i, v := range g.Values {
		v.Args = append([]ID(nil), v.Args...)
		v.Attrs = append(Attrs(nil), v.Attrs...)
		v.Type.Shape = v.Type.Shape.Clone()
		c.Values[i] = v
	}
	c.Outputs = append([]ID(nil), g.Outputs...)
	c.Grads = append([]GradPair(nil), g.Grads...)
	c.Updates = append([]Update(nil), g.Updates...)
	c.Recompute = append([]ID(nil), g.Recompute...)
	return c
}

// Retain keeps only the values with keep[id] set, renumbering ids densely
// and in the same order. Every kept value's arguments, and every output,
// gradient and update, must be kept; recompute marks of values not kept are
// dropped.
func (g *Graph) Retain(keep []bool) {
	remap := make([]ID, len(g.Values))
	n := 0
	for _, k := range keep[:len(g.Values)] {
		if k {
			n++
		}
	}
	vals := make([]Value, 0, n)
	for i, v := range g.Values {
		if !keep[i] {
			remap[i] = NoID
			continue
		}
		remap[i] = ID(len(vals))
		for j, a := range v.Args {
			v.Args[j] = remap[a]
		}
		vals = append(vals, v)
	}
	g.Values = vals
	g.mapRoots(func(id ID) ID { return remap[id] })
	marks := g.Recompute[:0]
	for _, id := range g.Recompute {
		if remap[id] != NoID {
			marks = append(marks, remap[id])
		}
	}
	g.Recompute = marks
	g.names = nil
}

// Permute reorders the values of g: order lists every id exactly once, in
// the new definition order, which must define every argument before its
// use. Ids are renumbered to positions in order, in the values' arguments,
// the outputs, gradients, updates and recompute marks. It runs in time
// linear in the size of the graph and is how passes insert values in the
// middle: append them, then permute them into place.
func (g *Graph) Permute(order []ID) error {
	n := len(g.Values)
	if len(order) != n {
		return fmt.Errorf("permute: %d ids for %d values", len(order), n)
	}
	remap := make([]ID, n)
	for i := range remap {
		remap[i] = NoID
	}
	for pos, id := range order {
		if id < 0 || int(id) >= n || remap[id] != NoID {
			return fmt.Errorf("permute: id %d is out of range or repeated", id)
		}
		remap[id] = ID(pos)
	}
	// Room for an eighth more: passes permute, then append a few values in
	// their next round, which would otherwise copy them all.
	vals := make([]Value, n, n+n/8)
	total := 0
	for _, v := range g.Values {
		total += len(v.Args)
	}
	all := make([]ID, total) // every value's new arguments, in one allocation
	for pos, id := range order {
		v := g.Values[id]
		args := all[:len(v.Args):len(v.Args)]
		all = all[len(v.Args):]
		for j, a := range v.Args {
			if remap[a] >= ID(pos) {
				return fmt.Errorf("permute: %s would come before its argument %s", g.NameOf(id), g.NameOf(a))
			}
			args[j] = remap[a]
		}
		v.Args = args
		vals[pos] = v
	}
	g.Values = vals
	g.mapRoots(func(id ID) ID { return remap[id] })
	for i, id := range g.Recompute {
		g.Recompute[i] = remap[id]
	}
	slices.Sort(g.Recompute)
	g.names = nil
	return nil
}

// MarkRecompute adds ids to the recompute marks, keeping them sorted and
// unique.
func (g *Graph) MarkRecompute(ids ...ID) {
	g.Recompute = append(g.Recompute, ids...)
	slices.Sort(g.Recompute)
	g.Recompute = slices.Compact(g.Recompute)
}

// GradOf returns the gradient value of param, if autodiff has recorded one.
func (g *Graph) GradOf(param ID) (ID, bool) {
	for _, gp := range g.Grads {
		if gp.Param == param {
			return gp.Grad, true
		}
	}
	return NoID, false
}

// Where formats the source position of value id for an error message:
// "file:line:col" when known, else the value's name.
func (g *Graph) Where(id ID) string {
	v := &g.Values[id]
	if v.Pos.Line > 0 {
		f := g.File
		if f == "" {
			f = "<input>"
		}
		return fmt.Sprintf("%s:%d:%d", f, v.Pos.Line, v.Pos.Col)
	}
	return g.NameOf(id)
}

// ReplaceUses makes every argument, gradient and update that refers to old
// refer to new instead. Outputs keep referring to old: they are the names
// users read results by, so a pass rewrites an output in place rather than
// redirect it. new must be defined before every user of old. It walks the
// whole graph; to replace many values at once use RedirectUses.
func (g *Graph) ReplaceUses(old, new ID) {
	to := make([]ID, len(g.Values))
	for i := range to {
		to[i] = ID(i)
	}
	to[old] = new
	g.RedirectUses(to)
}

// RedirectUses replaces many values at once, in one walk: to[id] is the
// value that takes id's place (to[id] == id when none does), and chains are
// followed (to[a] = b, to[b] = c sends a's uses to c). Arguments, gradients
// and updates are redirected; outputs are not (see ReplaceUses). Every
// replacement must be defined before the users of what it replaces.
func (g *Graph) RedirectUses(to []ID) {
	find := func(id ID) ID {
		for to[id] != id {
			if to[to[id]] != to[id] {
				to[id] = to[to[id]] // halve the chain
			}
			id = to[id]
		}
		return id
	}
	for i := range g.Values {
		args := g.Values[i].Args
		for j, a := range args {
			args[j] = find(a)
		}
	}
	for i := range g.Grads {
		g.Grads[i].Grad = find(g.Grads[i].Grad)
	}
	for i := range g.Updates {
		g.Updates[i].Value = find(g.Updates[i].Value)
	}
}

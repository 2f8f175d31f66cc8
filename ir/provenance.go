package ir

// Provenance returns the "from" attribute of a fused op: the .kir lines of
// the values it replaces, in order, as they read before fusion. kiln dump
// prints it with the fused op, and the HTML view highlights the group.
func (g *Graph) Provenance(ids ...ID) AttrValue {
	l := AttrValue{Kind: AttrList, L: make([]AttrValue, len(ids))}
	for i, id := range ids {
		l.L[i] = String(g.FormatValue(id))
	}
	return l
}

// FromAttr is the name of the attribute in which fused ops record what they
// replaced.
const FromAttr = "from"

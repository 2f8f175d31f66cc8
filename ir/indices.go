package ir

// classLabels: a loss's integer labels (argument 1) are below the logits'
// classes (the second axis of argument 0); probability targets are not
// indices.
func classLabels(args []Type, _ Attrs) []IndexArg {
	if len(args) < 2 || !args[1].DType.IsInt() || len(args[0].Shape) < 2 {
		return nil
	}
	return []IndexArg{{Arg: 1, N: args[0].Shape[1]}}
}

// oneHotClasses: one_hot's labels are below its classes.
func oneHotClasses(_ []Type, attrs Attrs) []IndexArg {
	return []IndexArg{{Arg: 0, N: attrs.Int("classes", 2)}}
}

// embeddingRows: an embedding's indices are below the table's rows.
func embeddingRows(args []Type, _ Attrs) []IndexArg {
	if len(args[0].Shape) == 0 {
		return nil
	}
	return []IndexArg{{Arg: 1, N: args[0].Shape[0]}}
}

// indexAlongAxis: the index (argument 1) of gather, index_select,
// scatter_add and index_add is below x's size along the axis.
func indexAlongAxis(args []Type, attrs Attrs) []IndexArg {
	ax, err := Axis(attrs, len(args[0].Shape))
	if err != nil {
		return nil
	}
	return []IndexArg{{Arg: 1, N: args[0].Shape[ax]}}
}

package ir

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Fused elementwise chains, matmul epilogues and reduction prologues: ops
// that carry a small elementwise program in their attributes. They appear
// only after autodiff.
//
// A program is a list of instructions, one string each, printed in the
// dump as it is stored:
//
//	program=["t0 = mul i0, i1", "t1 = tanh t0", "t2 = add t1, 0.5", "t3 = clip t2 {max=1.0, min=0.0}"]
//
// Instruction k defines tk as an elementwise op of the table (any op of
// ClassElementwise, with its canonical attributes) applied to operands: iN,
// the op's N-th program input broadcast to the result shape under NumPy
// rules; tJ, the result of an earlier instruction; or a number, a scalar
// immediate (a folded scalar const) of the program's float dtype, which is
// the dtype of its first input that is not bool. The last instruction's
// result is the program's result. A program's type is inferred by applying
// each instruction's own Infer in turn to its operand types, so a fused op
// has exactly the type of the chain it replaced.

// fuseewNoGrad is the NoGrad reason of every fused op.
const fuseewNoGrad = "fused ops appear after autodiff"

// ProgramAttr is the name of the attribute that holds an elementwise
// program.
const ProgramAttr = "program"

// EwOperandKind says where an operand of a program instruction comes from.
type EwOperandKind uint8

// The operand kinds.
const (
	EwInput EwOperandKind = iota + 1 // iN: program input N
	EwTemp                           // tJ: the result of instruction J
	EwImm                            // a scalar immediate
)

// EwOperand is one operand of a program instruction.
type EwOperand struct {
	Kind  EwOperandKind
	Index int     // the input or instruction number (EwInput, EwTemp)
	Imm   float64 // the value (EwImm), converted to the program's dtype when run
}

// String spells the operand as a program does: i3, t1 or a number.
func (o EwOperand) String() string {
	switch o.Kind {
	case EwInput:
		return "i" + strconv.Itoa(o.Index)
	case EwTemp:
		return "t" + strconv.Itoa(o.Index)
	}
	return formatFloat(o.Imm)
}

// EwInstr is one instruction of an elementwise program: Op applied to Args
// with Attrs (canonical for Op).
type EwInstr struct {
	Op    Op
	Args  []EwOperand
	Attrs Attrs
}

// EwProgram is an elementwise program: instruction k defines tk, and the
// last one is the result.
type EwProgram []EwInstr

// Format returns the text of instruction k: "tk = op a, b {attrs}".
func (in EwInstr) Format(k int) string {
	var b strings.Builder
	b.WriteByte('t')
	b.WriteString(strconv.Itoa(k))
	b.WriteString(" = ")
	b.WriteString(in.Op.String())
	for j, a := range in.Args {
		if j == 0 {
			b.WriteByte(' ')
		} else {
			b.WriteString(", ")
		}
		b.WriteString(a.String())
	}
	if s := in.Attrs.String(); s != "" {
		b.WriteByte(' ')
		b.WriteString(s)
	}
	return b.String()
}

// Attr returns the program as the list-of-strings attribute that stores it.
func (p EwProgram) Attr() AttrValue {
	l := AttrValue{Kind: AttrList, L: make([]AttrValue, len(p))}
	for k, in := range p {
		l.L[k] = String(in.Format(k))
	}
	return l
}

// EwProgramOf parses the program attribute of a fused op.
func EwProgramOf(attrs Attrs) (EwProgram, error) {
	v, ok := attrs.Get(ProgramAttr)
	if !ok {
		return nil, fmt.Errorf("needs attribute %s", ProgramAttr)
	}
	return ParseEwProgram(v)
}

// ParseEwProgram parses a program from its attribute: a non-empty list of
// instruction strings, each in its canonical spelling (the one Format
// gives), each op elementwise with its arity and canonical attributes, and
// each tJ defined by an earlier instruction. Operand types are checked by
// Types, which also needs the inputs.
func ParseEwProgram(v AttrValue) (EwProgram, error) {
	if v.Kind != AttrList || len(v.L) == 0 {
		return nil, fmt.Errorf("%s must be a non-empty list of instruction strings, found %s", ProgramAttr, v)
	}
	p := make(EwProgram, len(v.L))
	for k, s := range v.L {
		if s.Kind != AttrString {
			return nil, fmt.Errorf("%s[%d]: expected an instruction string, found %s", ProgramAttr, k, s)
		}
		in, err := fuseewParseInstrCached(k, s.S)
		if err != nil {
			return nil, fmt.Errorf("%s[%d] %q: %v", ProgramAttr, k, s.S, err)
		}
		p[k] = in
	}
	return p, nil
}

// fuseewInstrCache holds instructions already parsed, by number and text:
// the fuse pass and ir.Check infer the type of every fused op, and a large
// graph's programs repeat the same few instructions thousands of times. It
// keeps at most fuseewInstrCacheMax entries (it is emptied when full).
var fuseewInstrCache struct {
	sync.Mutex
	m map[fuseewInstrKey]EwInstr
}

type fuseewInstrKey struct {
	k int
	s string
}

const fuseewInstrCacheMax = 1 << 12

// fuseewParseInstrCached is fuseewParseInstr, remembering the instructions
// it parsed without error. Each call returns an Args and an Attrs slice of
// its own; the attribute values in them are shared (no one modifies an
// attribute value in place).
func fuseewParseInstrCached(k int, s string) (EwInstr, error) {
	key := fuseewInstrKey{k, s}
	c := &fuseewInstrCache
	c.Lock()
	in, ok := c.m[key]
	c.Unlock()
	if !ok {
		var err error
		if in, err = fuseewParseInstr(k, s); err != nil {
			return in, err
		}
		c.Lock()
		if c.m == nil || len(c.m) >= fuseewInstrCacheMax {
			c.m = map[fuseewInstrKey]EwInstr{}
		}
		c.m[key] = in
		c.Unlock()
	}
	in.Args, in.Attrs = slices.Clone(in.Args), slices.Clone(in.Attrs)
	return in, nil
}

// fuseewParseInstr parses instruction k.
func fuseewParseInstr(k int, s string) (in EwInstr, err error) {
	toks, bad, msg := lexLine(s)
	if bad != nil {
		return in, fmt.Errorf("column %d: %s", bad.col, msg)
	}
	p := &parser{toks: toks}
	defer func() {
		if r := recover(); r != nil {
			pe, ok := r.(parseError)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("column %d: %s", pe.e.Col, pe.e.Msg)
		}
	}()
	name := p.next()
	if want := "t" + strconv.Itoa(k); name.kind != tIdent || name.text != want {
		p.failAt(name.col, "expected the result name %s, found %s", want, name.describe())
	}
	p.expectPunct("=")
	opTok := p.next()
	op, ok := LookupOp(opTok.text)
	if opTok.kind != tIdent || !ok {
		p.failAt(opTok.col, "expected an op name, found %s", opTok.describe())
	}
	if op.Info().Class != ClassElementwise {
		p.failAt(opTok.col, "%s is not an elementwise op", op)
	}
	in.Op = op
	if t := p.peek(); t.kind != tEOL && !(t.kind == tPunct && t.text == "{") {
		for {
			in.Args = append(in.Args, fuseewOperand(p, p.next(), k))
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	attrs, acol := p.attrs()
	p.expectEOL()
	if err := CheckArity(op, len(in.Args)); err != nil {
		p.failAt(opTok.col, "%v", err)
	}
	canon, err := Canonical(op, attrs)
	if err != nil {
		p.failAt(acol, "%v", err)
	}
	in.Attrs = canon
	if f := in.Format(k); f != s {
		p.failAt(1, "not in canonical form %q", f)
	}
	return in, nil
}

// fuseewOperand parses operand token t of instruction k.
func fuseewOperand(p *parser, t token, k int) EwOperand {
	switch t.kind {
	case tIdent:
		switch t.text {
		case "inf":
			return EwOperand{Kind: EwImm, Imm: math.Inf(1)}
		case "nan":
			return EwOperand{Kind: EwImm, Imm: math.NaN()}
		}
		if len(t.text) > 1 && (t.text[0] == 'i' || t.text[0] == 't') {
			n, err := strconv.Atoi(t.text[1:])
			if err == nil && n >= 0 {
				if t.text[0] == 'i' {
					return EwOperand{Kind: EwInput, Index: n}
				}
				if n >= k {
					p.failAt(t.col, "%s is not defined before instruction t%d", t.text, k)
				}
				return EwOperand{Kind: EwTemp, Index: n}
			}
		}
	case tNumber:
		f, _ := p.number(t).AsFloat()
		return EwOperand{Kind: EwImm, Imm: f}
	}
	p.failAt(t.col, "expected an operand (iN, tJ or a number), found %s", t.describe())
	return EwOperand{}
}

// Types returns the type of every instruction's result for the given input
// types, applying each op's Infer to its operand types in turn. Every input
// and every result but the last must be used; an immediate has the dtype of
// the first input that is not bool, and needs one.
func (p EwProgram) Types(inputs []Type) ([]Type, error) {
	imm := InvalidDType
	for _, t := range inputs {
		if t.DType != Bool {
			imm = t.DType
			break
		}
	}
	usedIn := make([]bool, len(inputs))
	usedT := make([]bool, len(p))
	types := make([]Type, len(p))
	for k, in := range p {
		args := make([]Type, len(in.Args))
		for j, a := range in.Args {
			switch a.Kind {
			case EwInput:
				if a.Index >= len(inputs) {
					return nil, fmt.Errorf("t%d: %s names input %d of %d", k, a, a.Index, len(inputs))
				}
				usedIn[a.Index] = true
				args[j] = inputs[a.Index]
			case EwTemp:
				if a.Index >= k {
					return nil, fmt.Errorf("t%d: %s is not defined before it", k, a)
				}
				usedT[a.Index] = true
				args[j] = types[a.Index]
			default:
				if imm == InvalidDType {
					return nil, fmt.Errorf("t%d: immediate %s needs an input that is not bool to take its dtype from", k, a)
				}
				args[j] = Type{imm, Shape{}}
			}
		}
		if err := CheckArity(in.Op, len(args)); err != nil {
			return nil, fmt.Errorf("t%d: %v", k, err)
		}
		if in.Op.Info().Class != ClassElementwise {
			return nil, fmt.Errorf("t%d: %s is not an elementwise op", k, in.Op)
		}
		t, err := in.Op.Info().Infer(args, in.Attrs)
		if err != nil {
			return nil, fmt.Errorf("t%d = %s: %v", k, in.Op, err)
		}
		types[k] = t
	}
	for i, u := range usedIn {
		if !u {
			return nil, fmt.Errorf("input i%d is not used", i)
		}
	}
	for k, u := range usedT[:len(p)-1] {
		if !u {
			return nil, fmt.Errorf("t%d is not used (only the last result may be unused)", k)
		}
	}
	return types, nil
}

// fusedElementwiseOps returns the rows of fused_elementwise, fused_matmul
// and fused_reduce.
func fusedElementwiseOps() []opRow {
	program := AttrSpec{Name: ProgramAttr, Kind: AttrList, Required: true,
		Doc: `the instructions, one string each: "tK = OP OPERAND, ... {ATTRS}", with operands iN (input N, broadcast to the result shape), tJ (an earlier result) or a number (a scalar of the program's dtype); the last result is the op's`}
	from := AttrSpec{Name: FromAttr, Kind: AttrList,
		Doc: "the .kir lines of the values the fuse pass replaced, in order"}
	reduceAttrs := append(append([]AttrSpec{}, axesAttrs...), from,
		AttrSpec{Name: "op", Kind: AttrString, Default: defString("sum"), Doc: `"sum" or "mean"`}, program)
	return []opRow{
		{OpFusedElementwise, OpInfo{Name: "fused_elementwise", Args: []string{"in"}, Variadic: true, Class: ClassOther, ElementwiseKernel: true,
			Attrs: []AttrSpec{from, program},
			Doc:   "an elementwise program run in one pass over the result: each input broadcast to the result shape, each instruction computed with its op's own per-element code, so the result is bitwise that of the ops it replaced (made by the fuse pass)",
			Infer: fuseewInferElementwise,
			Cost: func(args []Type, out Type, attrs Attrs) float64 {
				return largestElems(args, out) * programLength(attrs)
			},
			NoGrad: fuseewNoGrad}},
		{OpFusedMatmul, OpInfo{Name: "fused_matmul", Args: []string{"a", "b", "in"}, Optional: 1, Variadic: true,
			Attrs: append([]AttrSpec{from, program}, matmulAttrs...),
			Doc:   "matmul(a, b) {transpose_a, transpose_b} with an elementwise epilogue: the program (input i0 is the product, i1... the extra arguments) is applied to the product in its own buffer, block by block; the result has the product's dtype and element count (made by the fuse pass)",
			Infer: fuseewInferMatmul,
			Cost: func(args []Type, out Type, attrs Attrs) float64 {
				return costMatmul(args, out, attrs) + float64(out.Shape.NumElements())*programLength(attrs)
			},
			NoGrad: fuseewNoGrad}},
		{OpFusedReduce, OpInfo{Name: "fused_reduce", Args: []string{"in"}, Variadic: true,
			Attrs: reduceAttrs,
			Doc:   "sum or mean {axes, keepdims} of an elementwise program's result, which is never stored: the reduction with its elementwise prologue in one pass, adding in the order sum does (made by the fuse pass)",
			Infer: fuseewInferReduce,
			Cost: func(args []Type, out Type, attrs Attrs) float64 {
				return largestElems(args, out) * (programLength(attrs) + 1)
			},
			NoGrad: fuseewNoGrad}},
	}
}

// fuseewProgramType returns the type of attrs' program over inputs.
func fuseewProgramType(inputs []Type, attrs Attrs) (Type, error) {
	p, err := EwProgramOf(attrs)
	if err != nil {
		return Type{}, err
	}
	types, err := p.Types(inputs)
	if err != nil {
		return Type{}, err
	}
	return types[len(types)-1], nil
}

// fuseewInferElementwise infers fused_elementwise: its program's type.
func fuseewInferElementwise(args []Type, a Attrs) (Type, error) {
	return fuseewProgramType(args, a)
}

// fuseewInferMatmul infers fused_matmul: the epilogue's type over the
// product and the extra arguments, which must fit in the product's buffer.
func fuseewInferMatmul(args []Type, a Attrs) (Type, error) {
	m, err := inferMatmul(args[:2], a)
	if err != nil {
		return Type{}, fmt.Errorf("matmul: %v", err)
	}
	t, err := fuseewProgramType(append([]Type{m}, args[2:]...), a)
	if err != nil {
		return Type{}, err
	}
	if t.DType != m.DType || t.Shape.NumElements() != m.Shape.NumElements() {
		return Type{}, fmt.Errorf("the epilogue gives %s, which does not fit in the product's buffer (%s)", t, m)
	}
	return t, nil
}

// fuseewInferReduce infers fused_reduce: sum's or mean's type for the
// program's result.
func fuseewInferReduce(args []Type, a Attrs) (Type, error) {
	x, err := fuseewProgramType(args, a)
	if err != nil {
		return Type{}, err
	}
	switch op := a.Str("op", "sum"); op {
	case "sum":
		return inferReduce([]Type{x}, a)
	case "mean":
		return inferReduceFloat([]Type{x}, a)
	default:
		return Type{}, fmt.Errorf(`op must be "sum" or "mean", found %q`, op)
	}
}

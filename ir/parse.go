package ir

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Error is a parse or check error at a source position.
type Error struct {
	File      string
	Line, Col int
	Msg       string
}

// Error formats the error as file:line:col: message.
func (e *Error) Error() string {
	f := e.File
	if f == "" {
		f = "<input>"
	}
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", f, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", f, e.Line, e.Col, e.Msg)
}

type tokKind uint8

const (
	tEOL tokKind = iota
	tIdent
	tValue  // %name
	tNumber // int or float literal
	tString
	tPunct // one of : = , { } [ ]
)

type token struct {
	kind tokKind
	text string
	col  int
}

// describe names t for an error message, quoting at most MaxQuoted
// characters of its text.
func (t token) describe() string {
	switch t.kind {
	case tEOL:
		return "end of line"
	case tString:
		return strconv.Quote(Excerpt(t.text))
	case tValue:
		return "%" + Excerpt(t.text)
	}
	return strconv.Quote(Excerpt(t.text))
}

func isNameByte(c rune) bool {
	return c == '_' || c == '.' || unicode.IsLetter(c) || unicode.IsDigit(c)
}

// lexLine splits one line into tokens; comments (# to end of line) are dropped.
func lexLine(line string) ([]token, *token, string) {
	var toks []token
	rs := []rune(line)
	for i := 0; i < len(rs); {
		c := rs[i]
		col := i + 1
		switch {
		case c == '#':
			i = len(rs)
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case strings.ContainsRune(":=,{}[]", c):
			toks = append(toks, token{tPunct, string(c), col})
			i++
		case c == '%':
			j := i + 1
			for j < len(rs) && isNameByte(rs[j]) {
				j++
			}
			if j == i+1 {
				return nil, &token{col: col}, "expected a value name after %"
			}
			toks = append(toks, token{tValue, string(rs[i+1 : j]), col})
			i = j
		case c == '"':
			j := i + 1
			for j < len(rs) && rs[j] != '"' {
				if rs[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(rs) {
				return nil, &token{col: col}, "unterminated string"
			}
			s, err := strconv.Unquote(string(rs[i : j+1]))
			if err != nil {
				return nil, &token{col: col}, "bad string literal " + Excerpt(string(rs[i:j+1]))
			}
			toks = append(toks, token{tString, s, col})
			i = j + 1
		case c == '-' || c == '+' || unicode.IsDigit(c):
			j := i + 1
			for j < len(rs) && (unicode.IsLetter(rs[j]) || unicode.IsDigit(rs[j]) || rs[j] == '.' ||
				((rs[j] == '-' || rs[j] == '+') && (rs[j-1] == 'e' || rs[j-1] == 'E'))) {
				j++
			}
			toks = append(toks, token{tNumber, string(rs[i:j]), col})
			i = j
		case unicode.IsLetter(c) || c == '_':
			j := i + 1
			for j < len(rs) && (unicode.IsLetter(rs[j]) || unicode.IsDigit(rs[j]) || rs[j] == '_') {
				j++
			}
			toks = append(toks, token{tIdent, string(rs[i:j]), col})
			i = j
		default:
			return nil, &token{col: col}, fmt.Sprintf("unexpected character %q", c)
		}
	}
	return append(toks, token{tEOL, "", len(rs) + 1}), nil, ""
}

type parser struct {
	g     *Graph
	file  string
	line  int
	toks  []token
	pos   int
	depth int // of attribute lists being parsed
}

type parseError struct{ e *Error }

func (p *parser) failAt(col int, format string, args ...any) {
	panic(parseError{&Error{File: p.file, Line: p.line, Col: col, Msg: fmt.Sprintf(format, args...)}})
}

func (p *parser) peek() token { return p.toks[p.pos] }

func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.kind != tEOL {
		p.pos++
	}
	return t
}

func (p *parser) expectPunct(s string) token {
	t := p.next()
	if t.kind != tPunct || t.text != s {
		p.failAt(t.col, "expected %q, found %s", s, t.describe())
	}
	return t
}

func (p *parser) acceptPunct(s string) bool {
	if t := p.peek(); t.kind == tPunct && t.text == s {
		p.pos++
		return true
	}
	return false
}

func (p *parser) expectEOL() {
	if t := p.peek(); t.kind != tEOL {
		p.failAt(t.col, "expected end of line, found %s", t.describe())
	}
}

// Parse reads a graph in the .kir text format. file names the source in
// error messages, which read file:line:col: what was expected, what was found.
func Parse(file string, src []byte) (g *Graph, err error) {
	p := &parser{file: file}
	defer func() {
		if r := recover(); r != nil {
			pe, ok := r.(parseError)
			if !ok {
				panic(r)
			}
			g, err = nil, pe.e
		}
	}()
	lines := strings.Split(string(src), "\n")
	for i, line := range lines {
		p.line = i + 1
		toks, bad, msg := lexLine(line)
		if bad != nil {
			p.failAt(bad.col, "%s", msg)
		}
		p.toks, p.pos = toks, 0
		if p.peek().kind == tEOL {
			continue
		}
		p.statement()
	}
	if p.g == nil {
		return nil, &Error{File: file, Msg: "expected a 'graph NAME' line, found no statements"}
	}
	p.g.File = file
	return p.g, nil
}

func (p *parser) statement() {
	t := p.peek()
	if p.g == nil {
		if t.kind != tIdent || t.text != "graph" {
			p.failAt(t.col, "expected 'graph NAME' as the first statement, found %s", t.describe())
		}
		p.next()
		name := p.next()
		if name.kind != tIdent && name.kind != tNumber {
			p.failAt(name.col, "expected a graph name, found %s", name.describe())
		}
		if err := CheckName("graph", name.text); err != nil {
			p.failAt(name.col, "%v", err)
		}
		p.expectEOL()
		p.g = New(name.text)
		p.g.File = p.file
		return
	}
	switch {
	case t.kind == tValue:
		p.opStatement()
	case t.kind == tIdent && (t.text == "input" || t.text == "param" || t.text == "state"):
		p.leafStatement()
	case t.kind == tIdent && t.text == "output":
		p.next()
		for {
			p.g.Outputs = append(p.g.Outputs, p.valueRef())
			if !p.acceptPunct(",") {
				break
			}
		}
		p.expectEOL()
	case t.kind == tIdent && (t.text == "grad" || t.text == "update"):
		p.next()
		lhs := p.valueRef()
		lcol := p.toks[p.pos-1].col
		p.expectPunct("=")
		rhs := p.valueRef()
		p.expectEOL()
		if t.text == "grad" {
			if p.g.Values[lhs].Op != OpParam {
				p.failAt(lcol, "grad: expected a param, found %s (%s)", p.g.NameOf(lhs), p.g.Values[lhs].Op)
			}
			p.g.Grads = append(p.g.Grads, GradPair{lhs, rhs})
		} else {
			if op := p.g.Values[lhs].Op; op != OpParam && op != OpState {
				p.failAt(lcol, "update: expected a param or state, found %s (%s)", p.g.NameOf(lhs), op)
			}
			p.g.Updates = append(p.g.Updates, Update{lhs, rhs})
		}
	case t.kind == tIdent && t.text == "recompute":
		p.next()
		for {
			v := p.peek()
			id := p.valueRef()
			if op := p.g.Values[id].Op; op.IsLeaf() {
				p.failAt(v.col, "recompute: %s is a %s; only computed values can be recomputed", p.g.NameOf(id), op)
			}
			if slices.Contains(p.g.Recompute, id) {
				p.failAt(v.col, "recompute: %s is marked twice", p.g.NameOf(id))
			}
			p.g.MarkRecompute(id)
			if !p.acceptPunct(",") {
				break
			}
		}
		p.expectEOL()
	case t.kind == tIdent && t.text == "graph":
		p.failAt(t.col, "a second 'graph' statement; one file holds one graph")
	default:
		p.failAt(t.col, "expected a statement (%%name = op ..., input, param, state, output, grad, update, recompute), found %s", t.describe())
	}
}

func (p *parser) valueRef() ID {
	t := p.next()
	if t.kind != tValue {
		p.failAt(t.col, "expected a value (%%name), found %s", t.describe())
	}
	id, ok := p.g.Lookup(t.text)
	if !ok {
		p.failAt(t.col, "undefined value %%%s", Excerpt(t.text))
	}
	return id
}

func (p *parser) parseType() Type {
	t := p.next()
	if t.kind != tIdent {
		p.failAt(t.col, "expected a type such as f32[2,3], found %s", t.describe())
	}
	dt, ok := ParseDType(t.text)
	if !ok {
		p.failAt(t.col, "unknown dtype %q (expected f32, f64, i32, i64 or bool)", Excerpt(t.text))
	}
	p.expectPunct("[")
	shape := Shape{}
	if !p.acceptPunct("]") {
		for {
			d := p.next()
			n, err := strconv.Atoi(d.text)
			if d.kind != tNumber || err != nil || n < 0 {
				p.failAt(d.col, "expected a dimension (a non-negative integer), found %s", d.describe())
			}
			shape = append(shape, n)
			if p.acceptPunct("]") {
				break
			}
			p.expectPunct(",")
		}
	}
	typ := Type{dt, shape}
	if _, err := typ.BytesChecked(); err != nil {
		p.failAt(t.col, "%v", err)
	}
	return typ
}

func (p *parser) checkName(t token) {
	if err := CheckName("value", t.text); err != nil {
		p.failAt(t.col, "%v", err)
	}
	if prev, dup := p.g.Lookup(t.text); dup {
		w := p.g.Values[prev].Pos
		p.failAt(t.col, "duplicate value %%%s (first defined at %d:%d)", Excerpt(t.text), w.Line, w.Col)
	}
}

func (p *parser) leafStatement() {
	kw := p.next()
	op, _ := LookupOp(kw.text)
	name := p.next()
	if name.kind != tValue {
		p.failAt(name.col, "expected a value name (%%name) after %s, found %s", kw.text, name.describe())
	}
	p.checkName(name)
	p.expectPunct(":")
	typ := p.parseType()
	attrs, acol := p.attrs()
	p.expectEOL()
	id, err := p.g.Leaf(op, name.text, typ, attrs)
	if err != nil {
		p.failAt(acol, "%v", err)
	}
	p.g.Values[id].Pos = Pos{p.line, kw.col}
}

func (p *parser) opStatement() {
	name := p.next()
	p.checkName(name)
	var declared *Type
	if p.acceptPunct(":") {
		t := p.parseType()
		declared = &t
	}
	p.expectPunct("=")
	opTok := p.next()
	if opTok.kind != tIdent {
		p.failAt(opTok.col, "expected an op name, found %s", opTok.describe())
	}
	op, ok := LookupOp(opTok.text)
	if ok && op.IsLeaf() {
		// input, param and state are declarations, not ops to apply.
		p.failAt(opTok.col, "%s is a declaration, not an op: write it as %s %%%s: TYPE on a line of its own", opTok.text, opTok.text, Excerpt(name.text))
	}
	if !ok {
		msg := fmt.Sprintf("unknown op %q", Excerpt(opTok.text))
		if n := NearestOp(opTok.text); n != "" {
			msg += fmt.Sprintf("; did you mean %q?", n)
		}
		p.failAt(opTok.col, "%s", msg)
	}
	var args []ID
	if t := p.peek(); t.kind == tValue {
		for {
			args = append(args, p.valueRef())
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	attrs, _ := p.attrs()
	p.expectEOL()
	t, canon, err := p.g.Infer(op, attrs, args)
	if err != nil {
		p.failAt(opTok.col, "%v", err)
	}
	if declared != nil && !declared.Equal(t) {
		p.failAt(name.col, "%%%s is declared %s but %s gives %s", name.text, *declared, op, t)
	}
	id := p.g.Append(Value{Name: name.text, Type: t, Op: op, Args: args, Attrs: canon})
	p.g.Values[id].Pos = Pos{p.line, name.col}
}

// attrs parses an optional {key=value, ...} block.
func (p *parser) attrs() (Attrs, int) {
	t := p.peek()
	if !p.acceptPunct("{") {
		return nil, t.col
	}
	var a Attrs
	if p.acceptPunct("}") {
		return a, t.col
	}
	for {
		k := p.next()
		if k.kind != tIdent {
			p.failAt(k.col, "expected an attribute name, found %s", k.describe())
		}
		if _, dup := a.Get(k.text); dup {
			p.failAt(k.col, "attribute %s given twice", Excerpt(k.text))
		}
		p.expectPunct("=")
		a = a.With(k.text, p.attrValue())
		if p.acceptPunct("}") {
			return a, t.col
		}
		p.expectPunct(",")
	}
}

func (p *parser) attrValue() AttrValue {
	t := p.next()
	switch t.kind {
	case tString:
		return String(t.text)
	case tNumber:
		return p.number(t)
	case tIdent:
		switch t.text {
		case "true":
			return BoolAttr(true)
		case "false":
			return BoolAttr(false)
		case "inf":
			return Float(math.Inf(1))
		case "nan":
			return Float(math.NaN())
		}
	case tPunct:
		if t.text == "[" {
			if p.depth == MaxAttrDepth {
				p.failAt(t.col, "attribute lists nest more than %d deep (ir.MaxAttrDepth)", MaxAttrDepth)
			}
			p.depth++
			defer func() { p.depth-- }()
			l := AttrValue{Kind: AttrList, L: []AttrValue{}}
			if p.acceptPunct("]") {
				return l
			}
			for {
				l.L = append(l.L, p.attrValue())
				if p.acceptPunct("]") {
					return l
				}
				p.expectPunct(",")
			}
		}
	}
	p.failAt(t.col, "expected an attribute value (number, string, true, false or [list]), found %s", t.describe())
	return AttrValue{}
}

func (p *parser) number(t token) AttrValue {
	switch t.text {
	case "-inf":
		return Float(math.Inf(-1))
	case "+inf":
		return Float(math.Inf(1))
	}
	if !strings.ContainsAny(t.text, ".eEn") {
		if i, err := strconv.ParseInt(t.text, 10, 64); err == nil {
			return AttrValue{Kind: AttrInt, I: i}
		}
	}
	f, err := strconv.ParseFloat(t.text, 64)
	if err != nil {
		p.failAt(t.col, "expected a number, found %q", Excerpt(t.text))
	}
	return Float(f)
}

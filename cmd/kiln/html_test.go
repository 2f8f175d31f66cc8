package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
)

// htmlNode is an element of a parsed page.
type htmlNode struct {
	Tag      string
	Attrs    map[string]string
	Children []*htmlNode
	Text     string // the text of the element and all its descendants
}

// classes returns the node's class list.
func (n *htmlNode) classes() []string { return strings.Fields(n.Attrs["class"]) }

// hasClass reports whether the node has class c.
func (n *htmlNode) hasClass(c string) bool {
	for _, x := range n.classes() {
		if x == c {
			return true
		}
	}
	return false
}

// find returns the descendants of n (n included) for which match holds, in
// document order.
func (n *htmlNode) find(match func(*htmlNode) bool) []*htmlNode {
	var out []*htmlNode
	if match(n) {
		out = append(out, n)
	}
	for _, c := range n.Children {
		out = append(out, c.find(match)...)
	}
	return out
}

// parsePage checks that page is well-formed and returns its root element.
func parsePage(t *testing.T, page []byte) *htmlNode {
	t.Helper()
	if !bytes.HasPrefix(page, []byte("<!DOCTYPE html>\n")) {
		t.Errorf("the page does not start with <!DOCTYPE html>")
	}
	root, err := parseWellFormed(page)
	if err != nil {
		t.Fatalf("the page is not well-formed: %v", err)
	}
	if root.Tag != "html" {
		t.Fatalf("the root element is <%s>, want <html>", root.Tag)
	}
	return root
}

// parseWellFormed parses page into a tree of elements.
//
// It uses encoding/xml in strict mode: writeHTML writes the page as
// well-formed XML (void elements closed with />, attributes quoted, no
// markup characters in the script), so a strict XML parser proves every tag
// closed and properly nested and every entity known. golang.org/x/net/html
// would need a new dependency and would prove less: an HTML5 parser
// repairs any tag soup without an error, as browsers do.
func parseWellFormed(page []byte) (*htmlNode, error) {
	d := xml.NewDecoder(bytes.NewReader(page))
	d.Strict = true
	var root *htmlNode
	var stack []*htmlNode
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			n := &htmlNode{Tag: tok.Name.Local, Attrs: map[string]string{}}
			for _, a := range tok.Attr {
				n.Attrs[a.Name.Local] = a.Value
			}
			switch {
			case len(stack) > 0:
				p := stack[len(stack)-1]
				p.Children = append(p.Children, n)
			case root != nil:
				return nil, fmt.Errorf("a second root element <%s>", n.Tag)
			default:
				root = n
			}
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			for _, n := range stack {
				n.Text += string(tok)
			}
		}
	}
	if root == nil {
		return nil, errors.New("no root element")
	}
	return root, nil
}

// TestParseWellFormed shows that the check of the page's structure catches
// what it is there to catch.
func TestParseWellFormed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		page string
		ok   bool
	}{
		{`<!DOCTYPE html><html><head><meta charset="utf-8" /></head><body><div class="a">x &lt; y &#34;z&#34;</div></body></html>`, true},
		{`<html><body><div>unclosed</body></html>`, false},
		{`<html><body><div><span>crossed</div></span></body></html>`, false},
		{`<html><body><br></body></html>`, false}, // a void element must be closed
		{`<html><body>&nbsp;</body></html>`, false},
		{`<html><body><div class=bare>x</div></body></html>`, false},
		{`<html></html><html></html>`, false},
		{`<html><body>`, false},
	}
	for _, tt := range tests {
		if _, err := parseWellFormed([]byte(tt.page)); (err == nil) != tt.ok {
			t.Errorf("parseWellFormed(%q): error %v, want ok %v", tt.page, err, tt.ok)
		}
	}
}

// byID returns the element with the given id, or fails the test.
func byID(t *testing.T, root *htmlNode, id string) *htmlNode {
	t.Helper()
	ns := root.find(func(n *htmlNode) bool { return n.Attrs["id"] == id })
	if len(ns) != 1 {
		t.Fatalf("%d elements with id %q, want 1", len(ns), id)
	}
	return ns[0]
}

// columnLines returns the text of every line of a column, in order.
func columnLines(col *htmlNode) []string {
	var out []string
	for _, l := range col.find(func(n *htmlNode) bool { return n.Tag == "div" && n.hasClass("l") }) {
		out = append(out, l.Text)
	}
	return out
}

// graphLines returns what a column shows for g: every value's line (its
// "from" attribute, if any, as lines beneath it), then the output, grad and
// update lines.
func graphLines(g *ir.Graph) []string {
	var out []string
	for _, v := range snapshot("", g, 0, 0).Values {
		out = append(out, v.Text)
		out = append(out, v.From...)
	}
	lines := strings.Split(strings.TrimSuffix(g.Format(), "\n"), "\n")
	return append(out, lines[1+len(g.Values):]...)
}

// TestDumpHTML renders the digits MLP with Adam and checks the page: a
// column per pass in order, the unchanged passes collapsed, the final
// column equal to the final graph, the header.
func TestDumpHTML(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "mlp.html")
	r := runKiln(t, "dump", "-html", out, "-optimizer", "adam", digitsMLP)
	r.want(t, 0)
	if !strings.HasPrefix(r.stdout, "wrote "+out+": 8 passes (") {
		t.Errorf("stdout: %q", r.stdout)
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	root := parsePage(t, page)

	// The reference: the passes that run and the graph after each.
	g, _, err := loadGraph(digitsMLP, nil)
	if err != nil {
		t.Fatal(err)
	}
	adam, _ := passes.DefaultOptimizer("adam")
	opts := kiln.Options{Grad: true, Optimizer: &adam}
	var names []string
	changed := map[string]bool{}
	prev := g.Format()
	opts.After = func(pass string, g *ir.Graph) {
		names = append(names, pass)
		changed[pass] = g.Format() != prev
		prev = g.Format()
	}
	final, err := kiln.Transform(g, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 8 {
		t.Fatalf("passes %v, want 8", names)
	}

	cols := root.find(func(n *htmlNode) bool { return n.Tag == "div" && n.hasClass("col") })
	var ids []string
	for _, c := range cols {
		ids = append(ids, c.Attrs["id"])
	}
	want := []string{"pass-" + sourceColumn}
	for _, p := range names {
		want = append(want, "pass-"+p)
	}
	if !reflect.DeepEqual(ids, want) {
		t.Fatalf("columns %v, want %v", ids, want)
	}
	for i, p := range names {
		col := cols[i+1]
		title := col.find(func(n *htmlNode) bool { return n.Tag == "h2" })
		if len(title) != 1 || !strings.HasPrefix(title[0].Text, p) {
			t.Errorf("column %s: title %v", p, title)
		}
		if col.hasClass("collapsed") == changed[p] {
			t.Errorf("column %s: collapsed %v, but the pass changed the graph: %v", p, col.hasClass("collapsed"), changed[p])
		}
	}
	// verify never changes a graph, autodiff and optimizer always do.
	for p, collapsed := range map[string]bool{"verify": true, "autodiff": false, "optimizer": false} {
		if byID(t, root, "pass-"+p).hasClass("collapsed") != collapsed {
			t.Errorf("column %s: collapsed should be %v", p, collapsed)
		}
	}

	// The first column is the graph as parsed, the last the final graph,
	// line by line.
	if got, want := columnLines(cols[0]), graphLines(g); !reflect.DeepEqual(got, want) {
		t.Errorf("source column:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	last := cols[len(cols)-1]
	if got, want := columnLines(last), graphLines(final); !reflect.DeepEqual(got, want) {
		t.Errorf("last column:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Every value of the final graph can be clicked by its name.
	refs := map[string]bool{}
	for _, s := range last.find(func(n *htmlNode) bool { return n.Tag == "span" && n.hasClass("v") }) {
		refs[s.Attrs["data-v"]] = true
	}
	for _, v := range final.Values {
		if !refs[v.Name] {
			t.Errorf("no clickable %%%s in the last column", v.Name)
		}
	}
	// autodiff's lines are marked added.
	added := byID(t, root, "pass-autodiff").find(func(n *htmlNode) bool { return n.hasClass("added") })
	if len(added) == 0 {
		t.Errorf("autodiff marks no line added")
	}
	for _, l := range added {
		if strings.HasPrefix(l.Text, "param ") || strings.HasPrefix(l.Text, "input ") {
			t.Errorf("autodiff marks a leaf of the source added: %s", l.Text)
		}
	}

	// The header: the model, the command, a row per pass with its counts.
	header := root.find(func(n *htmlNode) bool { return n.hasClass("header") })[0].Text
	containsAll(t, "header", header, "digits_mlp", digitsMLP, "kiln dump -html "+out+" -optimizer adam "+digitsMLP, "total")
	rows := root.find(func(n *htmlNode) bool { return n.Tag == "tr" })
	if len(rows) != 1+len(names)+1 {
		t.Errorf("%d rows in the pass table, want a header, one per pass and the total", len(rows))
	}
	for i, p := range names {
		if !strings.HasPrefix(rows[i+1].Text, p) {
			t.Errorf("row %d: %q, want pass %s", i+1, rows[i+1].Text, p)
		}
	}
	// Nothing reaches outside the page.
	for _, n := range root.find(func(n *htmlNode) bool { return n.Attrs["src"] != "" || n.Tag == "link" }) {
		t.Errorf("the page loads %s", n.Attrs["src"]+n.Attrs["href"])
	}
	// The temporary file is gone.
	entries, _ := os.ReadDir(filepath.Dir(out))
	if len(entries) != 1 {
		t.Errorf("the directory holds %d files, want only the page", len(entries))
	}
}

// TestHTMLFused checks the fused-op highlighting on snapshots that a fake
// fusion makes: no op in this tree accepts a "from" attribute yet, so the
// test sets one on a value of a copy of the graph, as the fuse pass does.
func TestHTMLFused(t *testing.T) {
	t.Parallel()
	g, _, err := loadGraph(digitsMLP, nil)
	if err != nil {
		t.Fatal(err)
	}
	before, err := kiln.Transform(g, kiln.Options{Grad: true, O0: true})
	if err != nil {
		t.Fatal(err)
	}
	after := before.Clone()
	a, _ := after.Lookup("a")
	rl, _ := after.Lookup("r")
	from := after.Provenance(a, rl)
	// A line that must be escaped, as a from line of a hand-written fusion
	// may be anything.
	from.L = append(from.L, ir.String(`<b>"x" & 'y'</b>`))
	after.Values[rl].Attrs = after.Values[rl].Attrs.With(ir.FromAttr, from)
	snaps := []passSnap{
		snapshot(sourceColumn, g, 0, len(g.Values)),
		snapshot("autodiff", before, 10, len(g.Values)),
		snapshot("fuse", after, 20, len(before.Values)),
		snapshot("dce", after, 5, len(after.Values)),
	}
	p := newHTMLPage(g.Name, "mlp.kir", "kiln dump -html x.html mlp.kir", snaps)

	// The data: the fused line, its from lines, the members.
	lineOf := func(col int, prefix string) htmlLine {
		t.Helper()
		for _, l := range p.Columns[col].Lines {
			if l.Segs[0].Text == prefix {
				return l
			}
		}
		t.Fatalf("column %d has no line for %s", col, prefix)
		return htmlLine{}
	}
	tests := []struct {
		col   int
		value string
		class string
		from  int
	}{
		{0, "%a", "member g0", 0},
		{0, "%r", "member g0", 0},
		{0, "%h", "", 0},
		{1, "%a", "member g0", 0},
		{1, "%r", "member g0", 0},
		{1, "%d13", "added", 0},
		{2, "%a", "", 0}, // after the fusion the member is no longer marked
		{2, "%r", "changed fused g0", 3},
		{3, "%r", "fused g0", 3}, // the group keeps its colour
	}
	for _, tt := range tests {
		l := lineOf(tt.col, tt.value)
		if l.Class != tt.class || len(l.From) != tt.from {
			t.Errorf("column %s, %s: class %q with %d from lines, want %q with %d", p.Columns[tt.col].Pass, tt.value, l.Class, len(l.From), tt.class, tt.from)
		}
	}
	if c := p.Columns[2]; c.Collapsed || !c.Changed || c.Fused != 1 || c.Added != 1 {
		t.Errorf("fuse column: collapsed %v changed %v fused %d added %d, want false true 1 1", c.Collapsed, c.Changed, c.Fused, c.Added)
	}
	if c := p.Columns[3]; !c.Collapsed || c.Fused != 1 {
		t.Errorf("dce column: collapsed %v fused %d, want true 1", c.Collapsed, c.Fused)
	}

	// The page: the fused line without its attribute, the from lines
	// beneath it in its colour, escaped.
	var buf bytes.Buffer
	if err := writeHTML(&buf, p); err != nil {
		t.Fatal(err)
	}
	root := parsePage(t, buf.Bytes())
	lines := byID(t, root, "pass-fuse").find(func(n *htmlNode) bool { return n.hasClass("l") })
	var got []string
	for i, l := range lines {
		if l.hasClass("fused") {
			for _, f := range lines[i : i+4] {
				got = append(got, f.Attrs["class"]+" | "+f.Text)
			}
		}
	}
	want := []string{
		"l changed fused g0 | %r: f32[32,64] = relu %a",
		"l from g0 | " + before.FormatValue(a),
		"l from g0 | " + before.FormatValue(rl),
		`l from g0 | <b>"x" & 'y'</b>`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the fused group reads:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !bytes.Contains(buf.Bytes(), []byte("&lt;b&gt;&#34;x&#34; &amp; &#39;y&#39;&lt;/b&gt;")) {
		t.Errorf("the from line is not escaped")
	}
}

func TestSegments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line string
		want []htmlSeg
	}{
		{"", nil},
		{"graph x", []htmlSeg{{Text: "graph x"}}},
		{"input %x: f32[2]", []htmlSeg{{Text: "input "}, {"%x", "x"}, {Text: ": f32[2]"}}},
		{"%w1.grad: f32[] = add %a, %b.c {x=1}", []htmlSeg{{"%w1.grad", "w1.grad"}, {Text: ": f32[] = add "}, {"%a", "a"}, {Text: ", "}, {"%b.c", "b.c"}, {Text: " {x=1}"}}},
		{"update %w = %u1", []htmlSeg{{Text: "update "}, {"%w", "w"}, {Text: " = "}, {"%u1", "u1"}}},
		{"100% of %x.", []htmlSeg{{Text: "100% of "}, {"%x", "x"}, {Text: "."}}},
		{"%", []htmlSeg{{Text: "%"}}},
	}
	for _, tt := range tests {
		if got := segments(tt.line); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("segments(%q) = %v, want %v", tt.line, got, tt.want)
		}
	}
}

func TestCommandLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"kiln", "dump", "-html", "out.html", "-lr", "0.01", "a/b.kir"}, "kiln dump -html out.html -lr 0.01 a/b.kir"},
		{[]string{"kiln", "dump", "my model.kir"}, "kiln dump 'my model.kir'"},
		{[]string{"kiln", "dump", "it's", ""}, `kiln dump 'it'\''s' ''`},
	}
	for _, tt := range tests {
		if got := commandLine(tt.args); got != tt.want {
			t.Errorf("commandLine(%q) = %q, want %q", tt.args, got, tt.want)
		}
	}
}

// TestWriteFileAtomic checks that a failed write leaves the old file and
// no temporary file behind.
func TestWriteFileAtomic(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "page.html")
	if err := writeFileAtomic(path, func(w io.Writer) error { _, err := io.WriteString(w, "old"); return err }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := writeFileAtomic(path, func(w io.Writer) error { io.WriteString(w, "half"); return boom }); !errors.Is(err, boom) {
		t.Errorf("error %v, want boom", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("after a failed write the file holds %q, want the old contents", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files in the directory, want 1", len(entries))
	}
}

func TestDumpHTMLErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		code int
		msg  []string
	}{
		{"with -after", []string{"-html", "x.html", "-after", "all", digitsMLP}, 2, []string{"does not combine with -after or -dot"}},
		{"with -dot", []string{"-html", "x.html", "-dot", digitsMLP}, 2, []string{"does not combine"}},
		{"no such directory", []string{"-html", filepath.Join(t.TempDir(), "nosuch", "x.html"), digitsMLP}, 1, []string{"nosuch"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runKiln(t, append([]string{"dump"}, tt.args...)...)
			r.want(t, tt.code)
			containsAll(t, "stderr", r.stderr, append([]string{"kiln dump: "}, tt.msg...)...)
			if r.stdout != "" {
				t.Errorf("unexpected stdout:\n%s", r.stdout)
			}
		})
	}
}

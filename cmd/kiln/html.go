package main

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/internal/atomicfile"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
)

// This file writes kiln dump -html: one page with the graph after every
// pass side by side, in the manner of the Go compiler's GOSSAFUNC ssa.html.
// It is built in three steps, each testable on its own: recordPasses runs
// the pipeline and snapshots the graph after every pass (a passSnap, plain
// strings); newHTMLPage compares the snapshots (what each pass added or
// changed, which passes changed nothing, which values are fused and what
// they replaced) into the page's view model; writeHTML renders it with
// html/template, which escapes every line of IR.

// valueSnap is one value of a snapshot.
type valueSnap struct {
	Name string   // without %
	Full string   // FormatValue: the exact .kir line, "from" included
	Text string   // the line without its "from" attribute
	From []string // the "from" attribute: the lines the value replaced
}

// passSnap is the graph after one pass (or, for the first column, as
// parsed), reduced to text.
type passSnap struct {
	Pass          string
	Time          time.Duration // the pass's time; 0 for the source column
	Before, After int           // value counts before and after the pass
	Values        []valueSnap
	Tail          []string // the output, grad and update lines
}

// sourceColumn names the first column: the graph as parsed.
const sourceColumn = "source"

// snapshot reduces g to the text the page shows.
func snapshot(pass string, g *ir.Graph, d time.Duration, before int) passSnap {
	s := passSnap{Pass: pass, Time: d, Before: before, After: len(g.Values)}
	for i := range g.Values {
		id := ir.ID(i)
		v := valueSnap{Name: g.Values[i].Name, Full: g.FormatValue(id)}
		v.Text = v.Full
		if from, ok := g.Values[i].Attrs.Get(ir.FromAttr); ok {
			v.From = fromLines(from)
			v.Text = formatWithout(g, id, ir.FromAttr)
		}
		s.Values = append(s.Values, v)
	}
	// The lines after the values are those of Format; take them from it
	// rather than spell them a second time.
	lines := strings.Split(strings.TrimSuffix(g.Format(), "\n"), "\n")
	s.Tail = lines[min(1+len(g.Values), len(lines)):]
	return s
}

// fromLines returns the lines of a "from" attribute: a list of strings, as
// ir.Provenance makes it. Anything else is shown as it is spelled.
func fromLines(a ir.AttrValue) []string {
	if a.Kind != ir.AttrList {
		return []string{a.String()}
	}
	out := make([]string, len(a.L))
	for i, e := range a.L {
		if e.Kind == ir.AttrString {
			out[i] = e.S
		} else {
			out[i] = e.String()
		}
	}
	return out
}

// formatWithout returns FormatValue(id) as if the value had no attribute
// key. It takes the attribute away for the call and puts it back, so g
// is unchanged when it returns (the caller holds g alone: the After hook
// runs between passes).
func formatWithout(g *ir.Graph, id ir.ID, key string) string {
	v := &g.Values[id]
	saved := v.Attrs
	defer func() { v.Attrs = saved }()
	v.Attrs = nil
	for _, a := range saved {
		if a.Key != key {
			v.Attrs = append(v.Attrs, a)
		}
	}
	return g.FormatValue(id)
}

// same reports whether two snapshots hold the same graph text.
func (s *passSnap) same(t *passSnap) bool {
	if len(s.Values) != len(t.Values) || len(s.Tail) != len(t.Tail) {
		return false
	}
	for i := range s.Values {
		if s.Values[i].Full != t.Values[i].Full {
			return false
		}
	}
	for i := range s.Tail {
		if s.Tail[i] != t.Tail[i] {
			return false
		}
	}
	return true
}

// recordPasses runs the pipeline that opts select over g and returns the
// source column and one snapshot per pass that ran, with the pass's time:
// the wall time from the end of the previous snapshot to the After hook,
// which is the pass itself plus, under KILN_DEBUG, its check and dump.
func recordPasses(g *ir.Graph, opts kiln.Options) ([]passSnap, error) {
	snaps := []passSnap{snapshot(sourceColumn, g, 0, len(g.Values))}
	before := len(g.Values)
	last := time.Now()
	opts.After = func(pass string, g *ir.Graph) {
		d := time.Since(last)
		snaps = append(snaps, snapshot(pass, g, d, before))
		before = len(g.Values)
		last = time.Now()
	}
	if _, err := kiln.Transform(g, opts); err != nil {
		return nil, err
	}
	return snaps, nil
}

// The view model of the page. Every string in it is plain text; the
// template escapes it.

// htmlPage is the whole page.
type htmlPage struct {
	Model, File, Command string
	Total                string // the passes' total time
	Columns              []htmlColumn
}

// htmlColumn is one pass's column.
type htmlColumn struct {
	ID, Pass, Doc string
	Time          string
	Before, After int
	Added         int // values added or changed by the pass
	Removed       int // values the pass removed
	Changed       bool
	Collapsed     bool // the pass changed nothing: a narrow column
	Fused         int  // values with a "from" attribute after the pass
	Lines         []htmlLine
	Tail          []htmlLine
}

// htmlLine is one line of IR: a value's definition, or an output, grad or
// update line.
type htmlLine struct {
	Class string // space-separated: added, changed, fused, member, gN
	Segs  []htmlSeg
	From  []htmlLine // a fused value's "from" lines, shown beneath it
}

// htmlSeg is a run of text; Ref, when set, names the value it refers to,
// which a click highlights in every column.
type htmlSeg struct {
	Text, Ref string
}

// groupColors is the number of colours that tell fused groups apart.
const groupColors = 8

// segments splits a .kir line into text and value references (%name).
func segments(line string) []htmlSeg {
	var segs []htmlSeg
	rs := []rune(line)
	start := 0
	for i := 0; i < len(rs); {
		if rs[i] != '%' {
			i++
			continue
		}
		j := i + 1
		for j < len(rs) && isNameRune(rs[j]) {
			j++
		}
		// A name does not end with a dot: "%x." in prose is %x.
		for j > i+1 && rs[j-1] == '.' {
			j--
		}
		if j == i+1 {
			i++
			continue
		}
		if start < i {
			segs = append(segs, htmlSeg{Text: string(rs[start:i])})
		}
		segs = append(segs, htmlSeg{Text: string(rs[i:j]), Ref: string(rs[i+1 : j])})
		start, i = j, j
	}
	if start < len(rs) {
		segs = append(segs, htmlSeg{Text: string(rs[start:])})
	}
	return segs
}

// isNameRune reports whether r may appear in a value name, as the .kir
// lexer reads them.
func isNameRune(r rune) bool {
	return r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r > 0x7f
}

// newHTMLPage compares consecutive snapshots into the page: a value whose
// name is new is "added", one whose line differs is "changed", a pass whose
// graph text is identical to the one before is collapsed. Every fused value
// (one with a "from" attribute) gets a group colour, kept in later columns;
// its "from" lines are shown beneath it in that colour, and in the columns
// before the pass that made it, the values it replaced (lines equal to one
// of its "from" lines) are marked as members in the same colour.
func newHTMLPage(model, file, command string, snaps []passSnap) *htmlPage {
	p := &htmlPage{Model: model, File: file, Command: command}
	color := map[string]int{} // fused value name -> group colour
	member := make([]map[string]int, len(snaps))
	var total time.Duration
	for k := range snaps {
		member[k] = map[string]int{}
	}
	// First pass over the snapshots: group colours and members.
	for k, s := range snaps {
		for _, v := range s.Values {
			if len(v.From) == 0 {
				continue
			}
			if _, ok := color[v.Name]; ok {
				continue
			}
			c := len(color) % groupColors
			color[v.Name] = c
			for j := 0; j < k; j++ {
				for _, f := range v.From {
					if _, taken := member[j][f]; !taken {
						member[j][f] = c
					}
				}
			}
		}
	}
	for k := range snaps {
		s := &snaps[k]
		col := htmlColumn{ID: "pass-" + s.Pass, Pass: s.Pass, Doc: passDoc(s.Pass), Before: s.Before, After: s.After}
		if k == 0 {
			col.Doc = "the graph as parsed from " + file
		} else {
			total += s.Time
			col.Time = s.Time.Round(time.Microsecond).String()
		}
		var prev map[string]string
		if k > 0 {
			prev = map[string]string{}
			for _, v := range snaps[k-1].Values {
				prev[v.Name] = v.Full
			}
			col.Changed = !s.same(&snaps[k-1])
			col.Collapsed = !col.Changed
		}
		here := map[string]bool{}
		for _, v := range s.Values {
			here[v.Name] = true
			var class []string
			if prev != nil {
				switch old, ok := prev[v.Name]; {
				case !ok:
					class = append(class, "added")
					col.Added++
				case old != v.Full:
					class = append(class, "changed")
					col.Added++
				}
			}
			l := htmlLine{Segs: segments(v.Text)}
			if c, ok := member[k][v.Full]; ok {
				class = append(class, "member", fmt.Sprintf("g%d", c))
			}
			if len(v.From) > 0 {
				col.Fused++
				g := fmt.Sprintf("g%d", color[v.Name])
				class = append(class, "fused", g)
				for _, f := range v.From {
					l.From = append(l.From, htmlLine{Class: "from " + g, Segs: segments(f)})
				}
			}
			l.Class = strings.Join(class, " ")
			col.Lines = append(col.Lines, l)
		}
		for name := range prev {
			if !here[name] {
				col.Removed++
			}
		}
		var prevTail map[string]bool
		if k > 0 {
			prevTail = map[string]bool{}
			for _, t := range snaps[k-1].Tail {
				prevTail[t] = true
			}
		}
		for _, t := range s.Tail {
			l := htmlLine{Class: "tail", Segs: segments(t)}
			if prevTail != nil && !prevTail[t] {
				l.Class += " added"
			}
			col.Tail = append(col.Tail, l)
		}
		p.Columns = append(p.Columns, col)
	}
	p.Total = total.Round(time.Microsecond).String()
	return p
}

// writeHTML renders p.
func writeHTML(w io.Writer, p *htmlPage) error {
	return htmlTemplate.Execute(w, p)
}

// writeFileAtomic writes what fill produces to path with atomicfile, so a
// reader never sees half a page and a failure leaves any earlier file as
// it was.
func writeFileAtomic(path string, fill func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := fill(&buf); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, buf.Bytes())
}

// commandLine spells args as a shell would read them back, quoting the
// arguments that need it.
func commandLine(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(isNameRune(r) || strings.ContainsRune("-+=/:,@%", r))
		}) < 0 {
			out[i] = a
		} else {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}

// htmlTemplate is the page. It is well-formed XML as well as HTML (void
// elements closed with />, every attribute quoted, the script free of < and
// &), which lets the tests check its structure with encoding/xml. The
// script toggles a collapsed column and highlights a clicked value
// everywhere.
var htmlTemplate = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8" />
<title>kiln: {{.Model}}</title>
<style>
body { font: 13px/1.35 sans-serif; margin: 0.5em; color: #222; }
h1 { font-size: 1.2em; margin: 0.2em 0; }
table.passes { border-collapse: collapse; margin: 0.5em 0; }
table.passes td, table.passes th { padding: 0.1em 0.6em; text-align: right; border-bottom: 1px solid #ddd; }
table.passes td.name, table.passes th.name { text-align: left; }
tr.unchanged { color: #888; }
.legend span { padding: 0 0.4em; margin-right: 0.5em; }
div.columns { display: flex; align-items: flex-start; overflow-x: auto; padding-bottom: 1em; }
div.col { flex: none; border: 1px solid #bbb; margin-right: 4px; max-width: 60em; }
div.col h2 { font-size: 1em; margin: 0; padding: 0.2em 0.4em; background: #eee; cursor: pointer; white-space: nowrap; }
div.col h2 small { font-weight: normal; color: #555; }
div.col.collapsed { width: 1.8em; }
div.col.collapsed h2 { writing-mode: vertical-rl; background: #f6f6f6; color: #777; padding: 0.4em 0.2em; }
div.col.collapsed h2 small, div.col.collapsed div.body { display: none; }
div.body { font: 12px/1.3 monospace; padding: 0.2em 0; }
div.l { white-space: pre-wrap; padding: 0 0.4em 0 1.6em; text-indent: -1.2em; border-left: 3px solid transparent; }
div.l.added { border-left-color: #2a2; }
div.l.changed { border-left-color: #d80; }
div.l.tail { color: #555; }
div.l.fused { font-weight: bold; }
div.l.from { padding-left: 3.2em; font-size: 11px; font-style: italic; }
div.l.member { text-decoration: underline dotted; }
span.v { cursor: pointer; }
span.v.hl { background: #ff4; outline: 1px solid #cc0; }
.g0 { background: #fde0dd; } .g1 { background: #dbeafe; } .g2 { background: #dcfce7; } .g3 { background: #fef3c7; }
.g4 { background: #ede9fe; } .g5 { background: #ccfbf1; } .g6 { background: #fce7f3; } .g7 { background: #e5e7eb; }
</style>
</head>
<body>
<h1>kiln: {{.Model}}</h1>
<div class="header">
<div>model <b>{{.Model}}</b> from <code>{{.File}}</code></div>
<div>command <code>{{.Command}}</code></div>
<table class="passes">
<tr><th class="name">pass</th><th>time</th><th>values before</th><th>after</th><th>added or changed</th><th>removed</th><th>fused</th></tr>
{{range .Columns}}{{if .Time}}<tr class="{{if .Changed}}changed{{else}}unchanged{{end}}"><td class="name"><a href="#{{.ID}}">{{.Pass}}</a>{{if not .Changed}} (unchanged){{end}}</td><td>{{.Time}}</td><td>{{.Before}}</td><td>{{.After}}</td><td>{{.Added}}</td><td>{{.Removed}}</td><td>{{.Fused}}</td></tr>
{{end}}{{end}}<tr><td class="name">total</td><td>{{.Total}}</td><td></td><td></td><td></td><td></td><td></td></tr>
</table>
<div class="legend">Marks: <span style="border-left: 3px solid #2a2">added by the pass</span><span style="border-left: 3px solid #d80">changed by the pass</span><span class="g0"><b>fused op</b>, <i>the ops it replaced</i> beneath it, <u>underlined</u> in earlier columns</span>Click a value to highlight it in every column, a pass's title to collapse or expand it.</div>
</div>
<div class="columns">
{{range .Columns}}<div class="col{{if .Collapsed}} collapsed{{end}}" id="{{.ID}}">
<h2 title="{{.Doc}}{{if .Collapsed}} (unchanged: click to expand){{end}}">{{.Pass}}{{if .Time}} <small>{{.Time}}, {{.Before}} → {{.After}} values</small>{{else}} <small>{{.After}} values</small>{{end}}</h2>
<div class="body">
{{range .Lines}}{{template "line" .}}{{range .From}}{{template "line" .}}{{end}}{{end}}{{range .Tail}}{{template "line" .}}{{end}}</div>
</div>
{{end}}</div>
<script>
document.addEventListener("click", function (e) {
  var title = e.target.closest("div.col h2");
  if (title) { title.parentNode.classList.toggle("collapsed"); return; }
  var v = e.target.closest("span.v");
  if (!v) return;
  var on = !v.classList.contains("hl");
  document.querySelectorAll("span.v.hl").forEach(function (x) { x.classList.remove("hl"); });
  if (on) document.querySelectorAll("span.v[data-v=\"" + CSS.escape(v.dataset.v) + "\"]").forEach(function (x) { x.classList.add("hl"); });
});
</script>
</body>
</html>
{{define "line"}}<div class="l{{with .Class}} {{.}}{{end}}">{{range .Segs}}{{if .Ref}}<span class="v" data-v="{{.Ref}}">{{.Text}}</span>{{else}}{{.Text}}{{end}}{{end}}</div>
{{end}}`))

// passDoc returns the pass table's doc of pass name ("" for the column of
// the graph as parsed).
func passDoc(name string) string {
	p, _ := passes.Lookup(name)
	return p.Doc
}

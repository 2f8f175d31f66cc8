package main

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// plotData holds the curves -plot draws: per epoch (or logged step), the
// training and held-out loss and metric; NaN where there is none.
type plotData struct {
	x                  []float64
	loss, heldLoss     []float64
	metric, heldMetric []float64
}

func (d *plotData) add(x, loss, heldLoss, metric, heldMetric float64) {
	d.x = append(d.x, x)
	d.loss = append(d.loss, loss)
	d.heldLoss = append(d.heldLoss, heldLoss)
	d.metric = append(d.metric, metric)
	d.heldMetric = append(d.heldMetric, heldMetric)
}

// points returns the finite points of ys against d.x.
func (d *plotData) points(ys []float64) plotter.XYs {
	var xy plotter.XYs
	for i, y := range ys {
		if !math.IsNaN(y) && !math.IsInf(y, 0) {
			xy = append(xy, plotter.XY{X: d.x[i], Y: y})
		}
	}
	return xy
}

var (
	trainColor = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	heldColor  = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
)

// panel returns a plot of the training and held-out curves ys and held,
// or nil when neither has a point.
func (d *plotData) panel(title, xLabel, yLabel string, ys, held []float64) (*plot.Plot, error) {
	train, ho := d.points(ys), d.points(held)
	if len(train) == 0 && len(ho) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Add(plotter.NewGrid())
	for _, c := range []struct {
		name string
		xy   plotter.XYs
		col  color.Color
	}{{"training", train, trainColor}, {"held out", ho, heldColor}} {
		if len(c.xy) == 0 {
			continue
		}
		l, s, err := plotter.NewLinePoints(c.xy)
		if err != nil {
			return nil, err
		}
		l.Color, s.Color = c.col, c.col
		s.Shape = draw.CircleGlyph{}
		s.Radius = vg.Points(1.5)
		p.Add(l, s)
		p.Legend.Add(c.name, l, s)
	}
	p.Legend.Top = yLabel == "loss" // a metric rises, a loss falls: keep the legend off the curves
	return p, nil
}

// plot writes -plot: the loss over x (epochs or steps) and, when the run
// has one, the metric called metricName, one panel above the other, as a
// PNG, atomically.
func (l *loopFlags) plot(stdout io.Writer, model, x, metricName string, d plotData) error {
	if l.plotPath == "" {
		return nil
	}
	var rows [][]*plot.Plot
	lp, err := d.panel(model+": loss", x, "loss", d.loss, d.heldLoss)
	if err != nil {
		return err
	}
	if lp != nil {
		rows = append(rows, []*plot.Plot{lp})
	}
	mp, err := d.panel(model+": "+metricName, x, metricName, d.metric, d.heldMetric)
	if err != nil {
		return err
	}
	if mp != nil {
		rows = append(rows, []*plot.Plot{mp})
	}
	if len(rows) == 0 {
		return fmt.Errorf("-plot %s: no finite loss to draw", l.plotPath)
	}
	img := vgimg.New(vg.Points(640), vg.Points(300*float64(len(rows))))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	canvases := plot.Align(rows, tiles, dc)
	for i, r := range rows {
		r[0].Draw(canvases[i][0])
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return fmt.Errorf("-plot %s: %v", l.plotPath, err)
	}
	if err := writeOutput("-plot", l.plotPath, "the plot", model, buf.Bytes()); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "plotted the loss to %s\n", l.plotPath)
	return nil
}

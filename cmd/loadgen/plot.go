package main

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/cqlgate/cqlgate/internal/loadgen/driver"
	"github.com/cqlgate/cqlgate/internal/plotpng"
)

// writePlot draws throughput (top) and p50/p99 latency (bottom) over time
// from a timeline into a PNG file.
func writePlot(path, title string, tl []driver.TimelinePoint) error {
	if len(tl) == 0 {
		return fmt.Errorf("plot %s: no interval was recorded (the run was shorter than --interval)", path)
	}
	ops := make(plotter.XYs, len(tl))
	p50 := make(plotter.XYs, len(tl))
	p99 := make(plotter.XYs, len(tl))
	for i, p := range tl {
		ops[i] = plotter.XY{X: p.T, Y: p.Throughput}
		p50[i] = plotter.XY{X: p.T, Y: float64(p.P50) / 1000}
		p99[i] = plotter.XY{X: p.T, Y: float64(p.P99) / 1000}
	}

	top := plot.New()
	top.Title.Text = title
	top.Y.Label.Text = "successful ops/s"
	top.Y.Min = 0
	top.X.Min = 0
	if err := addLine(top, ops, "", color.RGBA{B: 200, A: 255}); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}

	bottom := plot.New()
	bottom.X.Label.Text = "seconds since start (warm-up included)"
	bottom.Y.Label.Text = "latency (ms)"
	bottom.Y.Min = 0
	bottom.X.Min = 0
	bottom.Legend.Top = true
	if err := addLine(bottom, p50, "p50", color.RGBA{G: 150, A: 255}); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	if err := addLine(bottom, p99, "p99", color.RGBA{R: 200, A: 255}); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}

	return plotpng.WriteStacked(path, vg.Points(900), vg.Points(600), top, bottom)
}

func addLine(p *plot.Plot, xys plotter.XYs, name string, c color.Color) error {
	l, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	l.Color = c
	l.Width = vg.Points(1.5)
	p.Add(l)
	if name != "" {
		p.Legend.Add(name, l)
	}
	return nil
}

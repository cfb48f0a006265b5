package fleetsim

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/cqlgate/cqlgate/internal/plotpng"
)

// WritePlot draws a run into a PNG: goodput against the node's capacity
// (top), the sum of the sidecars' limits and the requests in the node
// against its best concurrency (middle), and the admitted p99 over the
// unloaded p99 with the OVERLOADED share (bottom). The same layout as
// cmd/loadgen's plots, stacked tiles sharing the time axis.
func WritePlot(path string, r *Result) error {
	xy := func(xs, ys []float64, scale float64) plotter.XYs {
		return points(xs, ys, scale, 0)
	}
	logXY := func(xs, ys []float64) plotter.XYs { return points(xs, ys, 1, 1) }
	flat := func(v float64) []float64 {
		out := make([]float64, len(r.T))
		for i := range out {
			out[i] = v
		}
		return out
	}
	blue, red, green, grey := color.RGBA{B: 200, A: 255}, color.RGBA{R: 200, A: 255},
		color.RGBA{G: 150, A: 255}, color.RGBA{R: 120, G: 120, B: 120, A: 255}

	top := plot.New()
	top.Title.Text = r.Name
	top.Y.Label.Text = "requests/s"
	top.Y.Min = 0
	top.Legend.Top = true
	bottom := plot.New()
	mid := plot.New()
	mid.Y.Label.Text = "requests (log)"
	// Log scale: the sum of fixed limits can be thousands of times the
	// node's concurrency, and the interesting range is near it.
	mid.Y.Scale = plot.LogScale{}
	mid.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	mid.Legend.Top = true
	bottom.X.Label.Text = "virtual seconds"
	bottom.Y.Label.Text = "p99 / unloaded p99"
	bottom.Y.Min = 0
	bottom.Legend.Top = true
	lines := []struct {
		p    *plot.Plot
		xys  plotter.XYs
		name string
		c    color.Color
	}{
		{top, xy(r.T, r.Capacity, 1), "node capacity", grey},
		{top, xy(r.T, r.Goodput, 1), "goodput", blue},
		{mid, logXY(r.T, flat(float64(r.Threads))), "best concurrency", grey},
		{mid, logXY(r.T, r.Limits), "sum of limits", blue},
		{mid, logXY(r.T, r.InNode), "in the node", red},
		{bottom, xy(r.TL, r.Ratio, 1), "admitted p99 ratio", red},
		{bottom, xy(r.T, r.Over, 10), "OVERLOADED share x10", green},
	}
	for _, l := range lines {
		if len(l.xys) == 0 {
			continue
		}
		ln, err := plotter.NewLine(l.xys)
		if err != nil {
			return fmt.Errorf("plot %s: %w", path, err)
		}
		ln.Color = l.c
		ln.Width = vg.Points(1.5)
		l.p.Add(ln)
		l.p.Legend.Add(l.name, ln)
	}
	bottom.Y.Max = min(bottom.Y.Max, 20)

	return plotpng.WriteStacked(path, vg.Points(900), vg.Points(800), top, mid, bottom)
}

// points pairs xs and ys*scale, skipping NaN (a bin without samples) and
// raising values to at least floor (1 on a log axis, which cannot show 0).
func points(xs, ys []float64, scale, floor float64) plotter.XYs {
	out := make(plotter.XYs, 0, len(xs))
	for i := range xs {
		y := ys[i] * scale
		if math.IsNaN(y) {
			continue
		}
		out = append(out, plotter.XY{X: xs[i], Y: max(y, floor)})
	}
	return out
}

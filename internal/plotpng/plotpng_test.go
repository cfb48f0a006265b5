package plotpng

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

func TestWriteStacked(t *testing.T) {
	var plots []*plot.Plot
	for range 3 {
		p := plot.New()
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1}})
		if err != nil {
			t.Fatal(err)
		}
		p.Add(l)
		plots = append(plots, p)
	}
	path := filepath.Join(t.TempDir(), "out.png")
	if err := WriteStacked(path, vg.Points(300), vg.Points(300), plots...); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("%s is not a PNG (%d bytes)", path, len(b))
	}
	if err := WriteStacked(filepath.Join(t.TempDir(), "no", "such", "dir.png"), vg.Points(10), vg.Points(10), plots[0]); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}

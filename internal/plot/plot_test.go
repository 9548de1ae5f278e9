// plot_test.go: tick choice, validation, and that both backends draw a
// figure (PNG decodes with series colours present; SVG is well-formed XML
// with one polyline per series).
package plot

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func demoFigure() *Figure {
	var x, a, b, r []float64
	for i := 0; i <= 200; i++ {
		t := float64(i) * 0.05
		x = append(x, t)
		a = append(a, 10+float64(i%40))
		b = append(b, 20+15*math.Sin(t))
		r = append(r, 40e6+20e6*math.Cos(t/2))
	}
	b[100] = math.NaN() // a gap
	return &Figure{
		Title: "two flows",
		Panels: []Panel{
			{YLabel: "cwnd", Unit: "segments", Series: []Series{{Name: "10.0.0.1:5000->10.0.0.2:80", X: x, Y: a}, {Name: "flow b", X: x, Y: b}}},
			{YLabel: "throughput", Unit: "bit/s", Series: []Series{{Name: "flow a", X: x, Y: r}}},
			{YLabel: "empty", Unit: "ms"},
		},
	}
}

func TestTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		n      int
		want   string
	}{
		{0, 10, 5, "[0 2 4 6 8 10]"},
		{0, 1, 4, "[0 0.5 1]"},
		{3, 97, 5, "[0 20 40 60 80 100]"},
		{0, 0.012, 4, "[0 0.005 0.01 0.015]"},
	} {
		got := ticks(tc.lo, tc.hi, tc.n)
		if s := fmtFloats(got); s != tc.want {
			t.Errorf("ticks(%v, %v, %d) = %s, want %s", tc.lo, tc.hi, tc.n, s, tc.want)
		}
	}
	if got := ticks(1, 1, 5); got != nil {
		t.Errorf("ticks of an empty range = %v, want nil", got)
	}
}

func fmtFloats(v []float64) string {
	parts := make([]string, len(v))
	for i, f := range v {
		parts[i] = strconv.FormatFloat(f, 'g', 6, 64)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func TestFmtTick(t *testing.T) {
	all := []float64{0, 20e6, 40e6, 60e6}
	if got := fmtTick(40e6, all); got != "40M" {
		t.Errorf("fmtTick(40e6) = %q, want 40M", got)
	}
	if got := fmtTick(0.25, []float64{0, 0.25, 0.5}); got != "0.25" {
		t.Errorf("fmtTick(0.25) = %q", got)
	}
}

func TestValidate(t *testing.T) {
	f := &Figure{Panels: []Panel{{Series: []Series{{Name: "x", X: []float64{1, 2}, Y: []float64{1}}}}}}
	if err := f.WritePNG(io.Discard); err == nil {
		t.Error("mismatched X/Y lengths accepted")
	}
	if err := (&Figure{}).WriteSVG(io.Discard); err == nil {
		t.Error("figure without panels accepted")
	}
}

func TestPNG(t *testing.T) {
	var buf bytes.Buffer
	f := demoFigure()
	if err := f.WritePNG(&buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	w, h := f.size()
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Fatalf("image %v, want %dx%d", b, w, h)
	}
	// Both series colours must appear in the plot.
	for _, col := range Palette[:2] {
		found := false
		for y := 0; y < h && !found; y++ {
			for x := 0; x < w; x++ {
				r, g, b, _ := img.At(x, y).RGBA()
				if uint8(r>>8) == col.R && uint8(g>>8) == col.G && uint8(b>>8) == col.B {
					found = true
					break
				}
			}
		}
		if !found {
			t.Errorf("colour %v not drawn", col)
		}
	}
	if dir := os.Getenv("LANES_PLOT_OUT"); dir != "" {
		_ = f.Save(filepath.Join(dir, "plot-demo.png"))
		_ = f.Save(filepath.Join(dir, "plot-demo.svg"))
	}
}

func TestSVG(t *testing.T) {
	var buf bytes.Buffer
	if err := demoFigure().WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	polylines, texts := 0, []string{}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			switch se.Name.Local {
			case "polyline":
				polylines++
			case "text":
				var s string
				if err := dec.DecodeElement(&s, &se); err != nil {
					t.Fatal(err)
				}
				texts = append(texts, s)
			}
		}
	}
	// flow a: 1 line; flow b: 2 (NaN gap); throughput: 1; and a legend
	// swatch per series (3).
	if polylines != 7 {
		t.Errorf("%d polylines, want 7", polylines)
	}
	// The second series of a panel is dashed, in its line and its swatch.
	if n := strings.Count(buf.String(), `stroke-dasharray="9 5"`); n != 3 {
		t.Errorf("%d dashed polylines, want flow b's 2 pieces and its swatch", n)
	}
	joined := strings.Join(texts, "|")
	for _, want := range []string{"cwnd (segments)", "throughput (bit/s)", "time (s)", "flow b", "no data", "two flows", "40M"} {
		if !strings.Contains(joined, want) {
			t.Errorf("SVG lacks text %q; texts: %s", want, joined)
		}
	}
}

// Two series that coincide stay distinguishable: the second is dashed, so
// the first shows in its gaps; the pattern runs on across vertices.
func TestDashedCoincidingSeries(t *testing.T) {
	line := []pt{{0, 0}, {10, 0}, {30, 0}}
	pieces := dashed(line, []float64{9, 5})
	// on 0-9, off 9-14, on 14-23, off 23-28, on 28-30
	want := [][2]float64{{0, 9}, {14, 23}, {28, 30}}
	if len(pieces) != len(want) {
		t.Fatalf("pieces %v, want spans %v", pieces, want)
	}
	for i, p := range pieces {
		if a, b := p[0].x, p[len(p)-1].x; math.Abs(a-want[i][0]) > 1e-9 || math.Abs(b-want[i][1]) > 1e-9 {
			t.Errorf("piece %d spans %v..%v, want %v", i, a, b, want[i])
		}
	}
	if got := dashed(line, nil); len(got) != 1 || len(got[0]) != 3 {
		t.Errorf("solid: %v", got)
	}
	// Drawn: where a solid series lies under a dashed one of another
	// colour, both colours show on that line.
	a := Series{Name: "a", X: []float64{0, 10}, Y: []float64{5, 5}}
	b := a
	b.Name = "b"
	f := &Figure{Panels: []Panel{{Series: []Series{a, b}, YMin: 0, YMax: 10}}, Width: 600}
	img := drawPNG(t, f)
	y := int(math.Round(float64(marginTop) + float64(f.panelHeight())/2))
	seen := map[int]bool{}
	for x := marginLeft + 5; x < 600-marginRight-5; x++ {
		for yy := y - 1; yy <= y+1; yy++ {
			seen[closest(img.RGBAAt(x, yy), Palette[0], Palette[1], white)] = true
		}
	}
	if !seen[0] || !seen[1] {
		t.Errorf("coinciding series: colours seen on their line %v, want both", seen)
	}
}

func drawPNG(t *testing.T, f *Figure) *image.RGBA {
	var b bytes.Buffer
	if err := f.WritePNG(&b); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	out := image.NewRGBA(img.Bounds())
	draw.Draw(out, out.Rect, img, image.Point{}, draw.Src)
	return out
}

// closest is the index of the colour in cs nearest to c.
func closest(c color.RGBA, cs ...color.RGBA) int {
	best, bd := 0, math.Inf(1)
	for i, o := range cs {
		dr, dg, db := float64(c.R)-float64(o.R), float64(c.G)-float64(o.G), float64(c.B)-float64(o.B)
		if d := dr*dr + dg*dg + db*db; d < bd {
			best, bd = i, d
		}
	}
	return best
}

func TestSave(t *testing.T) {
	dir := t.TempDir()
	f := demoFigure()
	for _, name := range []string{"a.png", "a.svg"} {
		if err := f.Save(filepath.Join(dir, name)); err != nil {
			t.Errorf("Save(%s): %v", name, err)
		}
	}
	if err := f.Save(filepath.Join(dir, "a.jpg")); err == nil {
		t.Error("Save(a.jpg) accepted")
	}
}

// Marks, error bars and mark-only series are drawn, and the y range makes
// room for the bars.
func TestMarkersAndErrorBars(t *testing.T) {
	svg := func(s ...Series) string {
		f := &Figure{Title: "t", Panels: []Panel{{YLabel: "time", Unit: "s", Series: s}}}
		var b bytes.Buffer
		if err := f.WriteSVG(&b); err != nil {
			t.Fatal(err)
		}
		if err := f.WritePNG(io.Discard); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	plain := Series{Name: "a", X: []float64{100, 400}, Y: []float64{1, 2}}
	marked := plain
	marked.Marker, marked.YLo, marked.YHi = true, []float64{0.5, 1.5}, []float64{1.5, 10}
	paper := Series{Name: "paper", X: []float64{400}, Y: []float64{3.68}, NoLine: true}
	a, b := svg(plain), svg(marked, paper)
	if strings.Count(b, "<line") <= strings.Count(a, "<line") || strings.Count(b, "<rect") <= strings.Count(a, "<rect") {
		t.Error("marks and error bars added no elements")
	}
	p := Panel{Series: []Series{marked}}
	if _, hi := p.yRange(); hi < 10 {
		t.Errorf("y range ends at %v, below the error bar's 10", hi)
	}
}

// recorder is a canvas that keeps the squares drawn, by colour.
type recorder struct{ squares map[color.RGBA][]pt }

func (r *recorder) rect(x, y, w, h float64, c color.RGBA) {
	if w == h && w < 10 { // a square mark
		r.squares[c] = append(r.squares[c], pt{x + w/2, y + h/2})
	}
}
func (r *recorder) line(x1, y1, x2, y2 float64, c color.RGBA, width float64)                {}
func (r *recorder) polyline(p []pt, c color.RGBA, width float64, dash []float64)            {}
func (r *recorder) text(x, y float64, s string, a anchor, c color.RGBA, vertical, big bool) {}

// Marked series with equal values sit side by side (dodged), so every
// mark shows instead of the last one drawn; marks alone (a paper's
// values) stay where they are.
func TestMarkedSeriesDodge(t *testing.T) {
	a := Series{Name: "a", X: []float64{100, 400}, Y: []float64{1, 2}, Marker: true, Color: Palette[0]}
	b := a
	b.Name, b.Color = "b", Palette[1]
	// Each alone in its panel (series 0: a square mark), then three in one.
	f := &Figure{Panels: []Panel{{Series: []Series{a}}, {Series: []Series{b}}}}
	r := &recorder{squares: map[color.RGBA][]pt{}}
	f.draw(r)
	alone := r.squares[Palette[0]][0].x
	f = &Figure{Panels: []Panel{{Series: []Series{a, b, {Name: "c", X: []float64{100}, Y: []float64{1}, Marker: true, Color: Palette[2]}}}}}
	r = &recorder{squares: map[color.RGBA][]pt{}}
	f.draw(r)
	sa := r.squares[Palette[0]]
	if len(sa) != 3 || math.Abs(sa[0].x-(alone-dodgeStep)) > 0.5 { // two marks and the legend's
		t.Errorf("first of three marked series at x %v, want %v (dodged left)", sa, alone-dodgeStep)
	}
}

// A legend name wider than the legend column goes on two lines, split at
// a space, so where a flow goes is not cut off; a name that still does
// not fit is shortened with "…"; entries that do not fit the panel become
// "+N more".
func TestLegendWrapsLongNames(t *testing.T) {
	long := "python3 · background (held 49%) → 10.53.2.2:5001"
	for _, name := range []string{long, "python3 · interactive → 10.53.2.2:5001"} {
		if got := legendLines(name, marginRight-44); len(got) != 2 || got[0]+" "+got[1] != name || !strings.HasPrefix(got[1], "→ ") {
			t.Errorf("legendLines(%q) = %q, want it whole on two lines, split before →", name, got)
		}
	}
	if got := legendLines("flow b", marginRight-44); len(got) != 1 || got[0] != "flow b" {
		t.Errorf("a short name: %q", got)
	}
	huge := strings.Repeat("x", 80) + " " + strings.Repeat("y", 80)
	if got := legendLines(huge, marginRight-44); len(got) != 1 || !strings.HasSuffix(got[0], "…") {
		t.Errorf("a name without a usable space: %q, want one shortened line", got)
	}
	x := []float64{0, 1}
	var series []Series
	for i := 0; i < 12; i++ {
		series = append(series, Series{Name: fmt.Sprintf("%s %d", long, i), X: x, Y: []float64{1, 2}})
	}
	f := &Figure{Panels: []Panel{{YLabel: "cwnd", Unit: "segments", Series: series}}}
	var buf bytes.Buffer
	if err := f.WriteSVG(&buf); err != nil {
		t.Fatal(err)
	}
	svg := buf.String()
	// 200 px hold 6 entries of two lines (30 px each) and a "+N more" row.
	if !strings.Contains(svg, ">→ 10.53.2.2:5001 5<") || strings.Contains(svg, ">→ 10.53.2.2:5001 6<") || !strings.Contains(svg, ">+6 more<") {
		t.Errorf("12 two-line entries in a 200 px panel: want entries 0-5 whole and +6 more:\n%s", svg)
	}
}

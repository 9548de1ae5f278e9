// Package plot draws time-series figures to PNG and SVG with our own code:
// one panel per quantity stacked over a shared x axis, each with its y label
// and unit, ticks at round numbers, grid lines and a legend of its series.
// It is what `lanes plot` and the lab use for cwnd / RTT / throughput
// figures.
//
// The figure is laid out once into drawing primitives (lines, polylines,
// rectangles, text) on an abstract canvas; png.go rasterises them (image/png
// and the Go font of golang.org/x/image/font/gofont) and svg.go writes them
// as SVG elements, so both files show the same picture.
//
//   - Figure{Title, XLabel, Panels}; Panel{YLabel, Unit, Series};
//     Series{Name, X, Y}. NaN in Y breaks a line (a gap). Series may carry
//     marks (Marker), error bars (YLo, YHi) or be marks alone (NoLine).
//     Series j of a panel is drawn with the j-th line style (solid, dashed,
//     dotted, dash-dot) as well as its colour, so that two series that
//     coincide stay visible: the later one's gaps show the earlier one.
//   - WritePNG / WriteSVG / Save (by file extension).
//
// Non-goals: log axes, bar charts, arbitrary fonts. (gonum/plot was weighed
// against extending this package for marks and error bars. Measured, CGO
// off and stripped: a minimal program drawing one line with marks and error
// bars through gonum/plot is 9.6 MB, one using image/png and basicfont as
// this package does is 1.8 MB; about 8 MB more in every lanes binary, phones
// included, for two features that take 60 lines here.)
package plot

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Figure is a stack of panels sharing one x axis.
type Figure struct {
	Title  string
	XLabel string // e.g. "time"; default "time"
	XUnit  string // e.g. "s"; default "s"
	Width  int    // pixels; 0 = 1000
	// PanelHeight is the height of one panel's plot area; 0 = 200.
	PanelHeight int
	Panels      []Panel
}

// Panel is one quantity over x.
type Panel struct {
	YLabel string // e.g. "cwnd"
	Unit   string // e.g. "segments"
	Series []Series
	// YMin/YMax fix the y range when YMax > YMin; otherwise the range is
	// taken from the data and includes zero.
	YMin, YMax float64
}

// Series is one named line, optionally with a mark at every point and an
// error bar per point; NoLine draws the marks alone (e.g. a paper's
// published values beside our measurements).
type Series struct {
	Name string
	X, Y []float64
	// YLo, YHi, when set (same length as Y), draw an error bar from YLo[k]
	// to YHi[k] at each point.
	YLo, YHi []float64
	Marker   bool // a mark at every point; its shape depends on the series
	NoLine   bool // marks only (implies Marker)
	// Color overrides the palette colour (zero: the series' palette colour),
	// e.g. to draw a paper's point in the colour of the matching method.
	Color color.RGBA
}

// colorOf is the colour of series j.
func (s *Series) colorOf(j int) color.RGBA {
	if s.Color.A != 0 {
		return s.Color
	}
	return Palette[j%len(Palette)]
}

// Palette is the colour cycle of series (Tableau 10, distinguishable in
// print and by most colour-blind readers).
var Palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff},
	{0xd6, 0x27, 0x28, 0xff}, {0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff},
	{0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff}, {0xbc, 0xbd, 0x22, 0xff},
	{0x17, 0xbe, 0xcf, 0xff},
}

var (
	black     = color.RGBA{0, 0, 0, 0xff}
	white     = color.RGBA{0xff, 0xff, 0xff, 0xff}
	gridColor = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	axisColor = color.RGBA{0x33, 0x33, 0x33, 0xff}
)

// validate checks the figure can be drawn.
func (f *Figure) validate() error {
	if len(f.Panels) == 0 {
		return errors.New("plot: figure has no panels")
	}
	for i, p := range f.Panels {
		for j, s := range p.Series {
			if len(s.X) != len(s.Y) {
				return fmt.Errorf("plot: panel %d (%s) series %d (%s): %d x values but %d y values", i, p.YLabel, j, s.Name, len(s.X), len(s.Y))
			}
		}
	}
	return nil
}

// Save writes the figure to path as PNG or SVG, chosen by the extension.
func (f *Figure) Save(path string) error {
	var write func(io.Writer) error
	switch strings.ToLower(filepath.Ext(path)) {
	case ".png":
		write = f.WritePNG
	case ".svg":
		write = f.WriteSVG
	default:
		return fmt.Errorf("plot: %s: want a .png or .svg file name", path)
	}
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if err := write(out); err != nil {
		out.Close()
		return fmt.Errorf("plot: write %s: %w", path, err)
	}
	return out.Close()
}

// Drawing primitives, in pixels from the top left corner.

type anchor int

const (
	anchorStart anchor = iota
	anchorMiddle
	anchorEnd
)

type pt struct{ x, y float64 }

type canvas interface {
	rect(x, y, w, h float64, fill color.RGBA)
	line(x1, y1, x2, y2 float64, c color.RGBA, width float64)
	// polyline draws p; dash is the on/off pattern (px), nil for solid.
	polyline(p []pt, c color.RGBA, width float64, dash []float64)
	// text draws s with its baseline at y; vertical text runs bottom to top
	// with (x, y) at the anchor point.
	text(x, y float64, s string, a anchor, c color.RGBA, vertical, big bool)
}

// Layout constants (pixels).
const (
	marginLeft   = 78
	marginRight  = 250 // legend column
	marginTop    = 40
	panelGap     = 34 // between panels: room for x tick labels
	marginBottom = 50
	tickLen      = 5
)

// size returns the image size.
func (f *Figure) size() (w, h int) {
	w = f.Width
	if w == 0 {
		w = 1000
	}
	ph := f.panelHeight()
	h = marginTop + len(f.Panels)*ph + (len(f.Panels)-1)*panelGap + marginBottom
	return w, h
}

func (f *Figure) panelHeight() int {
	if f.PanelHeight > 0 {
		return f.PanelHeight
	}
	return 200
}

// draw lays the figure out on c.
func (f *Figure) draw(c canvas) {
	w, h := f.size()
	c.rect(0, 0, float64(w), float64(h), white)
	if f.Title != "" {
		// Twice the font size if it fits, else the normal size.
		big := textWidth(f.Title, true) < float64(w-20)
		c.text(float64(w)/2, 24, f.Title, anchorMiddle, black, false, big)
	}
	xlo, xhi := f.xRange()
	xt := ticks(xlo, xhi, int(math.Max(3, float64(w-marginLeft-marginRight)/90)))
	if len(xt) > 0 {
		xlo, xhi = math.Min(xlo, xt[0]), math.Max(xhi, xt[len(xt)-1])
	}
	pw := float64(w - marginLeft - marginRight)
	ph := float64(f.panelHeight())
	for i := range f.Panels {
		p := &f.Panels[i]
		fr := panelFrame{left: float64(marginLeft), top: float64(marginTop) + float64(i)*(ph+panelGap), w: pw, h: ph,
			xlo: xlo, xhi: xhi, xt: xt}
		fr.ylo, fr.yhi = p.yRange()
		fr.yt = ticks(fr.ylo, fr.yhi, int(math.Max(3, ph/40)))
		if len(fr.yt) > 0 && !(p.YMax > p.YMin) {
			fr.ylo, fr.yhi = math.Min(fr.ylo, fr.yt[0]), math.Max(fr.yhi, fr.yt[len(fr.yt)-1])
		}
		fr.drawPanel(c, p)
	}
	// X label under the bottom panel.
	xl := f.XLabel
	if xl == "" {
		xl = "time"
	}
	unit := f.XUnit
	if unit == "" && f.XLabel == "" {
		unit = "s"
	}
	if unit != "" {
		xl += " (" + unit + ")"
	}
	c.text(float64(marginLeft)+pw/2, float64(h)-14, xl, anchorMiddle, black, false, false)
}

// panelFrame is where one panel is drawn: its box on the canvas, its data
// ranges and their ticks.
type panelFrame struct {
	left, top, w, h    float64
	xlo, xhi, ylo, yhi float64
	xt, yt             []float64
	// dodge shifts the series being drawn sideways (px): marked series of
	// one panel sit side by side, so equal values show every mark and
	// error bar instead of the last one drawn.
	dodge float64
}

// dodgeStep is the sideways distance between marked series (px).
const dodgeStep = 5

func (fr *panelFrame) sx(x float64) float64 { return fr.left + (x-fr.xlo)/(fr.xhi-fr.xlo)*fr.w }
func (fr *panelFrame) sy(y float64) float64 { return fr.top + fr.h - (y-fr.ylo)/(fr.yhi-fr.ylo)*fr.h }

// clampY keeps y within the panel's range.
func (fr *panelFrame) clampY(y float64) float64 { return math.Max(fr.ylo, math.Min(fr.yhi, y)) }

// drawPanel draws the grid and ticks, the series, the axes, the y label
// and the legend of panel p.
func (fr *panelFrame) drawPanel(c canvas, p *Panel) {
	fr.drawGrid(c)
	// Series, clipped to the panel by construction of the ranges.
	marked := 0
	for j := range p.Series {
		if s := &p.Series[j]; s.Marker && !s.NoLine {
			marked++
		}
	}
	for j, sr := range p.Series {
		fr.dodge = 0
		if sr.Marker && !sr.NoLine && marked > 1 { // side by side, not on top of each other
			fr.dodge = (float64(j) - float64(marked-1)/2) * dodgeStep
		}
		fr.drawSeries(c, &p.Series[j], j)
	}
	// Axes frame.
	c.line(fr.left, fr.top, fr.left, fr.top+fr.h, axisColor, 1)
	c.line(fr.left, fr.top+fr.h, fr.left+fr.w, fr.top+fr.h, axisColor, 1)
	// Y label, vertical, centred on the panel.
	yl := p.YLabel
	if p.Unit != "" {
		yl += " (" + p.Unit + ")"
	}
	c.text(16, fr.top+fr.h/2, yl, anchorMiddle, black, true, false)
	if len(p.Series) == 0 {
		c.text(fr.left+fr.w/2, fr.top+fr.h/2, "no data", anchorMiddle, axisColor, false, false)
	}
	fr.drawLegend(c, p)
}

// drawGrid draws the grid lines, tick marks and tick labels of both axes.
func (fr *panelFrame) drawGrid(c canvas) {
	left, top, pw, ph := fr.left, fr.top, fr.w, fr.h
	for _, v := range fr.yt {
		if v < fr.ylo || v > fr.yhi {
			continue
		}
		y := fr.sy(v)
		c.line(left, y, left+pw, y, gridColor, 1)
		c.line(left-tickLen, y, left, y, axisColor, 1)
		c.text(left-tickLen-3, y+4, fmtTick(v, fr.yt), anchorEnd, black, false, false)
	}
	for _, v := range fr.xt {
		if v < fr.xlo || v > fr.xhi {
			continue
		}
		x := fr.sx(v)
		c.line(x, top, x, top+ph, gridColor, 1)
		c.line(x, top+ph, x, top+ph+tickLen, axisColor, 1)
		c.text(x, top+ph+tickLen+13, fmtTick(v, fr.xt), anchorMiddle, black, false, false)
	}
}

// drawSeries draws series s (the j-th of its panel): its line, broken at
// NaN and infinite points, its error bars and its markers.
func (fr *panelFrame) drawSeries(c canvas, s *Series, j int) {
	col := s.colorOf(j)
	var seg []pt
	flush := func() {
		if len(seg) == 1 && !s.Marker && !s.NoLine {
			c.rect(seg[0].x-1, seg[0].y-1, 3, 3, col)
		} else if len(seg) > 1 && !s.NoLine {
			c.polyline(seg, col, 1.6, dashOf(j))
		}
		seg = nil
	}
	for k := range s.X {
		x, y := s.X[k], s.Y[k]
		if math.IsNaN(x) || math.IsNaN(y) || math.IsInf(y, 0) {
			flush()
			continue
		}
		if k < len(s.YLo) && k < len(s.YHi) && !math.IsNaN(s.YLo[k]) && !math.IsNaN(s.YHi[k]) {
			errorBar(c, fr.sx(x)+fr.dodge, fr.sy(fr.clampY(s.YLo[k])), fr.sy(fr.clampY(s.YHi[k])), col)
		}
		px := pt{fr.sx(x) + fr.dodge, fr.sy(fr.clampY(y))}
		seg = append(seg, px)
		if s.Marker || s.NoLine {
			marker(c, px, s.shape(j), col)
		}
	}
	flush()
}

// xRange is the x extent of all series.
func (f *Figure) xRange() (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, p := range f.Panels {
		for _, s := range p.Series {
			for _, x := range s.X {
				if !math.IsNaN(x) && !math.IsInf(x, 0) {
					lo, hi = math.Min(lo, x), math.Max(hi, x)
				}
			}
		}
	}
	return fixRange(lo, hi)
}

// yRange is the panel's y extent, including zero unless fixed.
func (p *Panel) yRange() (lo, hi float64) {
	if p.YMax > p.YMin {
		return p.YMin, p.YMax
	}
	lo, hi = 0, math.Inf(-1)
	for _, s := range p.Series {
		for _, ys := range [][]float64{s.Y, s.YLo, s.YHi} {
			for _, y := range ys {
				if !math.IsNaN(y) && !math.IsInf(y, 0) {
					lo, hi = math.Min(lo, y), math.Max(hi, y)
				}
			}
		}
	}
	return fixRange(lo, hi)
}

// fixRange turns an empty or zero-width range into a drawable one.
func fixRange(lo, hi float64) (float64, float64) {
	switch {
	case math.IsInf(lo, 0) || math.IsInf(hi, 0):
		return 0, 1
	case hi == lo:
		if lo == 0 {
			return 0, 1
		}
		d := math.Abs(lo) * 0.1
		return lo - d, hi + d
	}
	return lo, hi
}

// ticks returns about n round tick values (1, 2 or 5 times a power of ten)
// covering [lo, hi].
func ticks(lo, hi float64, n int) []float64 {
	if n < 2 {
		n = 2
	}
	span := hi - lo
	if span <= 0 || math.IsNaN(span) || math.IsInf(span, 0) {
		return nil
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	start := math.Floor(lo/step) * step
	var out []float64
	for v := start; len(out) < 100; v += step {
		out = append(out, math.Round(v/step)*step)
		if v >= hi-step*1e-9 {
			break
		}
	}
	return out
}

// fmtTick formats v with as many decimals as the tick step needs, with k/M/G
// suffixes for large values.
func fmtTick(v float64, all []float64) string {
	step := 1.0
	if len(all) > 1 {
		step = all[1] - all[0]
	}
	if v == 0 {
		return "0"
	}
	maxAbs := math.Max(math.Abs(all[0]), math.Abs(all[len(all)-1]))
	for _, u := range []struct {
		div    float64
		suffix string
	}{{1e9, "G"}, {1e6, "M"}, {1e4, "k"}} {
		if maxAbs >= u.div*1 && u.div > 1 {
			if u.suffix == "k" {
				u.div = 1e3
			}
			return trimFloat(v/u.div, step/u.div) + u.suffix
		}
	}
	return trimFloat(v, step)
}

func trimFloat(v, step float64) string {
	// Fewest decimals that show the step exactly (steps are 1, 2 or 5
	// times a power of ten, and ticks are multiples of the step).
	dec := 0
	for ; dec < 6 && step > 0; dec++ {
		m := step * math.Pow(10, float64(dec))
		if math.Abs(m-math.Round(m)) < 1e-6*math.Max(1, m) {
			break
		}
	}
	return strconv.FormatFloat(v, 'f', dec, 64)
}

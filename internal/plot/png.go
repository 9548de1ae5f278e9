// png.go: the raster canvas. Lines are antialiased by distance to the
// segment (coverage = half width + 0.5 - distance, clamped to [0,1]); text is
// the Go font (golang.org/x/image/font/gofont, rendered by opentype), bold
// and larger for the title, rotated for y labels.
package plot

import (
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"sync"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/gobold"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
)

// WritePNG draws the figure as a PNG image.
func (f *Figure) WritePNG(w io.Writer) error {
	if err := f.validate(); err != nil {
		return err
	}
	wd, ht := f.size()
	c := &pngCanvas{img: image.NewRGBA(image.Rect(0, 0, wd, ht))}
	f.draw(c)
	return (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(w, c.img)
}

type pngCanvas struct{ img *image.RGBA }

func (c *pngCanvas) rect(x, y, w, h float64, fill color.RGBA) {
	r := image.Rect(int(math.Round(x)), int(math.Round(y)), int(math.Round(x+w)), int(math.Round(y+h)))
	draw.Draw(c.img, r, image.NewUniform(fill), image.Point{}, draw.Src)
}

// blend mixes col into pixel (x, y) with coverage a in [0, 1].
func (c *pngCanvas) blend(x, y int, col color.RGBA, a float64) {
	if !(image.Point{x, y}.In(c.img.Rect)) || a <= 0 {
		return
	}
	if a > 1 {
		a = 1
	}
	i := c.img.PixOffset(x, y)
	p := c.img.Pix[i : i+4 : i+4]
	p[0] = uint8(float64(p[0])*(1-a) + float64(col.R)*a + 0.5)
	p[1] = uint8(float64(p[1])*(1-a) + float64(col.G)*a + 0.5)
	p[2] = uint8(float64(p[2])*(1-a) + float64(col.B)*a + 0.5)
	p[3] = 0xff
}

func (c *pngCanvas) line(x1, y1, x2, y2 float64, col color.RGBA, width float64) {
	// Axis-parallel 1-pixel lines are snapped to the pixel grid so grid
	// lines and ticks stay crisp.
	if width <= 1 && (x1 == x2 || y1 == y2) {
		xa, xb := int(math.Round(math.Min(x1, x2))), int(math.Round(math.Max(x1, x2)))
		ya, yb := int(math.Round(math.Min(y1, y2))), int(math.Round(math.Max(y1, y2)))
		for y := ya; y <= yb; y++ {
			for x := xa; x <= xb; x++ {
				c.blend(x, y, col, 1)
			}
		}
		return
	}
	c.polyline([]pt{{x1, y1}, {x2, y2}}, col, width, nil)
}

func (c *pngCanvas) polyline(p []pt, col color.RGBA, width float64, dash []float64) {
	for _, d := range dashed(p, dash) {
		cov := map[image.Point]float64{}
		for i := 1; i < len(d); i++ {
			c.segment(cov, d[i-1].x, d[i-1].y, d[i].x, d[i].y, width)
		}
		c.fill(cov, col)
	}
}

// fill blends col into each pixel by its coverage.
func (c *pngCanvas) fill(cov map[image.Point]float64, col color.RGBA) {
	for p, a := range cov {
		c.blend(p.X, p.Y, col, a)
	}
}

// segment adds an antialiased thick segment's coverage to cov. A pixel
// keeps the largest coverage of the segments of one line, so joints of a
// polyline do not darken, while a line drawn over another of a different
// colour covers it (coinciding series stay visible by their dashes).
func (c *pngCanvas) segment(cov map[image.Point]float64, x1, y1, x2, y2, width float64) {
	hw := width / 2
	minX := int(math.Floor(math.Min(x1, x2) - hw - 1))
	maxX := int(math.Ceil(math.Max(x1, x2) + hw + 1))
	minY := int(math.Floor(math.Min(y1, y2) - hw - 1))
	maxY := int(math.Ceil(math.Max(y1, y2) + hw + 1))
	b := c.img.Rect
	minX, maxX = max(minX, b.Min.X), min(maxX, b.Max.X-1)
	minY, maxY = max(minY, b.Min.Y), min(maxY, b.Max.Y-1)
	dx, dy := x2-x1, y2-y1
	l2 := dx*dx + dy*dy
	for y := minY; y <= maxY; y++ {
		for x := minX; x <= maxX; x++ {
			px, py := float64(x)+0.5, float64(y)+0.5
			t := 0.0
			if l2 > 0 {
				t = ((px-x1)*dx + (py-y1)*dy) / l2
				t = math.Max(0, math.Min(1, t))
			}
			ex, ey := x1+t*dx-px, y1+t*dy-py
			a := math.Min(1, hw+0.5-math.Sqrt(ex*ex+ey*ey))
			if k := (image.Point{x, y}); a > cov[k] {
				cov[k] = a
			}
		}
	}
}

func (c *pngCanvas) text(x, y float64, s string, a anchor, col color.RGBA, vertical, big bool) {
	face := faceOf(big)
	w := font.MeasureString(face, s).Ceil()
	m := face.Metrics()
	ascent, h := m.Ascent.Ceil(), m.Height.Ceil()+m.Descent.Ceil()
	if w <= 0 {
		return
	}
	// Render into a small mask, then copy (rotated for vertical text).
	mask := image.NewAlpha(image.Rect(0, 0, w, h))
	d := font.Drawer{Dst: mask, Src: image.Opaque, Face: face, Dot: fixed.P(0, ascent)}
	d.DrawString(s)
	off := 0.0
	switch a {
	case anchorMiddle:
		off = float64(w) / 2
	case anchorEnd:
		off = float64(w)
	}
	for my := 0; my < h; my++ {
		for mx := 0; mx < w; mx++ {
			al := mask.AlphaAt(mx, my).A
			if al == 0 {
				continue
			}
			var px, py int
			if vertical {
				// Text runs upwards: mask x goes to -y, mask y to +x.
				px = int(x) + my - h/2
				py = int(math.Round(y+off)) - mx
			} else {
				px = int(math.Round(x-off)) + mx
				py = int(y) - ascent + my
			}
			c.blend(px, py, col, float64(al)/255)
		}
	}
}

// Text faces: the Go fonts (a humanist sans serif, antialiased; the
// figures' text was the 7x13 bitmap typewriter face before), 13 px and a
// 19 px bold one for titles. Parsed once.
var faces = sync.OnceValue(func() [2]font.Face {
	face := func(ttf []byte, size float64) font.Face {
		f, err := opentype.Parse(ttf)
		if err != nil {
			panic("plot: the embedded Go font does not parse: " + err.Error())
		}
		fc, err := opentype.NewFace(f, &opentype.FaceOptions{Size: size, DPI: 72, Hinting: font.HintingFull})
		if err != nil {
			panic("plot: " + err.Error())
		}
		return fc
	}
	return [2]font.Face{face(goregular.TTF, textSize), face(gobold.TTF, titleSize)}
})

// Sizes of the text (px).
const (
	textSize  = 13
	titleSize = 19
)

func faceOf(big bool) font.Face {
	if big {
		return faces()[1]
	}
	return faces()[0]
}

// textWidth is the width of s as drawn (px).
func textWidth(s string, big bool) float64 {
	return float64(font.MeasureString(faceOf(big), s).Ceil())
}

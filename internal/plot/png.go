// png.go: the raster canvas. Lines are antialiased by distance to the
// segment (coverage = half width + 0.5 - distance, clamped to [0,1]); text is
// the 7x13 bitmap font of golang.org/x/image/font/basicfont, drawn twice as
// large for the title and rotated for y labels.
package plot

import (
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
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
	c.segment(x1, y1, x2, y2, col, width)
}

func (c *pngCanvas) polyline(p []pt, col color.RGBA, width float64) {
	for i := 1; i < len(p); i++ {
		c.segment(p[i-1].x, p[i-1].y, p[i].x, p[i].y, col, width)
	}
}

// segment draws an antialiased thick segment. Each pixel takes the larger of
// its current coverage by this colour and the new one, so joints of a
// polyline do not darken.
func (c *pngCanvas) segment(x1, y1, x2, y2 float64, col color.RGBA, width float64) {
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
			d := math.Sqrt(ex*ex + ey*ey)
			a := hw + 0.5 - d
			if a <= 0 {
				continue
			}
			c.blendMax(x, y, col, math.Min(1, a))
		}
	}
}

// blendMax blends only if the pixel is not already at least that close to
// col (approximated on the channel furthest from col).
func (c *pngCanvas) blendMax(x, y int, col color.RGBA, a float64) {
	i := c.img.PixOffset(x, y)
	p := c.img.Pix[i : i+3 : i+3]
	// Current coverage of col in this pixel, assuming the background was white.
	cur := 0.0
	for k, cc := range []uint8{col.R, col.G, col.B} {
		if d := 255 - float64(cc); d > 8 {
			cur = math.Max(cur, (255-float64(p[k]))/d)
			_ = k
		}
	}
	if cur >= a {
		return
	}
	c.blend(x, y, col, a)
}

func (c *pngCanvas) text(x, y float64, s string, a anchor, col color.RGBA, vertical, big bool) {
	face := basicfont.Face7x13
	w := font.MeasureString(face, s).Ceil()
	h := face.Height
	// Render into a small mask, then copy (scaled or rotated) onto the image.
	mask := image.NewAlpha(image.Rect(0, 0, w, h))
	d := font.Drawer{Dst: mask, Src: image.Opaque, Face: face, Dot: fixed.P(0, face.Ascent)}
	d.DrawString(s)
	scale := 1
	if big {
		scale = 2
	}
	sw, sh := w*scale, h*scale
	off := 0.0
	switch a {
	case anchorMiddle:
		off = float64(sw) / 2
	case anchorEnd:
		off = float64(sw)
	}
	for my := 0; my < sh; my++ {
		for mx := 0; mx < sw; mx++ {
			al := mask.AlphaAt(mx/scale, my/scale).A
			if al == 0 {
				continue
			}
			var px, py int
			if vertical {
				// Text runs upwards: mask x goes to -y, mask y to +x.
				px = int(x) + my - sh/2
				py = int(math.Round(y+off)) - mx
			} else {
				px = int(math.Round(x-off)) + mx
				py = int(y) - face.Ascent*scale + my
			}
			c.blend(px, py, col, float64(al)/255)
		}
	}
}

// svg.go: the vector canvas, writing the same primitives as SVG 1.1
// elements by hand (no dependency), with text escaped for XML.
package plot

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"image/color"
	"io"
	"strconv"
	"strings"
)

// WriteSVG draws the figure as an SVG document.
func (f *Figure) WriteSVG(w io.Writer) error {
	if err := f.validate(); err != nil {
		return err
	}
	wd, ht := f.size()
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Go, DejaVu Sans, Helvetica, Arial, sans-serif" font-size="13">`+"\n", wd, ht, wd, ht)
	if f.Title != "" {
		fmt.Fprintf(bw, "<title>%s</title>\n", esc(f.Title))
	}
	c := &svgCanvas{w: bw}
	f.draw(c)
	fmt.Fprintln(bw, "</svg>")
	return bw.Flush()
}

type svgCanvas struct{ w *bufio.Writer }

func hex(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

func (c *svgCanvas) rect(x, y, w, h float64, fill color.RGBA) {
	fmt.Fprintf(c.w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x, y, w, h, hex(fill))
}

func (c *svgCanvas) line(x1, y1, x2, y2 float64, col color.RGBA, width float64) {
	fmt.Fprintf(c.w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%.1f"/>`+"\n", x1, y1, x2, y2, hex(col), width)
}

func (c *svgCanvas) polyline(p []pt, col color.RGBA, width float64, dash []float64) {
	da := ""
	if len(dash) > 0 {
		var parts []string
		for _, d := range dash {
			parts = append(parts, strconv.FormatFloat(d, 'f', -1, 64))
		}
		da = ` stroke-dasharray="` + strings.Join(parts, " ") + `"`
	}
	fmt.Fprintf(c.w, `<polyline fill="none" stroke="%s" stroke-width="%.1f" stroke-linejoin="round"%s points="`, hex(col), width, da)
	for i, q := range p {
		if i > 0 {
			c.w.WriteByte(' ')
		}
		fmt.Fprintf(c.w, "%.1f,%.1f", q.x, q.y)
	}
	c.w.WriteString("\"/>\n")
}

func (c *svgCanvas) text(x, y float64, s string, a anchor, col color.RGBA, vertical, big bool) {
	anc := [...]string{"start", "middle", "end"}[a]
	size := ""
	if big {
		size = ` font-size="19" font-weight="bold"`
	}
	tr := ""
	if vertical {
		tr = fmt.Sprintf(` transform="rotate(-90 %.1f %.1f)"`, x, y)
		y += 4
	}
	fmt.Fprintf(c.w, `<text x="%.1f" y="%.1f" text-anchor="%s" fill="%s"%s%s>%s</text>`+"\n", x, y, anc, hex(col), size, tr, esc(s))
}

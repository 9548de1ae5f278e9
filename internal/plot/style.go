// Series styles: the mark shapes, error bars and dash patterns that keep
// coinciding series apart.

package plot

import (
	"image/color"
	"math"
)

// shape is the mark of series j: the five line shapes in turn, and an
// asterisk for marks alone (published values), unlike any measured series.
func (s *Series) shape(j int) int {
	if s.NoLine {
		return asterisk
	}
	return j % 5
}

const asterisk = 5

// marker draws mark shape at p: square, triangle, diamond, cross, circle,
// asterisk.
func marker(c canvas, p pt, shape int, col color.RGBA) {
	const r = 4.0
	switch shape {
	case asterisk:
		for _, d := range [][2]float64{{r + 2, 0}, {0, r + 2}, {r, r}, {r, -r}} {
			c.line(p.x-d[0], p.y-d[1], p.x+d[0], p.y+d[1], col, 2)
		}
	case 0:
		c.rect(p.x-r+1, p.y-r+1, 2*r-1, 2*r-1, col)
	case 1:
		c.polyline([]pt{{p.x, p.y - r - 1}, {p.x + r + 1, p.y + r}, {p.x - r - 1, p.y + r}, {p.x, p.y - r - 1}}, col, 1.6, nil)
	case 2:
		c.polyline([]pt{{p.x, p.y - r - 1}, {p.x + r + 1, p.y}, {p.x, p.y + r + 1}, {p.x - r - 1, p.y}, {p.x, p.y - r - 1}}, col, 1.6, nil)
	case 3:
		c.line(p.x-r, p.y-r, p.x+r, p.y+r, col, 1.8)
		c.line(p.x-r, p.y+r, p.x+r, p.y-r, col, 1.8)
	default:
		var ring []pt
		for k := 0; k <= 12; k++ {
			a := float64(k) * math.Pi / 6
			ring = append(ring, pt{p.x + r*math.Cos(a), p.y + r*math.Sin(a)})
		}
		c.polyline(ring, col, 1.6, nil)
	}
}

// errorBar draws a vertical bar with caps from y1 to y2 at x.
func errorBar(c canvas, x, y1, y2 float64, col color.RGBA) {
	c.line(x, y1, x, y2, col, 1.2)
	c.line(x-3, y1, x+3, y1, col, 1.2)
	c.line(x-3, y2, x+3, y2, col, 1.2)
}

// dashOf is the line style of series j: solid, dashed, dotted, dash-dot
// (on, off lengths in px; none: solid).
func dashOf(j int) []float64 {
	return [][]float64{nil, {9, 5}, {2.5, 4}, {9, 4, 2.5, 4}}[j%4]
}

// dashed cuts the polyline p into the "on" pieces of pattern, which runs on
// along the whole line (not restarting at each vertex); nil or empty
// pattern: p whole.
func dashed(p []pt, pattern []float64) [][]pt {
	if len(pattern) == 0 || len(p) < 2 {
		return [][]pt{p}
	}
	var out [][]pt
	k, left, on := 0, pattern[0], true
	cur := []pt{p[0]}
	for i := 1; i < len(p); i++ {
		a, b := p[i-1], p[i]
		seg := math.Hypot(b.x-a.x, b.y-a.y)
		pos := 0.0
		for seg-pos > left {
			pos += left
			q := pt{a.x + (b.x-a.x)*pos/seg, a.y + (b.y-a.y)*pos/seg}
			if on {
				out = append(out, append(cur, q))
			}
			cur = []pt{q}
			k = (k + 1) % len(pattern)
			left, on = pattern[k], !on
		}
		left -= seg - pos
		cur = append(cur, b)
	}
	if on && len(cur) > 1 {
		out = append(out, cur)
	}
	return out
}

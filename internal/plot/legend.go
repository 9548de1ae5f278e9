// Legend of a panel: a swatch and the name of each series right of the
// panel, long names wrapped or shortened to the column.

package plot

import (
	"fmt"
	"strings"
)

// Legend rows (pixels): an entry's first line starts a row of
// legendEntry, each further line of its name adds legendLine.
const (
	legendEntry = 16
	legendLine  = 14
)

// drawLegend draws a swatch and the name of each series, right of the
// panel (a name too wide for the column on two lines), and "+N more"
// where they do not fit.
func (fr *panelFrame) drawLegend(c canvas, p *Panel) {
	lx := fr.left + fr.w + 14
	y := fr.top + 8 // the first line's middle
	for j, s := range p.Series {
		lines := legendLines(s.Name, marginRight-44)
		h := float64(legendEntry + legendLine*(len(lines)-1))
		// It fits, with a row left for "+N more" while others follow.
		rest := 0.0
		if j < len(p.Series)-1 {
			rest = legendEntry
		}
		if y-8+h+rest > fr.top+fr.h {
			c.text(lx, y+4, fmt.Sprintf("+%d more", len(p.Series)-j), anchorStart, black, false, false)
			break
		}
		if !s.NoLine {
			c.polyline([]pt{{lx, y}, {lx + 22, y}}, s.colorOf(j), 2.5, dashOf(j))
		}
		if s.Marker || s.NoLine {
			marker(c, pt{lx + 9, y}, s.shape(j), s.colorOf(j))
		}
		for k, l := range lines {
			c.text(lx+28, y+4+float64(k*legendLine), l, anchorStart, black, false, false)
		}
		y += h
	}
}

// legendLines is a legend name in the column's width: whole, or split
// before its " → " (a flow's process and lane above, where it goes below)
// or else at the last space that lets its first part fit, the rest
// shortened with "…" if it is still too wide.
func legendLines(s string, width float64) []string {
	if textWidth(s, false) <= width {
		return []string{s}
	}
	r, cut := []rune(s), -1
	for i, ch := range r {
		if ch == ' ' && i > 0 && textWidth(string(r[:i]), false) <= width {
			cut = i
		}
	}
	if arrow := strings.Index(s, " → "); arrow > 0 && textWidth(s[:arrow], false) <= width {
		cut = len([]rune(s[:arrow]))
	}
	if cut < 0 {
		return []string{truncName(s, width)}
	}
	return []string{string(r[:cut]), truncName(strings.TrimLeft(string(r[cut+1:]), " "), width)}
}

// truncName shortens s to at most width pixels, marking the cut with "…".
func truncName(s string, width float64) string {
	if textWidth(s, false) <= width {
		return s
	}
	r := []rune(s)
	for len(r) > 1 && textWidth(string(r)+"…", false) > width {
		r = r[:len(r)-1]
	}
	return string(r) + "…"
}

// fit.go: human output that fits 100 columns. A line too long loses its
// parenthesized details first, then its end (an ellipsis says so); -v and
// --json keep everything.
package main

import (
	"bytes"
	"io"
	"strings"
	"unicode/utf8"
)

// outputWidth is the width of the commands' default output.
const outputWidth = 100

// fitLine is s within width runes: whole if it fits, else without its
// parenthesized details, else cut with an ellipsis.
func fitLine(s string, width int) string {
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	s = stripParens(s)
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	r := []rune(s)
	return strings.TrimRight(string(r[:width-1]), " ") + "…"
}

// stripParens drops every " (...)" group of s, nested ones with it.
func stripParens(s string) string {
	var b strings.Builder
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '(':
			if depth == 0 {
				cut := strings.TrimRight(b.String(), " ")
				b.Reset()
				b.WriteString(cut)
			}
			depth++
		case c == ')' && depth > 0:
			depth--
		case depth == 0:
			b.WriteByte(c)
		}
	}
	if depth > 0 { // unbalanced: not details, keep s
		return s
	}
	return b.String()
}

// fitWriter writes each line of what it is given fitted to width; Close
// writes a last line without its newline.
type fitWriter struct {
	w     io.Writer
	width int
	buf   []byte
}

func newFitWriter(w io.Writer) *fitWriter { return &fitWriter{w: w, width: outputWidth} }

func (f *fitWriter) Write(p []byte) (int, error) {
	f.buf = append(f.buf, p...)
	for {
		i := bytes.IndexByte(f.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		if _, err := io.WriteString(f.w, fitLine(string(f.buf[:i]), f.width)+"\n"); err != nil {
			return len(p), err
		}
		f.buf = f.buf[i+1:]
	}
}

func (f *fitWriter) Close() error {
	if len(f.buf) == 0 {
		return nil
	}
	_, err := io.WriteString(f.w, fitLine(string(f.buf), f.width))
	f.buf = nil
	return err
}

// Package manpage writes man(7) pages: roff escaping of plain text, and the
// Markdown subset lanes' docs use (headings, paragraphs, lists, fenced code,
// tables, inline code, emphasis and links) turned into man macros, so that a
// page such as lanes-policy(5) is generated from the same source as its
// docs/ page and never drifts from it.
package manpage

import (
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Escape makes plain text safe in a man page: backslashes and hyphens
// escaped, a line starting with a control character (. or ') guarded.
func Escape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	lines := strings.Split(s, "\n")
	for i, line := range lines {
		if strings.HasPrefix(line, ".") || strings.HasPrefix(line, "'") {
			lines[i] = `\&` + line
		}
	}
	return strings.Join(lines, "\n")
}

var (
	inlineCode = regexp.MustCompile("`([^`]+)`")
	strong     = regexp.MustCompile(`\*\*([^*]+)\*\*`)
	emphasis   = regexp.MustCompile(`(^|[\s(])\*([^*\s][^*]*)\*`)
	link       = regexp.MustCompile(`\[([^\]]+)\]\(([^)]+)\)`)
)

// Inline escapes one paragraph's text and renders its Markdown spans:
// `code` and **strong** bold, *emphasis* italic, [text](target) as its text
// (followed by the target when that is a web address).
func Inline(s string) string {
	s = link.ReplaceAllStringFunc(s, func(m string) string {
		p := link.FindStringSubmatch(m)
		if strings.HasPrefix(p[2], "http://") || strings.HasPrefix(p[2], "https://") {
			return p[1] + " <" + p[2] + ">"
		}
		return p[1]
	})
	// Code spans are escaped alone: their text keeps its * and _.
	var spans []string
	s = inlineCode.ReplaceAllStringFunc(s, func(m string) string {
		spans = append(spans, Escape(inlineCode.FindStringSubmatch(m)[1]))
		return fmt.Sprintf("\x00%d\x00", len(spans)-1)
	})
	s = Escape(s)
	s = strong.ReplaceAllString(s, `\fB$1\fR`)
	s = emphasis.ReplaceAllString(s, `$1\fI$2\fR`)
	for i, span := range spans {
		s = strings.Replace(s, fmt.Sprintf("\x00%d\x00", i), `\fB`+span+`\fR`, 1)
	}
	return s
}

// Markdown writes md's blocks as man macros: "# " headings are dropped
// (the page's NAME says it), "## " become .SH (upper case), "### " .SS.
func Markdown(w io.Writer, md string) {
	lines := strings.Split(strings.ReplaceAll(md, "\r", ""), "\n")
	for i := 0; i < len(lines); {
		line := lines[i]
		switch {
		case strings.TrimSpace(line) == "":
			i++
		case strings.HasPrefix(line, "```"):
			i = codeBlock(w, lines, i)
		case strings.HasPrefix(line, "# "):
			i++
		case strings.HasPrefix(line, "## "):
			fmt.Fprintf(w, ".SH %s\n", Inline(strings.ToUpper(strings.TrimPrefix(line, "## "))))
			i++
		case strings.HasPrefix(line, "### "):
			fmt.Fprintf(w, ".SS %s\n", Inline(strings.TrimPrefix(line, "### ")))
			i++
		case strings.HasPrefix(line, "|"):
			i = table(w, lines, i)
		case listItem.MatchString(line):
			i = list(w, lines, i)
		default:
			i = paragraph(w, lines, i)
		}
	}
}

var listItem = regexp.MustCompile(`^(\s*)(- |\* |\d+\. )`)

// blockEnd tells a line that ends a paragraph or list item.
func blockEnd(line string) bool {
	t := strings.TrimSpace(line)
	return t == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "```") || strings.HasPrefix(line, "|")
}

func paragraph(w io.Writer, lines []string, i int) int {
	var text []string
	for ; i < len(lines) && !blockEnd(lines[i]) && !listItem.MatchString(lines[i]); i++ {
		text = append(text, strings.TrimSpace(lines[i]))
	}
	fmt.Fprintf(w, ".PP\n%s\n", Inline(strings.Join(text, " ")))
	return i
}

// list writes each item as an indented paragraph tagged with its bullet or
// number; continuation lines join their item.
func list(w io.Writer, lines []string, i int) int {
	for i < len(lines) && listItem.MatchString(lines[i]) {
		m := listItem.FindStringSubmatch(lines[i])
		text := []string{strings.TrimSpace(lines[i][len(m[0]):])}
		for i++; i < len(lines) && !blockEnd(lines[i]) && !listItem.MatchString(lines[i]); i++ {
			text = append(text, strings.TrimSpace(lines[i]))
		}
		tag := `\(bu`
		if n := strings.TrimSpace(m[2]); n != "-" && n != "*" {
			tag = n
		}
		fmt.Fprintf(w, ".IP %s 4\n%s\n", tag, Inline(strings.Join(text, " ")))
	}
	return i
}

func codeBlock(w io.Writer, lines []string, i int) int {
	fmt.Fprintln(w, ".PP\n.RS 4\n.nf")
	for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
		fmt.Fprintln(w, Escape(lines[i]))
	}
	fmt.Fprintln(w, ".fi\n.RE")
	return i + 1
}

// table writes a Markdown table as tagged paragraphs, which read well at
// any terminal width: the first cell is the tag; each further non-empty
// cell follows as "header: cell" (a "meaning" column as plain text).
func table(w io.Writer, lines []string, i int) int {
	header := cells(lines[i])
	i++
	if i < len(lines) && strings.Trim(lines[i], "|-: ") == "" {
		i++ // the delimiter row
	}
	for ; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		row := cells(lines[i])
		if len(row) == 0 {
			continue
		}
		fmt.Fprintf(w, ".TP\n%s\n", Inline(row[0]))
		var body []string
		for j := 1; j < len(row) && j < len(header); j++ {
			switch {
			case row[j] == "":
			case strings.EqualFold(header[j], "meaning"):
				body = append(body, Inline(row[j]))
			default:
				body = append(body, Inline(header[j]+": "+row[j]))
			}
		}
		fmt.Fprintln(w, strings.Join(body, "\n.br\n"))
	}
	return i
}

// cells splits a table row into its trimmed cells.
func cells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var out []string
	for _, c := range strings.Split(line, "|") {
		out = append(out, strings.TrimSpace(c))
	}
	return out
}

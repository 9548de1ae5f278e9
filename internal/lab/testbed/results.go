// results.go: writing and printing results.
//
// WriteResult creates DIR/<experiment>-<UTC time>/ with
//   - result.json       the Result (params, tables, raw data, notes)
//   - environment.json  kernel, qdiscs, offloads, BQL, congestion control,
//     lanes version and policy (see Environment)
//   - results.md        the tables in Markdown, with links to the figures
//   - NAME.png, NAME.svg the experiment's figures (plots.go), if it has any
package testbed

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// WriteResult stores r under base (e.g. "results") and returns the folder.
func WriteResult(base string, r *Result) (string, error) {
	dir := filepath.Join(base, r.Experiment+"-"+r.Started.UTC().Format("20060102-150405"))
	for i := 2; ; i++ {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			break
		}
		dir = filepath.Join(base, fmt.Sprintf("%s-%s-%d", r.Experiment, r.Started.UTC().Format("20060102-150405"), i))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("results folder: %w", err)
	}
	if err := writeJSON(filepath.Join(dir, "result.json"), r); err != nil {
		return "", err
	}
	if r.Environment != nil {
		if err := writeJSON(filepath.Join(dir, "environment.json"), r.Environment); err != nil {
			return "", err
		}
	}
	// figures first, so results.md links those drawn (a failed figure
	// does not cost the tables)
	figs, plotErr := DrawPlots(dir, r)
	var md strings.Builder
	fmt.Fprintf(&md, "# %s\n\nStarted %s, took %s. lanes %s.\n\n", r.Experiment, r.Started.UTC().Format(time.RFC3339), r.Duration.Round(time.Second), Version)
	if len(r.Params) > 0 {
		WriteMarkdown(&md, ParamTable(r.Params))
		md.WriteString("\n")
	}
	for _, t := range r.Tables {
		WriteMarkdown(&md, t)
		md.WriteString("\n")
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&md, "- %s\n", n)
	}
	var pngs []string
	for _, f := range figs {
		if strings.HasSuffix(f, ".png") {
			pngs = append(pngs, filepath.Base(f))
		}
	}
	if len(pngs) > 0 {
		md.WriteString("\n## Figures\n\n")
		for _, f := range pngs {
			name := strings.TrimSuffix(f, ".png")
			fmt.Fprintf(&md, "![%s](%s) ([SVG](%s.svg))\n\n", name, f, name)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(md.String()), 0o644); err != nil {
		return "", fmt.Errorf("write results.md: %w", err)
	}
	return dir, plotErr
}

// ReadResult loads DIR/result.json (and environment.json if present).
func ReadResult(dir string) (*Result, error) {
	b, err := os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		return nil, fmt.Errorf("read result: %w", err)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("parse %s/result.json: %w", dir, err)
	}
	return &r, nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// WriteMarkdown writes a table in Markdown.
func WriteMarkdown(w io.Writer, t Table) {
	if t.Title != "" {
		fmt.Fprintf(w, "### %s\n\n", t.Title)
	}
	fmt.Fprintf(w, "| %s |\n|", strings.Join(t.Columns, " | "))
	for range t.Columns {
		fmt.Fprint(w, " --- |")
	}
	fmt.Fprintln(w)
	for _, r := range t.Rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
}

// WriteText writes a table aligned in columns, as iproute2 tools do.
func WriteText(w io.Writer, t Table) {
	width := make([]int, len(t.Columns))
	for i, c := range t.Columns {
		width[i] = len(c)
	}
	for _, r := range t.Rows {
		for i, c := range r {
			if i < len(width) && len(c) > width[i] {
				width[i] = len(c)
			}
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		for i, c := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			if i < len(width) {
				fmt.Fprintf(&b, "%-*s", width[i], c)
			} else {
				b.WriteString(c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	if t.Title != "" {
		fmt.Fprintln(w, t.Title)
	}
	line(t.Columns)
	for _, r := range t.Rows {
		line(r)
	}
}

// ParamTable lists a run's parameters one per row, nested ones with dotted
// names (config.up_trace), in name order.
func ParamTable(params map[string]any) Table {
	t := Table{Title: "Parameters", Columns: []string{"parameter", "value"}}
	var flat func(prefix string, v any)
	flat = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				name := k
				if prefix != "" {
					name = prefix + "." + k
				}
				flat(name, x[k])
			}
		case []any:
			parts := make([]string, len(x))
			for i, e := range x {
				b, _ := json.Marshal(e)
				parts[i] = strings.Trim(string(b), `"`)
			}
			t.Rows = append(t.Rows, []string{prefix, strings.Join(parts, ", ")})
		case string:
			t.Rows = append(t.Rows, []string{prefix, x})
		case nil:
			t.Rows = append(t.Rows, []string{prefix, "-"})
		default:
			b, _ := json.Marshal(x)
			t.Rows = append(t.Rows, []string{prefix, string(b)})
		}
	}
	// Through JSON, so structs show the names their JSON tags give.
	b, err := json.Marshal(params)
	var m map[string]any
	if err != nil || json.Unmarshal(b, &m) != nil {
		t.Rows = [][]string{{"(unprintable)", fmt.Sprint(params)}}
		return t
	}
	flat("", m)
	return t
}

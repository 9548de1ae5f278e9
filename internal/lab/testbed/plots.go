// plots.go: figures drawn from a result's JSON (PNG and SVG beside it, linked
// from results.md).
//
// An experiment with a Plot function gets its figures drawn by WriteResult
// and redrawn by `lanes lab report DIR`, always from the stored result.json
// (Result.Data decoded again), so a figure never shows what the JSON lacks.
package testbed

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/lanes-net/lanes/internal/plot"
)

// Figure is one named figure of a result (files NAME.png and NAME.svg).
type Figure struct {
	Name string
	Fig  *plot.Figure
}

// DrawPlots draws the experiment's figures for r into dir and returns the
// files written (none if the experiment has no Plot function).
func DrawPlots(dir string, r *Result) ([]string, error) {
	x, ok := Lookup(r.Experiment)
	if !ok || x.Plot == nil {
		return nil, nil
	}
	// Round-trip Data through JSON so live and stored results draw alike.
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		return nil, err
	}
	figs, err := x.Plot(&back)
	if err != nil {
		return nil, fmt.Errorf("plot %s: %w", r.Experiment, err)
	}
	var files []string
	for _, f := range figs {
		for _, ext := range []string{".png", ".svg"} {
			p := filepath.Join(dir, f.Name+ext)
			if err := f.Fig.Save(p); err != nil {
				return files, fmt.Errorf("draw %s: %w", p, err)
			}
			files = append(files, p)
		}
	}
	return files, nil
}

// RedoTables replaces r's tables by the experiment's Tables computed from
// the stored result (nothing if the experiment has none).
func RedoTables(r *Result) error {
	x, ok := Lookup(r.Experiment)
	if !ok || x.Tables == nil {
		return nil
	}
	t, err := x.Tables(r)
	if err != nil {
		return fmt.Errorf("tables of %s: %w", r.Experiment, err)
	}
	r.Tables = t
	return nil
}

// DecodeParam re-decodes one of a result's Params into v.
func DecodeParam(r *Result, name string, v any) error {
	b, err := json.Marshal(r.Params[name])
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// DecodeData re-decodes a result's Data into v.
func DecodeData(r *Result, v any) error {
	b, err := json.Marshal(r.Data)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

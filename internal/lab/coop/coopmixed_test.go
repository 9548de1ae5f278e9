// coopmixed_test.go: coop-mixed's flags and its pooled rows.
package coop

import (
	"testing"
)

func TestMixedPooledRatio(t *testing.T) {
	m := &mixedExp{hosts: 6, plain: 2, reps: 3, direction: "down"}
	if err := m.check(); err != nil {
		t.Fatal(err)
	}
	if len(m.lanesH) != 4 || m.lanesH[0] != 2 || len(m.plainH) != 2 || !m.c.down {
		t.Fatalf("lanes hosts %v, plain %v, down %v", m.lanesH, m.plainH, m.c.down)
	}
	// per repetition, lanes hosts mixed / all tcp: 2.0/3.0, 3.5/3.5, 3.0/2.5
	m.lanesSum = map[string]float64{"mixed": 2.0 + 3.5 + 3.0}
	m.tcpSum = map[string]float64{"mixed": 3.0 + 3.5 + 2.5}
	rows := m.pooledRows([]string{"mixed"})
	if len(rows) != 1 || rows[0][0] != "mixed, pooled (3)" || rows[0][2] != "2.83" || rows[0][3] != "0.94" {
		t.Errorf("pooled rows %q", rows)
	}
	m.reps = 1
	if rows := m.pooledRows([]string{"mixed"}); rows != nil {
		t.Errorf("one repetition: pooled rows %q", rows)
	}
	for _, bad := range []*mixedExp{{hosts: 6, plain: 7, reps: 1, direction: "up"}, {hosts: 6, plain: 2, reps: 0, direction: "up"}, {hosts: 6, plain: 2, reps: 1, direction: "both"}} {
		if err := bad.check(); err == nil {
			t.Errorf("%+v accepted", *bad)
		}
	}
}

// Tests of the policy value types' text forms.
package config

import (
	"errors"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	for in, want := range map[string]Rate{"10mbit": 10e6, "1.5Mbit": 1.5e6, "500kbit": 500e3, "1gbit": 1e9, "1200": 1200, "2tbit": 2e12, "1mibit": 1 << 20} {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
		if back, err := ParseRate(got.String()); err != nil || back != got {
			t.Errorf("round trip %q -> %q -> %v, %v", in, got.String(), back, err)
		}
	}
	// tc reads mbps as megabytes/s, people as megabits/s: refused, as are bare prefixes.
	for _, bad := range []string{"", "fast", "10 furlongs", "-3mbit", "mbit", "10Mbps", "20mbps", "100kbps", "8bps", "10m", "5k"} {
		if _, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) accepted", bad)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]Bytes{"1500": 1500, "1500B": 1500, "8KB": 8000, "8k": 8000, "8KiB": 8192, "2MiB": 2 << 20} {
		got, err := ParseBytes(in)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %v, %v; want %v", in, got, err, want)
		}
		if back, err := ParseBytes(got.String()); err != nil || back != got {
			t.Errorf("round trip %q -> %q -> %v, %v", in, got.String(), back, err)
		}
	}
	if _, err := ParseBytes("8 parsecs"); err == nil {
		t.Error("bad unit accepted")
	}
}

func TestDuration(t *testing.T) {
	var d Duration
	if err := d.UnmarshalText([]byte("500ms")); err != nil || d.D() != 500*time.Millisecond {
		t.Fatalf("got %v %v", d, err)
	}
	if err := d.UnmarshalText([]byte("soon")); err == nil {
		t.Fatal("bad duration accepted")
	}
}

func TestPrefix(t *testing.T) {
	err := Prefix("coop", Prefix("caps[2]", Errorf("segments", "must be > 0")))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "coop.caps[2].segments" {
		t.Fatalf("got %v", err)
	}
	if got := Prefix("tasks", Errorf("[3]", "x")).(*FieldError).Field; got != "tasks[3]" {
		t.Fatalf("got %q", got)
	}
}

// experiments_test.go: the hidden flags fill the one Set, refuse unknown
// parts and stay out of the help.
package experiments

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func parse(t *testing.T, args ...string) (Set, *pflag.FlagSet, error) {
	t.Helper()
	fs := pflag.NewFlagSet("daemon", pflag.ContinueOnError)
	read := Flags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	s, err := read()
	return s, fs, err
}

func TestFlagsFillTheSet(t *testing.T) {
	s, fs, err := parse(t, "--untold-held", "--directions-joined", "--share-rule-off", "slope,download", "--bg-udp-rule-off", "all",
		"--bg-udp-keep-tokens", "--struct-ops-by-update", "--allow-non-root-policy")
	if err != nil {
		t.Fatal(err)
	}
	want := Set{UntoldHeld: true, DirectionsJoined: true, Share: ShareOff{Slope: true, Download: true},
		BgUDP: BgUDPOff{Slope: true, Arrivals: true, Shape: true, Ifb: true, BothWays: true, KeepTokens: true, OwnLink: true, Room: true, Bursts: true}, StructOpsByUpdate: true, NonRootPolicy: true}
	if s != want {
		t.Errorf("set %+v, want %+v", s, want)
	}
	const on = "--untold-held --directions-joined --share-rule-off slope,download --bg-udp-rule-off slope,arrivals,shape,ifb,both-ways,own-link,room,bursts " +
		"--bg-udp-keep-tokens --struct-ops-by-update --allow-non-root-policy"
	if got := s.On(); got != on {
		t.Errorf("On() %q, want %q", got, on)
	}
	if usage := fs.FlagUsages(); usage != "" {
		t.Errorf("hidden flags in the usage:\n%s", usage)
	}
	if s, _, _ := parse(t); s != (Set{}) || s.On() != "" {
		t.Errorf("no flags: %+v %q, want the zero set", s, s.On())
	}
}

func TestUnknownPartRefused(t *testing.T) {
	for _, flag := range []string{"--share-rule-off", "--bg-udp-rule-off"} {
		_, _, err := parse(t, flag, "nosuch")
		if err == nil || !strings.Contains(err.Error(), `"nosuch"`) {
			t.Errorf("%s nosuch: %v, want refused by name", flag, err)
		}
	}
}

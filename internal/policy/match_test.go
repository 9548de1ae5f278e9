// match_test.go is the table of rule combinations: each one either compiles
// to the match the datapath applies (AND of all its fields) or is refused
// with the file, line, field and reason `lanes daemon --check` prints. The
// same combinations run through the real classifier in the daemon's
// TestRuleTableThroughClassifier.
package policy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/lanes-net/lanes/internal/appstate"
)

func TestRuleCombinations(t *testing.T) {
	pfx := netip.MustParsePrefix
	for _, tc := range []struct {
		name, rule string // one YAML flow mapping under rules:
		want       Match  // Kind "" when refused
		field, msg string // refused: field and part of the reason
	}{
		{"3-tuple", "{lane: background, dst: 192.0.2.10, dport: 443, sport: 40000}", Match{Kind: MatchTuple, Dst: pfx("192.0.2.10/32"), DPort: 443, SPort: 40000}, "", ""},
		{"v6 3-tuple", "{lane: background, dst: '2001:db8::1', dport: 443, sport: 40000}", Match{Kind: MatchTuple, Dst: pfx("2001:db8::1/128"), DPort: 443, SPort: 40000}, "", ""},
		{"dst only", "{lane: background, dst: 192.0.2.10}", Match{Kind: MatchDst, Dst: pfx("192.0.2.10/32")}, "", ""},
		{"dst + dport", "{lane: background, dst: 192.0.2.10, dport: 443}", Match{Kind: MatchDst, Dst: pfx("192.0.2.10/32"), DPort: 443}, "", ""},
		{"v4 prefix", "{lane: background, dst: 10.0.0.0/8}", Match{Kind: MatchDst, Dst: pfx("10.0.0.0/8")}, "", ""},
		{"v6 prefix + port", "{lane: background, dst: '2001:db8::/32', dport: 53}", Match{Kind: MatchDst, Dst: pfx("2001:db8::/32"), DPort: 53}, "", ""},
		{"v4-mapped", "{lane: background, dst: '::ffff:192.0.2.1'}", Match{Kind: MatchDst, Dst: pfx("192.0.2.1/32")}, "", ""},
		{"any destination, one port", "{lane: background, dst: 0.0.0.0/0, dport: 873}", Match{Kind: MatchDst, Dst: pfx("0.0.0.0/0"), DPort: 873}, "", ""},
		{"cgroup", "{lane: background, cgroup: /system.slice/apt-daily.service}", Match{Kind: MatchCgroup, Cgroup: "/system.slice/apt-daily.service"}, "", ""},
		{"uid", "{lane: background, uid: 1001}", Match{Kind: MatchUID, UID: 1001}, "", ""},
		{"dscp", "{lane: realtime, dscp: 46}", Match{Kind: MatchDSCP, DSCP: 46}, "", ""},
		{"exe", "{lane: background, exe: /usr/bin/rsync}", Match{Kind: MatchProcess}, "", ""},
		{"exe + uid + cgroup", "{lane: background, exe: rsync, uid: 1001, cgroup: /user.slice}", Match{Kind: MatchProcess}, "", ""},
		{"android", "{lane: background, android: background}", Match{Kind: MatchAndroid, Android: appstate.Background}, "", ""},
		{"android + uid", "{lane: background, android: background, uid: 1000}", Match{Kind: MatchAndroid, Android: appstate.Background, UID: 1000, HasUID: true}, "", ""},
		{"android state", "{lane: background, android: sleeping}", Match{}, "android", "unknown Android state"},
		{"android + cgroup", "{lane: background, android: top-app, cgroup: /a}", Match{}, "cgroup", "state and uid only"},
		{"android + dst", "{lane: background, android: top-app, dst: 10.0.0.1}", Match{}, "dst", "state and uid only"},

		{"uid + dscp", "{lane: background, uid: 1001, dscp: 8}", Match{}, "dscp", "uid or by its DSCP"},
		{"cgroup + uid", "{lane: background, cgroup: /user.slice, uid: 1001}", Match{}, "uid", "cgroup or by its uid"},
		{"cgroup + dscp", "{lane: background, cgroup: /user.slice, dscp: 8}", Match{}, "dscp", "cgroup or by its dscp"},
		{"dst + uid", "{lane: background, dst: 10.0.0.1, uid: 1001}", Match{}, "uid", "destination or by uid"},
		{"dst + dport + sport + uid", "{lane: background, dst: 10.0.0.1, dport: 1, sport: 2, uid: 1001}", Match{}, "uid", "destination or by uid"},
		{"dst + dscp", "{lane: background, dst: 10.0.0.1, dscp: 1}", Match{}, "dscp", "destination or by dscp"},
		{"dst + cgroup", "{lane: background, dst: 10.0.0.1, cgroup: /a}", Match{}, "cgroup", "destination or by cgroup"},
		{"exe + dst", "{lane: background, exe: rsync, dst: 10.0.0.1}", Match{}, "dst", "cannot also match a destination"},
		{"exe + dscp", "{lane: background, exe: rsync, dscp: 1}", Match{}, "dscp", "cannot also match a DSCP"},
		{"sport without dport", "{lane: background, dst: 10.0.0.1, sport: 40000}", Match{}, "sport", "full 3-tuple"},
		{"sport with prefix", "{lane: background, dst: 10.0.0.0/8, dport: 1, sport: 2}", Match{}, "sport", "full 3-tuple"},
		{"port without dst", "{lane: background, dport: 80}", Match{}, "dst", "needs dst"},
		{"host bits", "{lane: background, dst: 10.0.0.1/8}", Match{}, "dst", "did you mean 10.0.0.0/8"},
		{"zone", "{lane: background, dst: 'fe80::1%eth0'}", Match{}, "dst", "not an address or prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse("r.yaml", []byte("rules:\n  - "+tc.rule+"\n"))
			if tc.want.Kind == "" {
				var pe *Error
				if !errors.As(err, &pe) || pe.Line != 2 || pe.Field != "rules[0]."+tc.field || !strings.Contains(pe.Msg, tc.msg) {
					t.Fatalf("got %v, want r.yaml:2: rules[0].%s: ...%s...", err, tc.field, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := p.Matches[0]
			got.Rule, got.Lane = "", 0
			if got != tc.want {
				t.Fatalf("compiled to %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDuplicateMatchRefused(t *testing.T) {
	for _, text := range []string{
		"rules:\n  - {lane: background, uid: 5}\n  - {lane: realtime, uid: 5}\n",
		"rules:\n  - {lane: background, dst: 10.0.0.0/8}\n  - {lane: realtime, dst: 10.0.0.0/8}\n",
		"rules:\n  - {lane: background, cgroup: /a/b}\n  - {lane: realtime, cgroup: /a/b/}\n",
		"rules:\n  - {lane: background, android: background}\n  - {lane: interactive, android: background}\n",
	} {
		_, err := Parse("d.yaml", []byte(text))
		var pe *Error
		if !errors.As(err, &pe) || pe.Line != 3 || pe.Field != "rules[1]" || !strings.Contains(pe.Msg, "as rules[0]") {
			t.Errorf("%q: %v", text, err)
		}
	}
	// different prefixes and different ports are different matches
	if _, err := Parse("ok.yaml", []byte("rules:\n  - {lane: background, dst: 10.0.0.0/8}\n  - {lane: realtime, dst: 10.1.0.0/16}\n  - {lane: realtime, dst: 10.0.0.0/8, dport: 22}\n")); err != nil {
		t.Error(err)
	}
}

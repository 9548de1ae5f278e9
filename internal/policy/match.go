// match.go compiles each lane rule into the one typed match the datapath
// can apply, at validation, so `lanes daemon --check` refuses what the
// datapath cannot do instead of the daemon narrowing it silently.
//
// All fields of a rule must hold (AND). The datapath looks a packet up by
// one key at a time, so a rule is one of these combinations, anything else
// is refused with its line and field:
//
//	tuple    dst (one address) + dport + sport   the paper's 3-tuple, exact;
//	         [+ src]                             with the local address, the
//	                                             full 5-tuple (missing = any)
//	dst      dst (address or prefix) [+ dport]   missing port = any port
//	cgroup   cgroup                              the cgroup and those below it (TCP)
//	uid      uid                                 the socket's owner
//	dscp     dscp                                the socket's own marking
//	android  android [+ uid]                     the sockets of the app uids (uid %
//	                                             100000 >= 10000) whose processes are
//	                                             in that state; with uid, that uid only
//	                                             (a system uid only so)
//	process  exe and/or comm [+ uid] [+ cgroup]  the task engine moves matching
//	                                             processes into the lane's cgroup
//
// Precedence when several rules match one packet (docs/policy.md): a
// socket's own lane (`lanes run`, process rules, API registrations of live
// sockets) > tuple > dst (a rule naming the packet's port beats one for any
// port; then the longest prefix) > cgroup (the deepest) > uid > dscp >
// interactive. Two rules with the same match (process rules: the same exe,
// comm, uid and cgroup) are refused: the lane would depend on their order.
package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/lanes-net/lanes/internal/appstate"
	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lane"
)

// MatchKind is which datapath key a rule compiles to.
type MatchKind string

const (
	MatchTuple   MatchKind = "tuple"
	MatchDst     MatchKind = "dst"
	MatchCgroup  MatchKind = "cgroup"
	MatchUID     MatchKind = "uid"
	MatchDSCP    MatchKind = "dscp"
	MatchProcess MatchKind = "process"
	MatchAndroid MatchKind = "android"
)

// Match is a compiled rule: its kind and the fields of that kind.
type Match struct {
	Kind   MatchKind
	Rule   string // the rule's name, or rules[i]
	Lane   lane.Lane
	Dst    netip.Prefix // tuple: a single address; dst: the prefix
	DPort  uint16       // tuple, dst (0 = any)
	SPort  uint16       // tuple
	Src    netip.Addr   // tuple: the local address (zero = any)
	Cgroup string       // cgroup
	UID    uint32       // uid
	DSCP   uint8        // dscp
	// Android: the app state (android); UID then names one uid when
	// HasUID, else every app uid
	Android appstate.State
	HasUID  bool
}

// key identifies what the match looks at, regardless of its lane.
func (m Match) key() string {
	switch m.Kind {
	case MatchTuple, MatchDst:
		return fmt.Sprintf("%s %s %d %d %s", m.Kind, m.Dst, m.DPort, m.SPort, m.Src)
	case MatchCgroup:
		return "cgroup " + strings.TrimRight(m.Cgroup, "/")
	case MatchUID:
		return fmt.Sprintf("uid %d", m.UID)
	case MatchDSCP:
		return fmt.Sprintf("dscp %d", m.DSCP)
	case MatchAndroid:
		if m.HasUID {
			return fmt.Sprintf("android %s uid %d", m.Android, m.UID)
		}
		return fmt.Sprintf("android %s apps", m.Android)
	}
	return "" // process rules: keyed by their rule's fields (processKey)
}

// processKey identifies what a process rule (exe/comm) looks at: two rules
// with the same fields would leave the lane to the task engine's first match.
func (r Rule) processKey() string {
	uid := "any"
	if r.UID != nil {
		uid = fmt.Sprint(uint32(*r.UID))
	}
	return fmt.Sprintf("process exe=%q comm=%q uid=%s cgroup=%q", r.Exe, r.Comm, uid, strings.TrimRight(r.Cgroup, "/"))
}

// compile turns a validated rule into its match; the error names the field
// that cannot be combined.
func (r Rule) compile(name string) (Match, error) {
	m := Match{Rule: name, Lane: r.Lane}
	switch {
	case r.Android != "":
		return r.compileAndroid(m)
	case r.Exe != "" || r.Comm != "":
		if r.Dst != "" || r.DPort != 0 || r.SPort != 0 || r.Src != "" {
			return m, config.Errorf("dst", "a process rule (exe/comm) cannot also match a destination: split it in two rules")
		}
		if r.DSCP != nil {
			return m, config.Errorf("dscp", "a process rule (exe/comm) cannot also match a DSCP marking: split it in two rules")
		}
		m.Kind = MatchProcess
	case r.Dst != "":
		p, err := parseDst(r.Dst)
		if err != nil {
			return m, config.Errorf("dst", "%v", err)
		}
		if f := firstSet(r, "uid", "cgroup", "dscp"); f != "" {
			return m, config.Errorf(f, "the datapath matches a packet by destination or by %s, not both: split it in two rules", f)
		}
		m.Dst, m.DPort, m.SPort = p, r.DPort, r.SPort
		m.Kind = MatchDst
		if r.SPort != 0 {
			if !p.IsSingleIP() || r.DPort == 0 {
				return m, config.Errorf("sport", "a source port needs the full 3-tuple: dst as one address, dport and sport")
			}
			m.Kind = MatchTuple
		}
		if r.Src != "" {
			if m.Kind != MatchTuple {
				return m, config.Errorf("src", "a local address needs the full tuple: dst as one address, dport and sport")
			}
			a, err := netip.ParseAddr(r.Src)
			if err != nil || a.Zone() != "" {
				return m, config.Errorf("src", "%q is not an address", r.Src)
			}
			if a = a.Unmap(); a.Is4() != p.Addr().Is4() {
				return m, config.Errorf("src", "local address %s and destination %s are of different families", a, p.Addr())
			}
			m.Src = a
		}
	case r.Src != "":
		return m, config.Errorf("src", "a local address needs the full tuple: dst as one address, dport and sport")
	case r.DPort != 0 || r.SPort != 0:
		return m, config.Errorf("dst", "a port rule needs dst (an address, or a prefix such as 0.0.0.0/0)")
	case r.Cgroup != "":
		if f := firstSet(r, "uid", "dscp"); f != "" {
			return m, config.Errorf(f, "the datapath matches a socket by its cgroup or by its %s, not both (exe/comm rules can add uid and cgroup)", f)
		}
		m.Kind, m.Cgroup = MatchCgroup, r.Cgroup
	case r.UID != nil:
		if r.DSCP != nil {
			return m, config.Errorf("dscp", "the datapath matches a socket by its uid or by its DSCP marking, not both: split it in two rules")
		}
		m.Kind, m.UID = MatchUID, uint32(*r.UID)
	case r.DSCP != nil:
		m.Kind, m.DSCP = MatchDSCP, *r.DSCP
	default:
		return m, config.Errorf("", "matches nothing: give at least one of exe, comm, uid, cgroup, dst, dport, sport, dscp, android")
	}
	return m, nil
}

// compileAndroid: an app state, alone or with one uid.
func (r Rule) compileAndroid(m Match) (Match, error) {
	st, err := appstate.ParseState(r.Android)
	if err != nil {
		return m, config.Errorf("android", "%v", err)
	}
	others := []struct {
		field string
		set   bool
	}{{"exe", r.Exe != ""}, {"comm", r.Comm != ""}, {"cgroup", r.Cgroup != ""}, {"dst", r.Dst != ""},
		{"dport", r.DPort != 0}, {"sport", r.SPort != 0}, {"src", r.Src != ""}, {"dscp", r.DSCP != nil}}
	for _, o := range others {
		if o.set {
			return m, config.Errorf(o.field, "an android rule matches an app's sockets by its state and uid only: split it in two rules")
		}
	}
	m.Kind, m.Android = MatchAndroid, st
	if r.UID != nil {
		m.UID, m.HasUID = uint32(*r.UID), true
	}
	return m, nil
}

// parseDst reads an address or a prefix; IPv4-mapped IPv6 becomes IPv4.
func parseDst(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not an address or prefix (e.g. 192.0.2.10, 10.0.0.0/8, 2001:db8::/32)", s)
		}
		if p != p.Masked() {
			return netip.Prefix{}, fmt.Errorf("%q has host bits set: did you mean %s?", s, p.Masked())
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q is not an address or prefix (e.g. 192.0.2.10, 10.0.0.0/8, 2001:db8::/32)", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// firstSet names the first of fields that the rule sets.
func firstSet(r Rule, fields ...string) string {
	for _, f := range fields {
		switch {
		case f == "uid" && r.UID != nil, f == "cgroup" && r.Cgroup != "", f == "dscp" && r.DSCP != nil:
			return f
		}
	}
	return ""
}

// compileRules fills p.Matches, refusing duplicates.
func (p *Policy) compileRules(valid []bool) error {
	p.Matches = nil
	seen := map[string]int{}
	var errs []error
	for i, r := range p.Rules {
		if !valid[i] {
			continue // its fields' errors are reported already
		}
		f := fmt.Sprintf("rules[%d]", i)
		m, err := r.compile(ruleName(r, i))
		if err != nil {
			errs = append(errs, config.Prefix(f, err))
			continue
		}
		k := m.key()
		if m.Kind == MatchProcess {
			k = r.processKey()
		}
		if k != "" {
			if j, dup := seen[k]; dup {
				errs = append(errs, config.Errorf(f, "matches the same %s as rules[%d]: which lane wins would depend on their order", m.Kind, j))
				continue
			}
			seen[k] = i
		}
		p.Matches = append(p.Matches, m)
	}
	return errors.Join(errs...)
}

func ruleName(r Rule, i int) string {
	if r.Name != "" {
		return r.Name
	}
	return fmt.Sprintf("rules[%d]", i)
}

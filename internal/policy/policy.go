// Package policy is the lanes policy file: which interfaces lanes manages and
// how, which traffic and tasks go in which lane, and who may change lanes.
//
// The file is YAML. Load reads and validates it; every error names the file,
// line, field and reason. An embedded default (default.yaml) is used when no
// file is given. Sections that belong to one concept (cooperative control,
// realtime lane, task rules) are defined in that concept's package and
// embedded here, so each package owns its settings and their validation.
package policy

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/lanes-net/lanes/internal/config"
	"github.com/lanes-net/lanes/internal/lane"
	"github.com/lanes-net/lanes/internal/rootpath"
)

//go:embed default.yaml
var defaultYAML []byte

// DefaultRouteInterface names "whatever interface the default route uses".
const DefaultRouteInterface = "default-route"

// Mode of an interface's egress tree.
type Mode string

const (
	// DeviceBottleneck: no rate known; classes never rate-limit and the device
	// queue is kept short so the queue forms in the qdisc, where priority applies.
	DeviceBottleneck Mode = "device-bottleneck"
	// Shaped: the uplink rate is known; the root shapes just below it so the
	// queue moves onto the host (as SQM does).
	Shaped Mode = "shaped"
)

// Interface is one managed interface.
type Interface struct {
	Name            string       `yaml:"name"`             // interface name or "default-route"
	Mode            Mode         `yaml:"mode"`             // device-bottleneck (default) or shaped
	Uplink          config.Rate  `yaml:"uplink"`           // shaped: the uplink rate
	BackgroundFloor config.Rate  `yaml:"background_floor"` // shaped: guaranteed background rate; 0 = strict
	DeviceQueue     config.Bytes `yaml:"device_queue"`     // BQL limit target; 0 = one MTU
}

// Rule puts traffic in a lane. All given match fields must hold; match.go
// says which combinations the datapath can apply (the rest are refused).
type Rule struct {
	Name   string      `yaml:"name"`
	Lane   lane.Lane   `yaml:"lane"`
	Exe    string      `yaml:"exe"`    // executable path (absolute) or base name
	Comm   string      `yaml:"comm"`   // process name (/proc/PID/comm)
	UID    *config.UID `yaml:"uid"`    // owner of the socket or process: a user name or uid
	Cgroup string      `yaml:"cgroup"` // cgroup v2 path, relative to the v2 mount
	Dst    string      `yaml:"dst"`    // destination address or prefix (10.0.0.0/8, 2001:db8::/32)
	DPort  uint16      `yaml:"dport"`  // destination port (none: any)
	SPort  uint16      `yaml:"sport"`  // source port
	Src    string      `yaml:"src"`    // local (source) address, with the full tuple only (none: any)
	DSCP   *uint8      `yaml:"dscp"`   // DSCP the socket marks its packets with
	// Android: an app state (top-app, foreground, background) from
	// Android's process groups: the sockets of the uids in that state
	Android string `yaml:"android"`
}

// Access says who, besides root, may change lanes.
type Access struct {
	// Group: members may change any process's or flow's lane (except realtime,
	// which needs a realtime grant). Anyone may demote their own to background.
	Group string `yaml:"group"`
}

// validate refuses a group name that is malformed or unknown here, as
// realtime.grants refuses an unknown group: members of a missing group are
// nobody, so the line would grant nothing.
func (a Access) validate() error {
	g := a.Group
	if g == "" {
		return nil
	}
	if !validName(g) {
		return config.Errorf("access.group", "%q is not a valid group name", g)
	}
	if _, err := user.LookupGroup(g); err != nil {
		return config.Errorf("access.group", "no group %q on this machine (a group name from /etc/group; create it: addgroup --system %s)", g, g)
	}
	return nil
}

// DSCPPolicy says how a socket's own DSCP marking selects a lane.
type DSCPPolicy struct {
	LowerEffortBackground *bool `yaml:"le_background"` // LE (1) -> background; default true
	ExpeditedRealtime     bool  `yaml:"ef_realtime"`   // EF (46) -> realtime; default false
}

// Policy is a whole policy file.
type Policy struct {
	Interfaces []Interface `yaml:"interfaces"`
	Rules      []Rule      `yaml:"rules"`
	Access     Access      `yaml:"access"`
	DSCP       DSCPPolicy  `yaml:"dscp"`

	// Task rules (`tasks:`) and their safety limits (`task_safety:`).
	config.TaskSections `yaml:",inline"`
	// Cooperative congestion-window control among hosts on one AP.
	Coop config.Coop `yaml:"coop"`
	// The realtime lane: per-packet deadlines, EDF, admission control.
	Realtime config.Realtime `yaml:"realtime"`
	// The background lane at a remote bottleneck: LEDBAT++ and its target.
	Background config.Background `yaml:"background"`

	// Source is the file the policy came from ("(default)" for the embedded one).
	Source string `yaml:"-"`
	// Matches are the rules compiled by Validate, in rule order.
	Matches []Match `yaml:"-"`

	dec *decoder // line numbers, for errors found after parsing (ErrorAt)
}

// Error is a policy that cannot be used: where and why.
type Error struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *Error) Error() string {
	msg := e.Msg
	if len(msg) > maxErrorMsg { // a value quoted whole (a 100 MB scalar)
		msg = msg[:maxErrorMsg] + fmt.Sprintf("... (%d bytes more)", len(msg)-maxErrorMsg)
	}
	return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Field, msg)
}

// maxErrorMsg bounds the message of one error.
const maxErrorMsg = 512

// MaxSize bounds a policy file: the largest policy the datapath can hold
// (16,384 rules of ~60 bytes) is under it, and the read stays small.
const MaxSize = 1 << 20

// ErrorAt is an error about field found after parsing (e.g. by the daemon
// checking the machine), with the field's line: file:line: field: msg.
func (p *Policy) ErrorAt(field, format string, args ...any) error {
	line := 0
	if p.dec != nil {
		line = p.dec.lineOf(field)
	}
	return &Error{File: p.Source, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Has reports whether the policy text sets the field (a dotted path such
// as "coop" or "rules[0].uid"), rather than leaving it at its default.
func (p *Policy) Has(field string) bool {
	if p.dec == nil {
		return false
	}
	_, ok := p.dec.lines[field]
	return ok
}

// Default returns the embedded default policy.
func Default() *Policy {
	p, err := Parse("(default)", defaultYAML)
	if err != nil {
		panic("lanes: embedded default policy is invalid: " + err.Error())
	}
	return p
}

// DefaultYAML returns the text of the embedded default policy.
func DefaultYAML() []byte { return append([]byte(nil), defaultYAML...) }

// DefaultYAMLWithout returns the default policy's text without the named
// top-level section (its key line and the indented or comment lines after
// it), so that a caller can append its own version of that section.
func DefaultYAMLWithout(section string) []byte {
	var out []string
	skipping := false
	for _, line := range strings.SplitAfter(string(defaultYAML), "\n") {
		top := line != "" && line[0] != ' ' && line[0] != '#' && line != "\n"
		if top {
			skipping = strings.HasPrefix(line, section+":")
		}
		if !skipping {
			out = append(out, line)
		}
	}
	return []byte(strings.Join(out, ""))
}

// Load reads, parses and validates a policy file. With requireRootOwned, the
// file and its directory must be owned by root and not writable by others
// (task rules can raise processes to real-time priority).
func Load(path string, requireRootOwned bool) (*Policy, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, missingFile(path)
	}
	if requireRootOwned {
		if err := checkRootOwned(path); err != nil {
			return nil, err
		}
	}
	data, err := readBounded(path, MaxSize)
	if err != nil {
		return nil, fmt.Errorf("read policy: %w", err)
	}
	p, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	if p.Coop.Key != "" {
		if err := config.SecretMode(path); err != nil {
			return nil, fmt.Errorf("policy: %w, or move the key to a key_file of mode 0600", err)
		}
	}
	return p, nil
}

// ExamplesDir is where the package installs example policies.
const ExamplesDir = "/usr/share/doc/lanes/examples"

// missingFile says that a policy file is not there and how to make one.
func missingFile(path string) error {
	return fmt.Errorf("policy file %s does not exist: start one from the default "+
		"(lanes daemon --print-default-policy > %s) or from an example in %s/, "+
		"or run without --policy to use the default", path, path, ExamplesDir)
}

// MissingExecutables reports each rule and task rule whose exe is an
// absolute path (no pattern) that does not exist on this machine, as a
// warning: such a rule is valid and matches once the program is
// installed, but a typo (/usr/bin/resticc) would otherwise pass silently.
func (p *Policy) MissingExecutables() error {
	var errs []error
	check := func(field, exe string) {
		if !filepath.IsAbs(exe) || strings.ContainsAny(exe, "*?[") {
			return
		}
		if _, err := os.Stat(exe); errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, p.ErrorAt(field, "%s does not exist here (the rule matches once it does)", exe))
		}
	}
	for i, r := range p.Rules {
		check(fmt.Sprintf("rules[%d].exe", i), r.Exe)
	}
	for i, r := range p.Tasks {
		check(fmt.Sprintf("tasks[%d].exe", i), r.Exe)
	}
	return errors.Join(errs...)
}

// readBounded reads at most max bytes of path; a larger file is an error.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(data)) > max {
		err = fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	return data, err
}

// Parse parses and validates policy text; file names the source in errors.
// A syntax error stops the reading; otherwise every error of the file is
// returned at once (Errors, in line order).
func Parse(file string, data []byte) (*Policy, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, syntaxError(file, data, err)
	}
	p := &Policy{Coop: config.DefaultCoop(), Realtime: config.DefaultRealtime(), Background: config.DefaultBackground()}
	d := &decoder{lines: map[string]int{}}
	if len(root.Content) > 0 {
		if err := d.decode(&root, reflect.ValueOf(p).Elem(), ""); err != nil {
			d.note(err)
		}
	}
	p.Source, p.dec = file, d
	p.applyDefaults()
	var errs []*Error
	for _, de := range d.errs {
		errs = append(errs, &Error{File: file, Line: de.Line, Field: de.Field, Msg: de.Msg})
	}
	for _, err := range config.Each(p.Validate()) {
		var fe *config.FieldError
		if !errors.As(err, &fe) {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if !causedBy(fe.Field, d.errs) {
			errs = append(errs, &Error{File: file, Line: d.lineOf(fe.Field), Field: fe.Field, Msg: fe.Err.Error()})
		}
	}
	if len(errs) > 0 {
		return nil, joinErrors(errs)
	}
	return p, nil
}

// causedBy reports whether a validation error of field may only follow
// from a field that could not be decoded (left at its default): the same
// field, one inside it, or the item that holds it.
func causedBy(field string, decoded []*decodeError) bool {
	for _, de := range decoded {
		if within(field, de.Field) || within(de.Field, field) {
			return true
		}
	}
	return false
}

// within reports whether path is parent or lies inside it.
func within(path, parent string) bool {
	if !strings.HasPrefix(path, parent) {
		return false
	}
	rest := path[len(parent):]
	return rest == "" || rest[0] == '.' || rest[0] == '['
}

// Errors are all the errors of one policy file, in line order.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	if len(es) == 1 {
		return lines[0]
	}
	return fmt.Sprintf("%d errors in the policy:\n%s", len(es), strings.Join(lines, "\n"))
}

// Unwrap gives the single errors (errors.As finds the first *Error).
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// joinErrors orders a policy's errors by line (a stable sort keeps the
// order of one line's errors) and drops repeats.
func joinErrors(errs []*Error) error {
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Line < errs[j].Line })
	var out Errors
	seen := map[string]bool{}
	for _, e := range errs {
		if s := e.Error(); !seen[s] {
			seen[s] = true
			out = append(out, e)
		}
	}
	return out
}

// syntaxError is a YAML syntax error at the line that holds it. yaml.v3
// reports a parser error at the start of the enclosing block (its context
// mark: the "rules:" line for a bad key ten rules further), so the line is
// found again here: the first line whose addition makes the text fail with
// the same message (a binary search over prefixes of whole lines).
func syntaxError(file string, data []byte, err error) error {
	line, msg := splitYAMLError(err)
	if l := failingLine(data, msg); l > 0 {
		line = l
	}
	return &Error{File: file, Line: line, Field: "(syntax)", Msg: msg}
}

// splitYAMLError splits "yaml: line N: msg" into N and msg.
func splitYAMLError(err error) (int, string) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if _, e := fmt.Sscanf(msg, "line %d:", &line); e == nil {
		msg = strings.TrimSpace(msg[strings.Index(msg, ":")+1:])
	}
	return line, msg
}

// failingLine is the 1-based line k such that the first k lines of data
// fail to parse with msg and the first k-1 do not; 0 if none is found.
func failingLine(data []byte, msg string) int {
	lines := strings.SplitAfter(string(data), "\n")
	fails := func(k int) bool {
		var n yaml.Node
		err := yaml.Unmarshal([]byte(strings.Join(lines[:k], "")), &n)
		if err == nil {
			return false
		}
		_, m := splitYAMLError(err)
		return m == msg
	}
	lo, hi := 0, len(lines) // the first lo lines parse (or fail otherwise); the first hi fail with msg
	if !fails(hi) {
		return 0
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

func (p *Policy) applyDefaults() {
	if len(p.Interfaces) == 0 {
		p.Interfaces = []Interface{{Name: DefaultRouteInterface}}
	}
	for i := range p.Interfaces {
		if p.Interfaces[i].Mode == "" {
			p.Interfaces[i].Mode = DeviceBottleneck
		}
	}
	if p.DSCP.LowerEffortBackground == nil {
		t := true
		p.DSCP.LowerEffortBackground = &t
	}
}

// Validate checks the whole policy; each error is a *config.FieldError, all
// of them joined (config.Each parts them).
func (p *Policy) Validate() error {
	var errs []error
	add := func(err error) { errs = append(errs, config.Each(err)...) }
	seenIf := map[string]bool{}
	for i, it := range p.Interfaces {
		f := fmt.Sprintf("interfaces[%d]", i)
		add(config.Prefix(f, it.validate()))
		if seenIf[it.Name] {
			add(config.Errorf(f+".name", "interface %q listed twice", it.Name))
		}
		seenIf[it.Name] = true
	}
	names := map[string]bool{}
	ruleOK := make([]bool, len(p.Rules))
	for i, r := range p.Rules {
		f := fmt.Sprintf("rules[%d]", i)
		err := r.validate()
		add(config.Prefix(f, err))
		ruleOK[i] = err == nil
		if r.Name != "" {
			if names[r.Name] {
				add(config.Errorf(f+".name", "rule name %q used twice", r.Name))
			}
			names[r.Name] = true
		}
	}
	add(p.compileRules(ruleOK))
	add(p.Access.validate())
	add(p.TaskSections.Validate())
	if p.Coop.Enabled {
		add(config.Prefix("coop", p.Coop.Validate()))
	}
	if p.Realtime.Enabled {
		add(config.Prefix("realtime", p.Realtime.Validate()))
	}
	add(config.Prefix("background", p.Background.Validate()))
	return errors.Join(errs...)
}

func (it Interface) validate() error {
	if it.Name == "" {
		return config.Errorf("name", "missing (an interface name, or %q)", DefaultRouteInterface)
	}
	if it.Name != DefaultRouteInterface && (len(it.Name) > 15 || strings.ContainsAny(it.Name, "/ \t")) {
		return config.Errorf("name", "%q is not a valid interface name", it.Name)
	}
	switch it.Mode {
	case DeviceBottleneck:
		if it.Uplink != 0 || it.BackgroundFloor != 0 {
			return config.Errorf("mode", "uplink and background_floor need mode: shaped")
		}
	case Shaped:
		if it.Uplink == 0 {
			return config.Errorf("uplink", "mode shaped needs an uplink rate (e.g. uplink: 10mbit)")
		}
		if it.Uplink < 100_000 {
			return config.Errorf("uplink", "%v is below the 100kbit minimum", it.Uplink)
		}
		if it.BackgroundFloor >= it.Uplink {
			return config.Errorf("background_floor", "%v must be below the uplink %v", it.BackgroundFloor, it.Uplink)
		}
	default:
		return config.Errorf("mode", "unknown mode %q (want %s or %s)", it.Mode, DeviceBottleneck, Shaped)
	}
	if it.DeviceQueue != 0 && (it.DeviceQueue < 64 || it.DeviceQueue > 1<<20) {
		return config.Errorf("device_queue", "%v out of range (64B to 1MiB)", it.DeviceQueue)
	}
	return nil
}

func (r Rule) validate() error {
	if r.Lane == lane.Unset {
		return config.Errorf("lane", "missing (realtime, interactive or background)")
	}
	if r.Name != "" && !validName(r.Name) {
		return config.Errorf("name", "%q: use letters, digits, '-', '_' and '.' only (at most 32)", r.Name)
	}
	if r.Comm != "" && len(r.Comm) > 15 {
		return config.Errorf("comm", "%q is longer than the kernel's 15-byte comm", r.Comm)
	}
	if r.Cgroup != "" && (strings.Contains(r.Cgroup, "..") || !strings.HasPrefix(r.Cgroup, "/")) {
		return config.Errorf("cgroup", "%q must be an absolute path inside the cgroup v2 tree, without '..'", r.Cgroup)
	}
	if r.DSCP != nil && *r.DSCP > 63 {
		return config.Errorf("dscp", "%d out of range 0-63", *r.DSCP)
	}
	return nil
}

// ProcessLaneRules turns the lane rules that match processes by executable or
// name into task rules whose only action is the lane, so the task engine
// moves matching processes into the lane's cgroup as they start. They come
// after the policy's own task rules.
func (p *Policy) ProcessLaneRules() []config.TaskRule {
	var out []config.TaskRule
	for i, r := range p.Rules {
		if r.Exe == "" && r.Comm == "" {
			continue
		}
		name := r.Name
		if name == "" {
			name = fmt.Sprintf("rule%d", i)
		}
		out = append(out, config.TaskRule{Name: "lane." + name, Exe: r.Exe, Comm: r.Comm, UID: r.UID, Cgroup: r.Cgroup, Lane: r.Lane})
	}
	return out
}

func validName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// checkRootOwned refuses a policy file that a non-root user could have
// written: the file and every directory above it root's and not writable by
// group or others (package rootpath, the task engine's rule too).
func checkRootOwned(path string) error {
	if err := rootpath.Check(path); err != nil {
		return fmt.Errorf("policy: %w (task rules can grant real-time priority)", err)
	}
	return nil
}

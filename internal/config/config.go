// Package config holds the lanes policy file's sections and the value types
// they share (rates, byte sizes, durations), and FieldError, the error a
// section's Validate returns so that the policy loader can point at the
// file, line and field that is wrong.
//
// Each section is one file (coop.go, realtime.go, tasks.go, background.go):
// its type, defaults and validation. The policy package owns them through
// this package and imports no runtime package; the runtime packages
// (internal/coop, internal/rtlane, internal/sched, internal/ledbat) take
// their section from here.
package config

import (
	"errors"
	"fmt"
	"math"
	"os/user"
	"strconv"
	"strings"
	"time"
)

// FieldError says which field of a section is wrong and why. Field is a dotted
// path relative to the section ("port", "caps[2].segments").
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// Errorf builds a FieldError.
func Errorf(field, format string, a ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf(format, a...)}
}

// Each returns the errors err holds: the parts of an errors.Join (nested
// joins flattened), or err alone; none for nil. A section's Validate may
// return several field errors joined, so that a policy shows all at once.
func Each(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, Each(e)...)
	}
	return out
}

// Prefix puts a parent path in front of a FieldError's field (or wraps a
// plain error as a FieldError of that parent), for nested sections; each
// error of a joined one is prefixed.
func Prefix(parent string, err error) error {
	if parts := Each(err); len(parts) != 1 {
		var out []error
		for _, e := range parts {
			out = append(out, Prefix(parent, e))
		}
		return errors.Join(out...)
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		f := fe.Field
		switch {
		case f == "":
			f = parent
		case strings.HasPrefix(f, "["):
			f = parent + f
		default:
			f = parent + "." + f
		}
		return &FieldError{Field: f, Err: fe.Err}
	}
	return &FieldError{Field: parent, Err: err}
}

// Rate is a data rate in bits per second. Text form as tc(8) writes bit
// rates: "10mbit", "1.5Mbit", "500kbit", "1gbit", "1tbit", IEC "8mibit", or a
// plain number of bit/s. tc reads "bps", "kbps", "mbps" as *bytes* per
// second while people usually mean bits: those, and bare "k"/"m"/"g", are
// refused as ambiguous.
type Rate uint64

// Bits returns the rate in bit/s.
func (r Rate) Bits() uint64 { return uint64(r) }

func (r Rate) String() string {
	v := float64(r)
	switch {
	case r == 0:
		return "0"
	case v >= 1e9 && math.Mod(v, 1e7) == 0:
		return trimFloat(v/1e9) + "gbit"
	case v >= 1e6 && math.Mod(v, 1e4) == 0:
		return trimFloat(v/1e6) + "mbit"
	case v >= 1e3 && math.Mod(v, 10) == 0:
		return trimFloat(v/1e3) + "kbit"
	}
	return strconv.FormatUint(uint64(r), 10) + "bit"
}

// ParseRate parses the text form of a Rate.
func ParseRate(s string) (Rate, error) {
	num, unit := splitNumber(s)
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("bad rate %q (want e.g. 10mbit, 500kbit)", s)
	}
	u := strings.ToLower(unit)
	mult := map[string]float64{"": 1, "bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
		"kibit": 1 << 10, "mibit": 1 << 20, "gibit": 1 << 30, "tibit": 1 << 40}[u]
	if mult == 0 {
		if strings.HasSuffix(u, "bps") || u == "k" || u == "m" || u == "g" {
			return 0, fmt.Errorf("ambiguous rate unit %q in %q: tc reads %q as bytes per second, many read it as bits; write bits as tc does (e.g. %s)",
				unit, s, u, num+"mbit")
		}
		return 0, fmt.Errorf("bad rate unit %q in %q (want bit, kbit, mbit, gbit or tbit, as tc)", unit, s)
	}
	return Rate(math.Round(v * mult)), nil
}

func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }
func (r *Rate) UnmarshalText(b []byte) error {
	v, err := ParseRate(string(b))
	*r = v
	return err
}

// Bytes is a size in bytes. Text form: "1500", "1500B", "8KB" or "8k" (1,000),
// "8KiB" (1,024), "1MB", "2MiB".
type Bytes uint64

func (b Bytes) String() string {
	switch {
	case b >= 1<<20 && b%(1<<20) == 0:
		return strconv.FormatUint(uint64(b>>20), 10) + "MiB"
	case b >= 1<<10 && b%(1<<10) == 0:
		return strconv.FormatUint(uint64(b>>10), 10) + "KiB"
	case b >= 1000 && b%1000 == 0:
		return strconv.FormatUint(uint64(b/1000), 10) + "KB"
	}
	return strconv.FormatUint(uint64(b), 10) + "B"
}

// ParseBytes parses the text form of Bytes.
func ParseBytes(s string) (Bytes, error) {
	num, unit := splitNumber(s)
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("bad size %q (want e.g. 1500B, 8KB, 64KiB)", s)
	}
	mult := map[string]float64{"": 1, "b": 1, "k": 1e3, "kb": 1e3, "kib": 1024, "m": 1e6, "mb": 1e6,
		"mib": 1 << 20, "g": 1e9, "gb": 1e9, "gib": 1 << 30}[strings.ToLower(unit)]
	if mult == 0 {
		return 0, fmt.Errorf("bad size unit %q in %q (want B, KB, KiB, MB or MiB)", unit, s)
	}
	return Bytes(math.Round(v * mult)), nil
}

func (b Bytes) MarshalText() ([]byte, error) { return []byte(b.String()), nil }
func (b *Bytes) UnmarshalText(t []byte) error {
	v, err := ParseBytes(string(t))
	*b = v
	return err
}

// Duration is a time.Duration written as Go durations are ("500ms", "10s").
type Duration time.Duration

func (d Duration) D() time.Duration { return time.Duration(d) }
func (d Duration) String() string   { return time.Duration(d).String() }
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(time.Duration(d).String()), nil
}
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("bad duration %q (want e.g. 500ms, 10s)", string(b))
	}
	*d = Duration(v)
	return nil
}

func splitNumber(s string) (num, unit string) {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	return s[:i], strings.TrimSpace(s[i:])
}

func trimFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// UID is a user id, written as a number or as a user name. A name is
// resolved (os/user: /etc/passwd, or NSS where built with cgo) when the
// policy is read, so a policy names people as its admin knows them; an
// unknown name is an error at its line.
type UID uint32

func (u *UID) UnmarshalText(b []byte) error {
	v, err := lookupID(string(b), "user", func(name string) (string, error) {
		usr, err := user.Lookup(name)
		if err != nil {
			return "", err
		}
		return usr.Uid, nil
	})
	*u = UID(v)
	return err
}

// GID is a group id, written as a number or as a group name (as UID).
type GID uint32

func (g *GID) UnmarshalText(b []byte) error {
	v, err := lookupID(string(b), "group", func(name string) (string, error) {
		grp, err := user.LookupGroup(name)
		if err != nil {
			return "", err
		}
		return grp.Gid, nil
	})
	*g = GID(v)
	return err
}

// lookupID parses a numeric id or resolves a name through lookup.
func lookupID(s, what string, lookup func(string) (string, error)) (uint32, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty %s (a %s name or number)", what, what)
	}
	if s[0] >= '0' && s[0] <= '9' || s[0] == '-' || s[0] == '+' {
		v, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("%q is not a valid non-negative integer (a %s id up to 4294967295, or a %s name)", s, what, what)
		}
		return uint32(v), nil
	}
	id, err := lookup(s)
	if err != nil {
		return 0, fmt.Errorf("no %s %q on this machine (a %s name from /etc/%s, or a number)", what, s, what, map[string]string{"user": "passwd", "group": "group"}[what])
	}
	v, err := strconv.ParseUint(id, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s %q has id %q, not a number", what, s, id)
	}
	return uint32(v), nil
}

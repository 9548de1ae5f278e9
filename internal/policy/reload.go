// reload.go: how a running daemon takes each key of a changed policy. A
// reload (SIGHUP) applies every key it can and refuses, whole, a policy
// that changes a key it cannot, naming the key and its line; the running
// policy stays. `lanes daemon --check` gives the same answer against the
// daemon running on its socket.
//
//   - applied: interfaces (trees rebuilt, the new ones first), rules and
//     dscp (the maps diffed; open sockets follow), access (read at each
//     request), tasks and task_safety (the task engine restarted), coop
//     and realtime (their components restarted);
//   - restart: the background section's keys, which the host datapath is
//     loaded with (sock_ops' configuration and LEDBAT++'s target are
//     constants of the loaded programs).
package policy

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// ReloadClass is how a running daemon takes a changed key.
type ReloadClass int

const (
	ReloadUnknown ReloadClass = iota
	ReloadApplied             // the reload applies it
	ReloadRestart             // only a restart applies it: the reload is refused
)

func (c ReloadClass) String() string {
	return [...]string{"unknown", "applied", "restart"}[c]
}

// reloadClasses by key path (dotted, list items as []): the longest
// prefix of a key's path decides.
var reloadClasses = map[string]ReloadClass{
	"interfaces":  ReloadApplied,
	"rules":       ReloadApplied,
	"access":      ReloadApplied,
	"dscp":        ReloadApplied,
	"tasks":       ReloadApplied,
	"task_safety": ReloadApplied,
	"coop":        ReloadApplied,
	"realtime":    ReloadApplied,

	"background":                    ReloadRestart,
	"background.congestion_control": ReloadRestart,
	"background.target_delay":       ReloadRestart,
	"background.receive_window":     ReloadRestart,
	"background.yield":              ReloadRestart,
}

// ReloadClassOf is the class of a key path ("coop.rate", "rules[].lane").
func ReloadClassOf(path string) ReloadClass {
	for p := path; p != ""; {
		if c, ok := reloadClasses[p]; ok {
			return c
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return ReloadUnknown
}

// RestartValues are the values of the keys only a restart applies, by
// path, as text (what a running daemon reports in status).
func RestartValues(p *Policy) map[string]string {
	out := map[string]string{}
	for path, c := range reloadClasses {
		if c != ReloadRestart || !strings.Contains(path, ".") {
			continue // a section: its keys are compared one by one
		}
		if v, ok := valueAt(reflect.ValueOf(p).Elem(), strings.Split(path, ".")); ok {
			out[path] = fmt.Sprint(v.Interface())
		}
	}
	return out
}

// RestartChanges refuses next where it changes a key that only a restart
// applies, against the running values (RestartValues of the running
// policy): one error per key, with its name and line in next.
func RestartChanges(running map[string]string, next *Policy) error {
	want := RestartValues(next)
	var keys []string
	for k, v := range want {
		if r, ok := running[k]; ok && r != v {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		errs = append(errs, next.ErrorAt(k, "changed from %s to %s: the running daemon applies it only at a restart (systemctl restart lanes); nothing of this policy was applied", running[k], want[k]))
	}
	return errors.Join(errs...)
}

// valueAt follows yaml keys from v (inline structs flattened).
func valueAt(v reflect.Value, keys []string) (reflect.Value, bool) {
	if len(keys) == 0 {
		return v, true
	}
	if v.Kind() != reflect.Struct {
		return v, false
	}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if strings.Contains(opts, "inline") {
			if r, ok := valueAt(v.Field(i), keys); ok {
				return r, true
			}
			continue
		}
		if name == keys[0] && f.IsExported() {
			return valueAt(v.Field(i), keys[1:])
		}
	}
	return v, false
}

// Package sched is lanes' task policy engine: rules in the policy file pick
// processes (by executable, comm, command line, uid, cgroup or parent) and
// give them a CPU treatment — SCHED_FIFO/RR with a priority, nice, SCHED_IDLE,
// CPU affinity, cgroup cpu weight/idle — and a network lane, as soon as they
// start (docs/papers.md §004: "made automatic by a background process that watches
// for the target application's start").
//
//   - sched.go    this header; the rules themselves are internal/config's
//     TaskRule, TaskSafety (`tasks:`, `task_safety:`)
//   - proc.go     what we know of a process, read from /proc
//   - match.go    compiled rules and matching
//   - apply.go    sched_setattr, affinity, RLIMIT_RTTIME, cgroups, lane hook
//   - connector.go netlink proc connector (exec, fork, comm events)
//   - engine.go   Engine: initial /proc scan, event loop (or polling), revert
//   - watchdog.go demotes promoted tasks when normal tasks starve
//   - kernel.go   preemption model, HZ, RT throttling for `lanes doctor`
//
// Safety follows rtkit: a ceiling on RT priority, RLIMIT_RTTIME on promoted
// processes, SCHED_RESET_ON_FORK unless a rule opts out, and a watchdog.
package sched

import "github.com/lanes-net/lanes/internal/rootpath"

// CheckPolicyPath refuses a policy file that a non-root user could have
// written: the file and every directory above it must be owned by root and
// not writable by group or others (a rule can grant real-time priority).
// The rule is package rootpath's, shared with the daemon's policy check.
func CheckPolicyPath(path string) error { return rootpath.Check(path) }

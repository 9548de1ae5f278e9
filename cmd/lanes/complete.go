// complete.go: shell completion of flag values that are few and known —
// lane names (`lanes run --lane <TAB>`), log levels, protocols, sampling
// backends, capabilities to leave off, interfaces and network namespaces —
// and files where a flag takes one. Cobra's `lanes completion SHELL`
// scripts ask the binary (`lanes __complete ...`), so this is all there
// is to it; flags are matched by name, so a new command's --lane
// completes without more.
package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lanes-net/lanes/internal/daemon"
	"github.com/lanes-net/lanes/internal/lane"
)

// laneHelp: the lane names with what each is for, as completion shows them.
var laneHelp = map[lane.Lane]string{
	lane.Realtime:    "served first (root or access.group)",
	lane.Interactive: "the default",
	lane.Background:  "yields to the other lanes",
}

// flagValues completes a flag by its name, with "value\tdescription" lines;
// a nil function leaves the flag to the shell's file completion.
func flagValues(cmdPath, flag string) cobra.CompletionFunc {
	fixed := func(vals ...string) cobra.CompletionFunc {
		return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return vals, cobra.ShellCompDirectiveNoFileComp
		}
	}
	switch flag {
	case "lane":
		var out []string
		for _, l := range lane.All {
			out = append(out, l.String()+"\t"+laneHelp[l])
		}
		if cmdPath == "lanes monitor" { // a comma-separated list there
			return listOf(out)
		}
		return fixed(out...)
	case "log-level":
		return fixed("debug", "info", "warn", "error")
	case "proto":
		return fixed("tcp", "udp")
	case "backend":
		return fixed("bpf-track", "bpf-iter", "sock_diag")
	case "without":
		return listOf(daemon.WithoutNames())
	case "dev":
		return interfaceNames
	case "netns":
		return netnsPaths
	case "policy":
		if cmdPath == "lanes latency" {
			return fixed("other", "fifo", "rr", "idle", "keep")
		}
		return extensions("yaml", "yml")
	case "socket", "realtime-socket":
		return extensions("sock")
	}
	return nil
}

// listOf completes a comma-separated list: the words before the last comma
// stay, the last one is completed.
func listOf(vals []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		head := toComplete[:strings.LastIndexByte(toComplete, ',')+1]
		var out []string
		for _, v := range vals {
			if name, _, _ := strings.Cut(v, "\t"); !strings.Contains(","+head, ","+name+",") {
				out = append(out, head+v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}

func extensions(ext ...string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return ext, cobra.ShellCompDirectiveFilterFileExt
	}
}

func interfaceNames(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	ifs, _ := net.Interfaces()
	var out []string
	for _, i := range ifs {
		out = append(out, i.Name)
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// netnsPaths offers the named namespaces (ip netns add) as paths, and
// files otherwise (/proc/PID/ns/net).
func netnsPaths(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if toComplete != "" && !strings.HasPrefix("/var/run/netns/", toComplete) && !strings.HasPrefix(toComplete, "/var/run/netns/") {
		return nil, cobra.ShellCompDirectiveDefault
	}
	names, _ := os.ReadDir("/var/run/netns")
	var out []string
	for _, n := range names {
		out = append(out, filepath.Join("/var/run/netns", n.Name()))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// addCompletions registers flagValues on every flag of cmd and below.
func addCompletions(cmd *cobra.Command) {
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if fn := flagValues(cmd.CommandPath(), f.Name); fn != nil {
			_ = cmd.RegisterFlagCompletionFunc(f.Name, fn)
		}
	})
	for _, c := range cmd.Commands() {
		addCompletions(c)
	}
}

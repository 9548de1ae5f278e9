// lberemote_flags.go: lbe-remote's registration and flags (links,
// directions, sizes, methods, transports) and their parsing.
package lbe

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lanes-net/lanes/internal/lab/testbed"
)

func init() {
	testbed.Register(testbed.Experiment{Name: "lbe-remote", Summary: "the background lane where the queue is remote (deep emulator queue, no gate): LEDBAT++, rLEDBAT, yield vs CUBIC and lanes before",
		Setup: func(fs *flag.FlagSet) testbed.RunFunc {
			c := &RemoteConfig{}
			links := fs.String("links", "fixed,TMobile-LTE-short,Verizon-LTE-short,TMobile-UMTS-driving", "links: fixed, variable (steps every 500 ms between 1.5 and 16 Mbit/s) and/or trace pairs (NAME.up, NAME.down)")
			fs.Float64Var(&c.FixedRate, "rate", 10e6, "the fixed link's rate, bit/s")
			fs.DurationVar(&c.Delay, "delay", 20*time.Millisecond, "one-way delay each direction")
			fs.DurationVar(&c.QueueTime, "queue", 500*time.Millisecond, "each link's buffer, as time at its mean rate")
			bgDirs := fs.String("background", "upload,download", "background directions")
			fgDirs := fs.String("dirs", "download,upload", "foreground directions")
			sizes := fs.String("sizes", "10,100,400", "foreground sizes, KB")
			methods := fs.String("methods", "none,cubic,lanes0,ledbat,full", "methods")
			fs.IntVar(&c.Reps, "reps", 3, "repetitions")
			fs.DurationVar(&c.Warmup, "warmup", 10*time.Second, "background alone before the first transfer")
			fs.DurationVar(&c.Slot, "slot", 5*time.Second, "time between foreground transfer starts")
			fs.DurationVar(&c.BulkFor, "bulk-for", 8*time.Second, "interactive bulk flow against the background")
			fs.DurationVar(&c.JainFor, "jain-for", 15*time.Second, "two background flows together")
			fs.StringVar(&c.CC, "cc", "cubic", "congestion control of every host")
			fs.Int64Var(&c.Seed, "seed", 1, "seed for the order of methods and transfers")
			fs.StringVar(&c.Lanes, "lanes", "", "lanes binary (default: this executable)")
			fs.StringVar(&c.MonitorDir, "monitor", "", "record each testbed's TCP flows (lanes monitor CSV) into this directory")
			fs.DurationVar(&c.SteadyFor, "steady-for", 10*time.Second, "last step: the background beside a steady foreground stream (0: no such step)")
			fs.Float64Var(&c.SteadyShare, "steady-share", 0.4, "the steady foreground's pace, a share of the link's mean rate")
			fs.StringVar(&c.SteadyOf, "steady-of", SteadyOfStep, "on a trace, the steady foreground's pace is --steady-share of: step (the link's capacity over the step) or mean (the whole trace's mean rate)")
			steadyFG := fs.String("steady-fg", SteadyTCP, "the steady foreground's kinds, each a step of its own in this order: tcp (a TCP stream paced by the kernel), udp (a constant-rate UDP stream), apppaced (TCP paced by the application, 1 ms bursts), video (2 s segments fetched as fast as the path allows), pageload (12 short GETs of 20-200 KB every 3 s), opposite (unpaced bulk in the other direction)")
			fs.DurationVar(&c.Target, "target", 0, "LEDBAT++/rLEDBAT target delay for the lanes methods (0: the policy default)")
			transports := fs.String("bg-transports", TransportTCP, "background flows' transports, each a testbed of its own: tcp (the system's congestion control), tcp-app-cc (the app sets cubic once connected), quic (quic-go, its own CUBIC)")
			fs.StringVar(transports, "bg-transport", TransportTCP, "the same as --bg-transports")
			return func(ctx context.Context, env *testbed.Env) (*testbed.Result, error) {
				if env.Quick {
					*links, *sizes, c.Reps = "fixed", "10,100", 1
					c.Warmup, c.Slot, c.BulkFor, c.JainFor = 8*time.Second, 3*time.Second, 5*time.Second, 9*time.Second
				}
				if err := parseRemote(c, *links, *bgDirs, *fgDirs, *sizes, *methods, *transports); err != nil {
					return nil, err
				}
				var err error
				if c.SteadyFG, err = parseSteadyFG(*steadyFG); err != nil {
					return nil, err
				}
				switch c.SteadyOf {
				case SteadyOfStep:
				case "mean":
					c.SteadyOf = ""
				default:
					return nil, fmt.Errorf("--steady-of %q: want step or mean", c.SteadyOf)
				}
				r := &testbed.Result{Experiment: "lbe-remote", Started: time.Now(), Params: map[string]any{"config": c}}
				runs, err := RunRemote(ctx, env, c)
				if err != nil && len(runs) == 0 {
					return nil, err
				}
				if err != nil {
					r.Notes = append(r.Notes, "stopped early: "+err.Error())
				}
				cells := summarizeRemote(runs)
				r.Tables = remoteTables(cells, c)
				r.Data = map[string]any{"runs": runs, "cells": cells}
				r.Notes = append(r.Notes, fmt.Sprintf("links %s, %v one way, buffers %v at the mean rate, %s, %d rounds, background over %s; paired: every method's and transport's step starts at the same offset into the links",
					strings.Join(c.Links, ", "), c.Delay, c.QueueTime, c.CC, c.Reps, strings.Join(c.BGTransports, ", ")))
				r.Duration = time.Since(r.Started)
				return r, nil
			}
		}, Plot: plotRemote, Tables: tablesRemote})
}

// tablesRemote computes a stored run's tables again from its runs and
// configuration.
func tablesRemote(r *testbed.Result) ([]testbed.Table, error) {
	var d struct {
		Runs []RemoteRun `json:"runs"`
	}
	var c RemoteConfig
	if err := testbed.DecodeData(r, &d); err != nil {
		return nil, err
	}
	if err := testbed.DecodeParam(r, "config", &c); err != nil {
		return nil, err
	}
	return remoteTables(summarizeRemote(d.Runs), &c), nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func parseRemote(c *RemoteConfig, links, bgDirs, fgDirs, sizes, methods, transports string) error {
	split := splitList
	c.Links, c.BGDirs, c.FGDirs = split(links), split(bgDirs), split(fgDirs)
	var err error
	if c.BGTransports, err = parseTransports(transports); err != nil {
		return err
	}
	for _, d := range append(append([]string(nil), c.BGDirs...), c.FGDirs...) {
		if d != "upload" && d != "download" {
			return fmt.Errorf("bad direction %q (upload or download)", d)
		}
	}
	c.SizesKB = nil
	for _, s := range split(sizes) {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			return fmt.Errorf("bad size %q", s)
		}
		c.SizesKB = append(c.SizesKB, v)
	}
	c.Methods = nil
	for _, id := range split(methods) {
		i := methodIndex(id)
		if i == len(RemoteMethods) {
			return fmt.Errorf("unknown method %q", id)
		}
		c.Methods = append(c.Methods, RemoteMethods[i])
	}
	if len(c.Methods) == 0 {
		return fmt.Errorf("no methods")
	}
	for _, l := range c.Links {
		if l == "fixed" || l == variableLink {
			continue
		}
		if _, err := testbed.LoadTrace(l + ".up"); err != nil {
			return err
		}
	}
	if c.Lanes == "" {
		c.Lanes, _ = os.Executable()
	}
	return nil
}

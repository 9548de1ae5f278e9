// gendocs.go: `lanes gen-docs --man DIR`, one man page per command written
// from the command tree itself (names, synopses, descriptions, flags, the
// environment variables flags name) joined with the hand-written EXAMPLES,
// FILES and sections of manpages.go, and lanes-policy(5) from docs/policy.md
// (policyman.go), so the pages never drift from the code and the docs; make
// install and make deb call it. Shell completions come from cobra's own
// `lanes completion SHELL`.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lanes-net/lanes/internal/manpage"
)

func init() {
	register(&command{path: "gen-docs", summary: "write the man pages (make install, make deb)", hidden: true,
		setup: func(fs *pflag.FlagSet, e *env) runFunc {
			dir := fs.String("man", "", "man folder: section 1 pages go to DIR/man1, lanes-policy(5) to DIR/man5 (required)")
			policyDoc := fs.String("policy-doc", "docs/policy.md", "the policy reference lanes-policy(5) is made from")
			return func(context.Context, []string) error {
				if *dir == "" {
					return usageErrorf("--man DIR is required")
				}
				n, err := writeManPages(buildTree(e), *dir, *policyDoc)
				fmt.Fprintf(e.stdout, "%d man pages in %s\n", n, *dir)
				return err
			}
		}})
}

// writeManPages writes DIR/man1 (the command tree) and DIR/man5/lanes-policy.5.
func writeManPages(root *cobra.Command, dir, policyDoc string) (int, error) {
	md, err := os.ReadFile(policyDoc)
	if err != nil {
		return 0, fmt.Errorf("lanes-policy(5): %w", err)
	}
	for _, sub := range []string{"man1", "man5"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return 0, err
		}
	}
	n, err := writeManTree(root, filepath.Join(dir, "man1"))
	if err != nil {
		return n, err
	}
	f, err := os.Create(filepath.Join(dir, "man5", "lanes-policy.5"))
	if err != nil {
		return n, err
	}
	writePolicyMan(f, string(md))
	return n + 1, f.Close()
}

// writeManTree writes lanes.1, lanes-status.1, lanes-lab-run-lbe.1, ...
func writeManTree(c *cobra.Command, dir string) (int, error) {
	n := 0
	if c.IsAvailableCommand() || !c.HasParent() {
		f, err := os.Create(filepath.Join(dir, manName(c)+".1"))
		if err != nil {
			return n, err
		}
		writeMan(f, c)
		if err := f.Close(); err != nil {
			return n, err
		}
		n++
	}
	for _, k := range c.Commands() {
		if !k.IsAvailableCommand() || k.Name() == "help" {
			continue
		}
		m, err := writeManTree(k, dir)
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// manName: "lanes lab run" -> "lanes-lab-run"; treePath: -> "lab run".
func manName(c *cobra.Command) string { return strings.ReplaceAll(c.CommandPath(), " ", "-") }

func treePath(c *cobra.Command) string {
	return strings.TrimPrefix(strings.TrimPrefix(c.CommandPath(), "lanes"), " ")
}

var roff = manpage.Escape

func writeMan(w io.Writer, c *cobra.Command) {
	name := manName(c)
	extra, _ := extraFor(treePath(c))
	fmt.Fprintf(w, ".TH %s 1 \"\" \"lanes %s\" \"lanes manual\"\n", strings.ToUpper(name), roff(version))
	fmt.Fprintf(w, ".SH NAME\n%s \\- %s\n", roff(name), roff(c.Short))
	fmt.Fprintf(w, ".SH SYNOPSIS\n.B %s\n", roff(c.UseLine()))
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(w, ".br\n.B %s COMMAND\n", roff(c.CommandPath()))
	}
	fmt.Fprintf(w, ".SH DESCRIPTION\n%s\n", roff(c.Long))
	if c.HasAvailableSubCommands() {
		fmt.Fprintln(w, ".SH COMMANDS")
		for _, k := range c.Commands() {
			if k.IsAvailableCommand() {
				fmt.Fprintf(w, ".TP\n.B %s\n%s\n", roff(k.Name()), roff(k.Short))
			}
		}
	}
	writeOptions(w, c)
	for _, s := range extra.sections {
		fmt.Fprintf(w, ".SH %s\n%s\n", s[0], s[1])
	}
	writeManExamples(w, extra.examples)
	exit := "0 on success (and for \\-\\-help), 1 on failure, 2 on a usage error."
	if extra.exit != "" {
		exit = roff(extra.exit)
	}
	fmt.Fprintf(w, ".SH EXIT STATUS\n%s\n", exit)
	writeManEnv(w, c)
	writeManFiles(w, extra.files)
	writeSeeAlso(w, c, extra.see)
}

func writeOptions(w io.Writer, c *cobra.Command) {
	fs := c.NonInheritedFlags()
	if !fs.HasAvailableFlags() {
		return
	}
	fmt.Fprintln(w, ".SH OPTIONS")
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		head := "\\-\\-" + roff(f.Name)
		if f.Shorthand != "" {
			head = "\\-" + f.Shorthand + ", " + head
		}
		typ, usage := pflag.UnquoteUsage(f)
		if typ != "" {
			head += " " + roff(typ)
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" {
			usage += " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(w, ".TP\n.B %s\n%s\n", head, roff(usage))
	})
}

func writeManExamples(w io.Writer, examples []manExample) {
	if len(examples) == 0 {
		return
	}
	fmt.Fprintln(w, ".SH EXAMPLES")
	for _, x := range examples {
		fmt.Fprintf(w, ".TP\n.B %s\n%s\n", roff(x.cmd), roff(x.what))
	}
}

// writeManEnv lists the variables the command's flags name ("env NAME")
// and those of envFor for it or an ancestor below the root.
func writeManEnv(w io.Writer, c *cobra.Command) {
	seen := map[string]bool{}
	var names []string
	add := func(n string) {
		if _, ok := manEnv[n]; ok && !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
		for _, m := range envRef.FindAllStringSubmatch(f.Usage, -1) {
			add(m[1])
		}
	})
	for p := c; p != nil; p = p.Parent() {
		if p != c && !p.HasParent() {
			break // the root's list is lanes(1)'s alone
		}
		for _, n := range envFor[treePath(p)] {
			add(n)
		}
	}
	if len(names) == 0 {
		return
	}
	fmt.Fprintln(w, ".SH ENVIRONMENT")
	for _, n := range names {
		fmt.Fprintf(w, ".TP\n.B %s\n%s\n", n, roff(manEnv[n]))
	}
}

var envRef = regexp.MustCompile(`env ([A-Z_]+)`)

func writeManFiles(w io.Writer, keys []string) {
	if len(keys) == 0 {
		return
	}
	fmt.Fprintln(w, ".SH FILES")
	for _, k := range keys {
		f := manFiles[k]
		fmt.Fprintf(w, ".TP\n.I %s\n%s\n", roff(f[0]), roff(f[1]))
	}
}

func writeSeeAlso(w io.Writer, c *cobra.Command, more []string) {
	var see []string
	if p := c.Parent(); p != nil {
		see = append(see, manName(p)+"(1)")
	}
	for _, k := range c.Commands() {
		if k.IsAvailableCommand() && k.Name() != "help" {
			see = append(see, manName(k)+"(1)")
		}
	}
	see = append(see, more...)
	if len(see) > 0 {
		fmt.Fprintf(w, ".SH SEE ALSO\n%s\n", roff(strings.Join(see, ", ")))
	}
}

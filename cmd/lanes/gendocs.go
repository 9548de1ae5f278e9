// gendocs.go: `lanes gen-docs --man DIR`, one man page per command written
// from the command tree itself (names, synopses, descriptions, flags), so the
// pages never drift from the code; make install and make deb call it.
// Shell completions come from cobra's own `lanes completion SHELL`.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func init() {
	register(&command{path: "gen-docs", summary: "write the man pages (make install, make deb)", hidden: true,
		setup: func(fs *pflag.FlagSet, e *env) runFunc {
			dir := fs.String("man", "", "folder for the section-1 man pages (required)")
			return func(context.Context, []string) error {
				if *dir == "" {
					return usageErrorf("--man DIR is required")
				}
				if err := os.MkdirAll(*dir, 0o755); err != nil {
					return err
				}
				n, err := writeManTree(buildTree(e), *dir)
				fmt.Fprintf(e.stdout, "%d man pages in %s\n", n, *dir)
				return err
			}
		}})
}

// writeManTree writes lanes.1, lanes-status.1, lanes-lab-run-lbe.1, ...
func writeManTree(c *cobra.Command, dir string) (int, error) {
	n := 0
	if c.IsAvailableCommand() || !c.HasParent() {
		name := strings.ReplaceAll(c.CommandPath(), " ", "-")
		f, err := os.Create(filepath.Join(dir, name+".1"))
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

// roff escapes text for a man page.
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, ".") || strings.HasPrefix(line, "'") {
			line = `\&` + line
		}
		b.WriteString(line + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func writeMan(w io.Writer, c *cobra.Command) {
	name := strings.ReplaceAll(c.CommandPath(), " ", "-")
	fmt.Fprintf(w, ".TH %s 1 \"\" \"lanes %s\" \"lanes manual\"\n", strings.ToUpper(name), version)
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
	if fs := c.NonInheritedFlags(); fs.HasAvailableFlags() {
		fmt.Fprintln(w, ".SH OPTIONS")
		fs.VisitAll(func(f *pflag.Flag) {
			if f.Hidden {
				return
			}
			head := "\\-\\-" + roff(f.Name)
			if f.Shorthand != "" {
				head = "\\-" + f.Shorthand + ", " + head
			}
			if typ, _ := pflag.UnquoteUsage(f); typ != "" {
				head += " " + roff(typ)
			}
			usage := f.Usage
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" {
				usage += " (default " + f.DefValue + ")"
			}
			fmt.Fprintf(w, ".TP\n.B %s\n%s\n", head, roff(usage))
		})
	}
	fmt.Fprintln(w, ".SH EXIT STATUS\n0 on success (and for \\-\\-help), 1 on failure, 2 on a usage error.")
	fmt.Fprintln(w, ".SH ENVIRONMENT\n.TP\n.B LANES_SOCKET\nthe daemon's API socket for client commands (default /run/lanes/lanes.sock)\n.TP\n.B LANES_TRACES\na folder searched first for the lab's cellular traces")
	var see []string
	if p := c.Parent(); p != nil {
		see = append(see, strings.ReplaceAll(p.CommandPath(), " ", "-")+"(1)")
	}
	for _, k := range c.Commands() {
		if k.IsAvailableCommand() && k.Name() != "help" {
			see = append(see, strings.ReplaceAll(k.CommandPath(), " ", "-")+"(1)")
		}
	}
	if len(see) > 0 {
		fmt.Fprintf(w, ".SH SEE ALSO\n%s\n", roff(strings.Join(see, ", ")))
	}
}

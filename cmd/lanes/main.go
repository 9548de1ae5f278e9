// Command lanes is the lanes daemon and its command-line tools in one binary.
//
// Every subcommand lives in its own file in this folder and registers itself
// with register() from an init function, so adding a command touches no other
// file. The command tree, flag parsing (GNU style, flags anywhere), help,
// completions and man pages come from spf13/cobra and pflag. All I/O goes
// through an env so commands are tested in-process.
//
// Exit codes: 0 success (and -h/--help, on stdout), 1 failure, 2 usage error.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// env is everything a command may touch of the outside world.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
}

// runFunc runs a command after its flags were parsed; args are the
// positional arguments.
type runFunc func(ctx context.Context, args []string) error

// command is one node of the command tree: `lanes PATH...`.
type command struct {
	path    string // words after "lanes", e.g. "status" or "lab run"
	summary string // one line for the parent's help
	long    string // optional longer help
	args    string // positional synopsis, e.g. "FILE" or "-- CMD [ARGS...]"
	// nargs checks the positional arguments (default: none allowed).
	nargs func(args []string) error
	// setup defines the flags on fs and returns the command's body; nil for
	// a group whose subcommands do the work.
	setup func(fs *pflag.FlagSet, e *env) runFunc
	// rawArgs passes every argument through unparsed (internal helpers).
	rawArgs bool
	// stopAtArg ends flag parsing at the first positional argument, for
	// commands that run another command (`lanes run CMD -x`).
	stopAtArg bool
	hidden    bool
	// children builds dynamic subcommands (e.g. one per lab experiment).
	children func(e *env) []*cobra.Command
}

var commands []*command

// register adds a command; called from init functions.
func register(c *command) {
	for _, o := range commands {
		if o.path == c.path {
			panic("lanes: duplicate command " + c.path)
		}
	}
	commands = append(commands, c)
}

// errUsage marks an error caused by bad arguments: exit code 2.
var errUsage = errors.New("usage")

func usageErrorf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}

// noArgs, exactArgs and minArgs check positional arguments.
func noArgs(args []string) error {
	if len(args) > 0 {
		return usageErrorf("unexpected argument %q", args[0])
	}
	return nil
}

func exactArgs(n int, what string) func([]string) error {
	return func(args []string) error {
		if len(args) != n {
			return usageErrorf("want %s", what)
		}
		return nil
	}
}

func anyArgs([]string) error { return nil }

func main() {
	e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	liftMemlock()
	os.Exit(runMain(ctx, e, os.Args[1:]))
}

// runMain builds the command tree, runs the command args name and turns its
// error into an exit code.
func runMain(ctx context.Context, e *env, args []string) int {
	if e.getenv == nil {
		e.getenv = func(string) string { return "" }
	}
	root := buildTree(e)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	name := root.Name()
	if cmd != nil {
		name = cmd.CommandPath()
	}
	fmt.Fprintf(e.stderr, "%s: %s\n", name, strings.TrimPrefix(err.Error(), errUsage.Error()+": "))
	if isUsage(err) {
		fmt.Fprintf(e.stderr, "Run '%s --help' for usage.\n", name)
		return 2
	}
	return 1
}

// isUsage tells usage errors: ours, pflag's and cobra's unknown commands.
func isUsage(err error) bool {
	if errors.Is(err, errUsage) {
		return true
	}
	m := err.Error()
	return strings.HasPrefix(m, "unknown command") || strings.HasPrefix(m, "unknown flag") ||
		strings.HasPrefix(m, "unknown shorthand flag")
}

// buildTree makes the cobra command tree from the registered commands.
func buildTree(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "lanes",
		Short: "traffic and task lanes for Linux devices (realtime > interactive > background)",
		Long: "lanes gives every flow and task a lane — realtime > interactive (default) > background —\n" +
			"and enforces it with the kernel's qdiscs, BPF, cgroups and scheduler policies.",
		Version:           versionString(),
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: false},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SetIn(e.stdin)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErrorf("%v", err) })
	sorted := append([]*command(nil), commands...)
	sort.SliceStable(sorted, func(i, j int) bool {
		return strings.Count(sorted[i].path, " ") < strings.Count(sorted[j].path, " ")
	})
	nodes := map[string]*cobra.Command{"": root}
	for _, c := range sorted {
		parent, name := "", c.path
		if i := strings.LastIndexByte(c.path, ' '); i >= 0 {
			parent, name = c.path[:i], c.path[i+1:]
		}
		p, ok := nodes[parent]
		if !ok {
			panic("lanes: command " + c.path + " registered without its parent")
		}
		cc := c.cobra(e, name)
		nodes[c.path] = cc
		p.AddCommand(cc)
	}
	addCompletions(root)
	return root
}

// cobra turns one registered command into a cobra command.
func (c *command) cobra(e *env, name string) *cobra.Command {
	use := name
	if c.args != "" {
		use += " " + c.args
	}
	cc := &cobra.Command{Use: use, Short: c.summary, Long: c.long, Hidden: c.hidden,
		DisableFlagParsing: c.rawArgs, SilenceErrors: true, SilenceUsage: true}
	if c.long == "" {
		cc.Long = c.summary
	}
	if c.stopAtArg {
		cc.Flags().SetInterspersed(false)
	}
	nargs := c.nargs
	if nargs == nil {
		nargs = noArgs
	}
	if c.setup == nil { // a group: help without arguments, an error for a wrong one
		cc.Args = func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unknown subcommand %q", args[0])
			}
			return nil
		}
		cc.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	} else {
		run := c.setup(cc.Flags(), e)
		cc.Args = func(_ *cobra.Command, args []string) error { return nargs(args) }
		cc.RunE = func(cmd *cobra.Command, args []string) error { return run(cmd.Context(), args) }
	}
	if c.children != nil {
		for _, k := range c.children(e) {
			cc.AddCommand(k)
		}
	}
	return cc
}

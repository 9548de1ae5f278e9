// Command lanes is the lanes daemon and its command-line tools in one binary.
//
// Every subcommand lives in its own file in this folder and registers itself
// with register() from an init function, so adding a command touches no other
// file. All I/O goes through an env so commands are tested in-process.
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
)

// env is everything a command may touch of the outside world.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
}

// command is one subcommand: `lanes NAME ARGS...`.
type command struct {
	name    string
	summary string // one line for `lanes help`
	usage   string // argument synopsis, e.g. "[--json]"
	run     func(ctx context.Context, e *env, args []string) error
}

var commands = map[string]*command{}

// register adds a subcommand; called from init functions.
func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("lanes: duplicate command " + c.name)
	}
	commands[c.name] = c
}

// errUsage marks an error caused by bad arguments: exit code 2.
var errUsage = errors.New("usage")

func usageErrorf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}

func main() {
	e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(runMain(ctx, e, os.Args[1:]))
}

// runMain dispatches to a subcommand and turns its error into an exit code.
func runMain(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printHelp(e.stdout)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "lanes: unknown command %q (see 'lanes help')\n", args[0])
		return 2
	}
	if err := c.run(ctx, e, args[1:]); err != nil {
		fmt.Fprintf(e.stderr, "lanes %s: %v\n", c.name, err)
		if errors.Is(err, errUsage) {
			fmt.Fprintf(e.stderr, "usage: lanes %s %s\n", c.name, c.usage)
			return 2
		}
		return 1
	}
	return 0
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "lanes: traffic and task lanes for Linux devices (realtime > interactive > background)")
	fmt.Fprintln(w, "\nusage: lanes COMMAND [ARGS]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'lanes COMMAND -h' for a command's flags.")
}

// splitSubcommand returns the first word of args and the rest, for commands
// with their own subcommands (e.g. `lanes lab run NAME`).
func splitSubcommand(args []string) (string, []string) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return "", args
	}
	return args[0], args[1:]
}

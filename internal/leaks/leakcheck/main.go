// leakcheck fails (exit 1) when lanes left anything on this machine: the
// last step of `make test` (package leaks says what it looks for).
package main

import (
	"fmt"
	"os"

	"github.com/lanes-net/lanes/internal/leaks"
)

func main() {
	left := leaks.Find()
	if len(left) == 0 {
		fmt.Println("leakcheck: nothing of lanes left on this machine")
		return
	}
	fmt.Fprintf(os.Stderr, "leakcheck: %d leftovers of lanes on this machine:\n", len(left))
	for _, l := range left {
		fmt.Fprintln(os.Stderr, "  "+l)
	}
	os.Exit(1)
}

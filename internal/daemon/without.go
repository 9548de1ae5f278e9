// without.go: the names `lanes daemon --without` takes: the host
// datapath's capabilities (datapath.Capabilities, the one table) and the
// daemon's own rLEDBAT; any other name is refused.
package daemon

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lanes-net/lanes/internal/datapath"
)

// WithoutRLEDBATDaemon (`--without rledbat_daemon`) leaves the daemon's
// own rLEDBAT off as well.
const WithoutRLEDBATDaemon = "rledbat_daemon"

// withoutDaemon is what WithoutRLEDBATDaemon leaves off, in one line.
const withoutDaemon = "the daemon's own rLEDBAT, where rledbat is off"

// WithoutNames are the names --without takes, in order.
func WithoutNames() []string {
	var out []string
	for _, c := range datapath.Capabilities {
		out = append(out, string(c.Name))
	}
	return append(out, WithoutRLEDBATDaemon)
}

// WithoutHelp is --without's help, made from the table.
func WithoutHelp() string {
	var b strings.Builder
	b.WriteString("leave optional capabilities off as if the kernel lacked them:")
	for _, c := range datapath.Capabilities {
		fmt.Fprintf(&b, "\n  %s: %s", c.Name, c.Does)
	}
	fmt.Fprintf(&b, "\n  %s: %s", WithoutRLEDBATDaemon, withoutDaemon)
	return b.String()
}

// CheckWithout refuses a name --without does not take.
func CheckWithout(names []string) error {
	for _, n := range names {
		if !slices.Contains(WithoutNames(), n) {
			return fmt.Errorf("--without: unknown name %q (want %s)", n, strings.Join(WithoutNames(), ", "))
		}
	}
	return nil
}

// connector_test.go: the proc connector's refusal says why, from the
// kernel's answer: in a network namespace other than the initial one it
// names the namespace, never a kernel built without process events.
package sched

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lanes-net/lanes/internal/testutil"
)

func TestConnectorHintFromErrno(t *testing.T) {
	for err, want := range map[error]string{
		unix.ECONNREFUSED:    "not the initial one",
		unix.EPROTONOSUPPORT: "CONFIG_CONNECTOR",
		unix.EPERM:           "CAP_NET_ADMIN",
		unix.EINVAL:          "unexpected",
	} {
		if h := connectorHint(err); !strings.Contains(h, want) {
			t.Errorf("%v: hint %q, want it to say %q", err, h, want)
		}
	}
}

// TestConnectorInNamespaceNamesIt opens the connector in a fresh network
// namespace: refused, the error names the namespace and not the kernel.
func TestConnectorInNamespaceNamesIt(t *testing.T) {
	testutil.RequireRoot(t)
	ns := testutil.NewNetNS(t)
	var err error
	ns.Do(t, func() error {
		c, e := OpenConnector()
		if c != nil {
			c.Close()
		}
		err = e
		return nil
	})
	if err == nil {
		t.Fatal("the proc connector opened in a fresh network namespace: the kernel creates it in the initial one only")
	}
	if !errors.Is(err, unix.ECONNREFUSED) || !strings.Contains(err.Error(), ErrConnectorNamespace.Error()) || strings.Contains(err.Error(), "CONFIG_") {
		t.Errorf("in a network namespace: %v, want the namespace named and no kernel option blamed", err)
	}
	t.Logf("in a fresh network namespace: %v", err)
}

// TestProcEventsBuiltOut: a config without CONFIG_PROC_EVENTS skips the
// connector (it would accept the listen request and send nothing); an
// unreadable config leaves it to be tried.
func TestProcEventsBuiltOut(t *testing.T) {
	if err := procEventsBuiltOut(map[string]string{"CONFIG_CONNECTOR": "y"}); err == nil || !strings.Contains(err.Error(), "CONFIG_PROC_EVENTS") {
		t.Errorf("config without CONFIG_PROC_EVENTS: %v", err)
	}
	if err := procEventsBuiltOut(map[string]string{"CONFIG_CONNECTOR": "y", "CONFIG_PROC_EVENTS": "y"}); err != nil {
		t.Errorf("config with it: %v", err)
	}
	if err := procEventsBuiltOut(map[string]string{}); err != nil {
		t.Errorf("no config readable: %v", err)
	}
}

// rtd_test.go: the lane's tests run lanes-rtd built here from rtd/ with
// the system's C compiler, as make does; the control protocol's layout is
// checked against rtd/ctl.h.
package rtlane

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lanes-net/lanes/internal/rtlane/rtdbuild"
)

// testHelper is the lanes-rtd the tests' lanes run.
var testHelper string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "lanes-rtd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if testHelper, err = rtdbuild.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, "building lanes-rtd for the tests:", err)
		return 1
	}
	return m.Run()
}

// helperPids are the lanes-rtd processes this process started.
func helperPids() []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || !strings.Contains(s[:i], "("+HelperName) {
			continue
		}
		if f := strings.Fields(s[i+1:]); len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// testOpts puts the tests' data path before opts.
func testOpts(opts ...Option) []Option { return append([]Option{WithHelper(testHelper)}, opts...) }

// TestControlLayout compares the Go structs of the control protocol with
// rtd/ctl.h's, compiled.
func TestControlLayout(t *testing.T) {
	prog := `#include <stdio.h>
#include "ctl.h"
int main(void) {
	printf("%zu %zu %zu %zu %zu %zu %zu %zu\n", sizeof(struct rtd_hdr), sizeof(struct rtd_config),
	       sizeof(struct rtd_conn), sizeof(struct rtd_route), sizeof(struct rtd_forward),
	       sizeof(struct rtd_flow), sizeof(struct rtd_counters), sizeof(struct rtd_event));
	return 0;
}`
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "layout.c"), []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "layout")
	if b, err := exec.Command(rtdbuild.CC(), "-I"+rtdbuild.RtdDir(), "-o", bin, filepath.Join(dir, "layout.c")).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	b, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	sizes := []any{rtdHdr{}, rtdConfigMsg{}, rtdConnMsg{}, rtdRouteMsg{}, rtdForwardMsg{}, rtdFlow{}, rtdCountersMsg{}, rtdEvent{}}
	var want []string
	for _, v := range sizes {
		want = append(want, fmt.Sprint(binary.Size(v)))
	}
	if got := strings.TrimSpace(string(b)); got != strings.Join(want, " ") {
		t.Fatalf("sizes in C %s, in Go %s (hdr config conn route forward flow counters event)", got, strings.Join(want, " "))
	}
}

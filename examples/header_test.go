// header_test.go: include/lanes_rt.h builds without a warning under
// -std=c11 -Wall -Wextra -Werror -O2 with gcc and clang, with IPv4 and IPv6
// destinations (a struct sockaddr_in whose family the compiler cannot see
// once drew gcc's -Warray-bounds), whether the header comes first (it then
// asks for POSIX itself) or after system headers with POSIX asked for on
// the command line; without POSIX it stops with an error that says so.
package examples_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lanes-net/lanes/rt"
)

// headerProgram sends to a sockaddr_in and a sockaddr_in6 filled at run
// time. HEADER_FIRST picks the include order.
const headerProgram = `#ifdef HEADER_FIRST
#include <lanes_rt.h>
#endif
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#ifndef HEADER_FIRST
#include <lanes_rt.h>
#endif

int main(int argc, char **argv)
{
	struct lanes_rt rt;
	struct lanes_rt_reply rep;
	struct sockaddr_in s4;
	struct sockaddr_in6 s6;
	int r4, r6;

	if (argc != 4)
		return 2;
	memset(&s4, 0, sizeof(s4));
	memset(&s6, 0, sizeof(s6));
	s4.sin_family = AF_INET;
	s4.sin_port = htons((uint16_t)atoi(argv[1]));
	s6.sin6_family = AF_INET6;
	s6.sin6_port = s4.sin_port;
	if (inet_pton(AF_INET, argv[2], &s4.sin_addr) != 1 || inet_pton(AF_INET6, argv[3], &s6.sin6_addr) != 1)
		return 2;
	if (lanes_rt_open(&rt, LANES_RT_SOCKET) < 0)
		return 1;
	r4 = lanes_rt_send(&rt, 1, (struct sockaddr *)&s4, lanes_rt_now() + 1000000, 0, "x", 1, &rep);
	r6 = lanes_rt_send(&rt, 1, (struct sockaddr *)&s6, 0, LANES_RT_FLAG_RELATIVE, "x", 1, &rep);
	printf("%d %d %s %u\n", r4, r6, lanes_rt_reason_str(rep.reason), rt.dropped);
	lanes_rt_close(&rt);
	return 0;
}
`

// strictFlags are the flags of a -Werror build the header must pass.
var strictFlags = []string{"-std=c11", "-Wall", "-Wextra", "-Werror", "-O2"}

func TestHeaderStrictBuild(t *testing.T) {
	include, err := filepath.Abs("../include")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "prog.c")
	if err := os.WriteFile(src, []byte(headerProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cc := range []string{"gcc", "clang"} {
		t.Run(cc, func(t *testing.T) {
			if _, err := exec.LookPath(cc); err != nil {
				t.Skipf("%s not installed", cc)
			}
			warnings := 0
			for _, c := range []struct{ name, defs string }{
				{"header first, -std=c11", "-DHEADER_FIRST"},
				{"header first, -std=gnu11", "-DHEADER_FIRST -std=gnu11"},
				{"after system headers, -D_POSIX_C_SOURCE", "-D_POSIX_C_SOURCE=200809L"},
				{"after system headers, -D_DEFAULT_SOURCE", "-D_DEFAULT_SOURCE"},
			} {
				args := append(append([]string{}, strictFlags...), strings.Fields(c.defs)...)
				args = append(args, "-I"+include, "-o", filepath.Join(dir, "prog-"+cc), src)
				out, err := exec.Command(cc, args...).CombinedOutput()
				warnings += strings.Count(string(out), "warning:") + strings.Count(string(out), "error:")
				if err != nil || len(out) > 0 {
					t.Errorf("%s: %s %s: %v\n%s", c.name, cc, strings.Join(args, " "), err, out)
				}
			}
			t.Logf("%s %s: %d warnings", cc, strings.Join(strictFlags, " "), warnings)
			// Without POSIX (system headers first, strict C11, no feature
			// macro) the header must say what it needs.
			args := append(append([]string{}, strictFlags...), "-I"+include, "-o", filepath.Join(dir, "prog-none"), src)
			out, err := exec.Command(cc, args...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "lanes_rt.h needs POSIX") {
				t.Errorf("without POSIX: %v, want the header's #error\n%s", err, out)
			}
		})
	}
}

// fixProgram opens the realtime socket argv[1] and prints why it failed,
// then reads a failed send's reply (*rep must be set, zeroed, on every
// path: read after a failure it drew -Wmaybe-uninitialized under -O2) and
// the help for not-granted.
const fixProgram = `#include <lanes_rt.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	struct lanes_rt rt;
	struct lanes_rt_reply rep;
	int r;

	if (argc != 2)
		return 2;
	if (lanes_rt_open(&rt, argv[1]) == 0)
		return 3;
	printf("%s\n", lanes_rt_open_error(argv[1], errno));
	r = lanes_rt_send(&rt, 1, NULL, 0, LANES_RT_FLAG_RELATIVE, "x", 1, &rep);
	printf("%d %u %u\n", r, rep.type, rep.reason);
	printf("%s\n", lanes_rt_reason_help(LANES_RT_REASON_NOT_GRANTED));
	return 0;
}
`

// TestHeaderSaysWhatFixesIt: lanes_rt_open_error tells the lane off (the
// daemon's API socket answers beside the missing realtime socket) from the
// daemon not running, in the words of the Go client; a failed send leaves
// *rep zeroed; -O2 -Werror builds reading it stay clean with gcc and clang.
func TestHeaderSaysWhatFixesIt(t *testing.T) {
	include, err := filepath.Abs("../include")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "fix.c")
	if err := os.WriteFile(src, []byte(fixProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "rt.sock")
	for _, cc := range []string{"gcc", "clang"} {
		t.Run(cc, func(t *testing.T) {
			if _, err := exec.LookPath(cc); err != nil {
				t.Skipf("%s not installed", cc)
			}
			bin := filepath.Join(dir, "fix-"+cc)
			args := append(append([]string{}, strictFlags...), "-Wmaybe-uninitialized", "-I"+include, "-o", bin, src)
			if cc == "clang" {
				args = append(append([]string{}, strictFlags...), "-Wsometimes-uninitialized", "-I"+include, "-o", bin, src)
			}
			if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil || len(out) > 0 {
				t.Fatalf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, out)
			}
			for _, want := range []string{rt.MsgNoDaemon, rt.MsgLaneOff} {
				var api net.Listener
				if want == rt.MsgLaneOff {
					if api, err = net.Listen("unix", filepath.Join(dir, "lanes.sock")); err != nil {
						t.Fatal(err)
					}
				}
				out, err := exec.Command(bin, sock).Output()
				if api != nil {
					api.Close()
				}
				lines := strings.Split(strings.TrimSpace(string(out)), "\n")
				if err != nil || len(lines) != 3 || lines[0] != want || lines[1] != "-1 0 0" || lines[2] != rt.MsgNotGranted {
					t.Errorf("%s: %v, want %q, \"-1 0 0\" and %q:\n%s", bin, err, want, rt.MsgNotGranted, out)
				}
			}
		})
	}
}

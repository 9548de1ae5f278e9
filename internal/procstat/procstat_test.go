package procstat

import (
	"os"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	line := "4242 (a b) (c)) S 17 4242 4242 0 -1 4194560 380 0 0 0 250 31 0 0 20 0 4 0 123456 10000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	s, err := Parse([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{PID: 4242, Comm: "a b) (c)", State: 'S', PPID: 17, UTime: 250, STime: 31, StartTime: 123456}
	if s != want {
		t.Fatalf("got %+v, want %+v", s, want)
	}
	if s.CPU() != 2810*time.Millisecond || s.Start() != 1234560*time.Millisecond {
		t.Fatalf("CPU %v, Start %v", s.CPU(), s.Start())
	}
	for _, bad := range []string{"", "12 comm S 1", "x (c) S 1 2", "1 (c) S 1 2 3", "1 (c) S x 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0", "1 (c) S 1 0 0 0 0 0 0 0 0 0 0 -5 0 0 0 0 0 0 0 0"} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestReadSelf(t *testing.T) {
	s, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.PID != os.Getpid() || s.PPID != os.Getppid() || s.State != 'R' && s.State != 'S' || s.StartTime == 0 {
		t.Fatalf("self: %+v", s)
	}
	ts, err := ReadTask(os.Getpid(), os.Getpid())
	if err != nil || ts.PID != os.Getpid() {
		t.Fatalf("main thread: %+v, %v", ts, err)
	}
}

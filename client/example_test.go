// example_test.go: the package example (compiled, not run: it needs a
// daemon).
package client_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"os/exec"
	"time"

	"github.com/lanes-net/lanes/client"
)

// An upload that yields to everything else: its connection registered in
// background, a backup command run there, and what changes followed.
func Example() {
	c := client.New("") // the daemon at client.DefaultSocket
	defer c.Close()
	st, err := c.Status()
	if err != nil {
		log.Fatal(err) // says whether the daemon runs
	}
	fmt.Println("lanes", st.Version, "policy", st.Policy)

	conn, err := net.Dial("tcp", "backup.example.net:443")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	if _, err := c.RegisterConn(conn, client.Background); err != nil {
		log.Fatal(err) // anyone may put their own flows in background
	}

	// A command and every process it starts, in background from its
	// first packet, at nice 19.
	if err := c.Run(exec.Command("rsync", "-a", "photos/", "backup.example.net:photos/"), client.Background); err != nil {
		log.Fatal(err)
	}

	udp, _, err := c.UDPFlows()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range udp {
		fmt.Println(f.Src, f.Peers(), f.Lane, f.Why)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for ev := range c.Events(ctx, time.Second) {
		fmt.Println(ev.Kind, ev.Flow.Flow, ev.Name, ev.Text)
	}
}

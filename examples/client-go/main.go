// lanes-client-go: an application of its own module that uses the lanes
// daemon through the public Go client (github.com/lanes-net/lanes/client).
//
//	lanes-client-go [--socket PATH] --to HOST:PORT
//
// It reads the daemon's status, follows its events, connects a TCP socket
// to HOST:PORT and puts it in background, sees the registration's event
// (streamed by the daemon), lists the registrations and finds its flow,
// connects a UDP socket to HOST:PORT and finds it among the UDP flows,
// removes its registration and sees that event, and runs `cat /proc/self/cgroup` in the
// background lane. One line per step; exits 1 at the first failure.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"time"

	"github.com/lanes-net/lanes/client"
)

func main() {
	sock := flag.String("socket", os.Getenv("LANES_SOCKET"), "the daemon's socket (default /run/lanes/lanes.sock)")
	to := flag.String("to", "", "HOST:PORT of a TCP server to connect to (required)")
	flag.Parse()
	if *to == "" {
		fmt.Fprintln(os.Stderr, "usage: lanes-client-go [--socket PATH] --to HOST:PORT")
		os.Exit(2)
	}
	if err := run(client.New(*sock), *to); err != nil {
		fmt.Fprintln(os.Stderr, "lanes-client-go:", err)
		os.Exit(1)
	}
}

func run(c *client.Client, to string) error {
	defer c.Close()
	st, err := c.Status()
	if err != nil {
		return err
	}
	if err := client.CheckSameNetns(st); err != nil {
		return err
	}
	fmt.Printf("daemon %s, policy %s, %d interface(s)\n", st.Version, st.Policy, len(st.Interfaces))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// the daemon streams its changes: the interval only paces redials
	// after the daemon went away
	events := c.Events(ctx, time.Minute)
	conn, err := net.Dial("tcp", to)
	if err != nil {
		return err
	}
	defer conn.Close()
	f, err := c.RegisterConn(conn, client.Background)
	if err != nil {
		return err
	}
	fmt.Printf("registered %s -> %s\n", f, client.Background)
	if err := awaitEvent(events, client.EventRegistered, f); err != nil {
		return err
	}
	if err := findRegistration(c, f); err != nil {
		return err
	}
	if err := findUDP(c, to); err != nil {
		return err
	}
	if err := c.Unregister(f); err != nil {
		return err
	}
	fmt.Printf("unregistered %s\n", f)
	if err := awaitEvent(events, client.EventUnregistered, f); err != nil {
		return err
	}
	cmd := exec.Command("cat", "/proc/self/cgroup")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	fmt.Println("run in background: cat /proc/self/cgroup")
	return c.Run(cmd, client.Background)
}

// awaitEvent waits for the event of kind of f's registration.
func awaitEvent(events <-chan client.Event, kind string, f client.Flow) error {
	for ev := range events {
		if ev.Kind == kind && ev.Flow.Flow.SPort == f.SPort && ev.Flow.Flow.DPort == f.DPort {
			fmt.Printf("event: %s %s in %s\n", ev.Kind, ev.Flow.Flow, ev.Flow.Lane)
			return nil
		}
	}
	return fmt.Errorf("no %s event of %s", kind, f)
}

// findRegistration finds f among the daemon's registrations.
func findRegistration(c *client.Client, f client.Flow) error {
	flows, err := c.Flows()
	if err != nil {
		return err
	}
	for _, fi := range flows {
		if fi.Flow.Dst == f.Dst && fi.Flow.DPort == f.DPort && fi.Flow.SPort == f.SPort {
			fmt.Printf("listed %s in %s by %s\n", fi.Flow, fi.Lane, fi.Source)
			return nil
		}
	}
	return fmt.Errorf("flow %s is not among the daemon's %d registrations", f, len(flows))
}

// findUDP connects a UDP socket to to and finds it among the UDP flows.
func findUDP(c *client.Client, to string) error {
	u, err := net.Dial("udp", to)
	if err != nil {
		return err
	}
	defer u.Close()
	flows, _, err := c.UDPFlows()
	if err != nil {
		return err
	}
	for _, f := range flows {
		if f.Src == u.LocalAddr().String() {
			fmt.Printf("udp %s -> %s in %s (%s)\n", f.Src, f.Dst, f.Lane, f.Why)
			return nil
		}
	}
	return fmt.Errorf("udp socket %s is not among the daemon's %d UDP flows", u.LocalAddr(), len(flows))
}

// Package nsrun runs a function inside another network namespace: on a
// locked OS thread switched into the namespace and back. Sockets created by
// the function stay in that namespace; goroutines it starts do not.
package nsrun

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Do runs fn in the namespace h and returns fn's error.
func Do(h netns.NsHandle, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return fmt.Errorf("get current network namespace: %w", err)
	}
	defer orig.Close()
	if err := netns.Set(h); err != nil {
		return fmt.Errorf("enter network namespace: %w", err)
	}
	defer netns.Set(orig)
	return fn()
}

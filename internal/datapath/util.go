// util.go has small error helpers of the datapath package.
package datapath

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

var errNotExist = os.ErrNotExist

func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// ignoreNotExist drops "no such key" from a map delete.
func ignoreNotExist(err error, what string) error {
	if err == nil || errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// errNoDevice is what netlink says about an interface that is gone.
var errNoDevice = unix.ENODEV

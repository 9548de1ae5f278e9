// Package rootpath checks that only root can change a file: the rule for
// the policy file, which can grant real-time priority and lanes to anyone.
//
// The file and every directory above it must be owned by root and not
// writable by group or others, checked both along the path as given
// (symlinks included, by their own owner) and along the path they resolve
// to. One exception: a directory with the sticky bit (like /tmp, 1777) may
// be writable by others, because they can add entries to it but not rename
// or remove root's.
package rootpath

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Check refuses path unless only root could have written it.
func Check(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if err := checkChain(abs); err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return err
	}
	if real != abs {
		return checkChain(real)
	}
	return nil
}

// checkChain checks abs and every directory above it.
func checkChain(abs string) error {
	for p := abs; ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if err := rootOnly(p, fi, p == abs); err != nil {
			return err
		}
		if p == "/" {
			return nil
		}
	}
}

func rootOnly(p string, fi fs.FileInfo, leaf bool) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: cannot read its owner", p)
	}
	if st.Uid != 0 {
		return fmt.Errorf("%s is owned by uid %d, not root: refusing a file others could change", p, st.Uid)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil // a symlink's own mode means nothing; its target is checked too
	}
	perm := fi.Mode().Perm()
	if perm&0o022 == 0 || (!leaf && fi.IsDir() && fi.Mode()&fs.ModeSticky != 0) {
		return nil
	}
	return fmt.Errorf("%s is writable by group or others (mode %v): refusing a file others could change", p, perm)
}

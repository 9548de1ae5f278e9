// write.go: files that root writes and reads in its own directories (the
// daemon's state), without following links a local user may have planted:
// the directory must be root's (Check), a new file is created beside the
// target with O_EXCL|O_NOFOLLOW and renamed over it (a rename replaces a
// link, never its target), and reads refuse a link.
package rootpath

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// MkdirAll creates dir (and its parents) if needed, then refuses it unless
// only root could have changed it.
func MkdirAll(dir string, perm os.FileMode) error {
	if err := os.MkdirAll(dir, perm); err != nil {
		return err
	}
	return Check(dir)
}

// WriteFile replaces path with data, atomically, in a directory only root
// can change, following no link.
func WriteFile(path string, data []byte, perm os.FileMode) (err error) {
	dir, name := filepath.Split(filepath.Clean(path))
	if err := Check(dir); err != nil {
		return err
	}
	dfd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	defer unix.Close(dfd)
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := "." + name + ".tmp" + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, tmp), err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir, tmp))
	defer func() {
		if err != nil {
			_ = unix.Unlinkat(dfd, tmp, 0)
		}
	}()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm.Perm()) // not narrowed by the umask
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := unix.Renameat(dfd, tmp, dfd, name); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// ErrTooLarge: a file over ReadFile's bound.
var ErrTooLarge = errors.New("file too large")

// ReadFile reads at most max bytes of path, refusing a link.
func ReadFile(path string, max int64) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		err = fmt.Errorf("%s: %w (over %d bytes)", path, ErrTooLarge, max)
	}
	return b, err
}

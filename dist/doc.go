// Package dist holds lanes' packaging: the systemd unit template
// (lanes.service.in) and the Debian control files (debian/). It has no Go
// code; its tests build the .deb with `make deb`, check its contents and
// verify the unit with systemd-analyze, and check that `make build` builds
// this machine's binaries only and that scripts/deps.sh waits for apt's
// locks.
package dist

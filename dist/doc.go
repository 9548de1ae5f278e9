// Package dist holds lanes' packaging: the systemd unit template
// (lanes.service.in) and the Debian control files (debian/). It has no Go
// code; its test builds the .deb with `make deb`, checks its contents and
// verifies the unit with systemd-analyze.
package dist

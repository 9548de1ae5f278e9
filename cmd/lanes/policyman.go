// policyman.go: lanes-policy(5), the policy file's page, made from
// docs/policy.md (its text, tables and examples, converted by
// internal/manpage) between a hand-written head (NAME, SYNOPSIS, how the
// daemon reads the file) and tail (EXAMPLES, FILES, SEE ALSO).
package main

import (
	"fmt"
	"io"

	"github.com/lanes-net/lanes/internal/manpage"
)

func writePolicyMan(w io.Writer, md string) {
	fmt.Fprintf(w, ".TH LANES-POLICY 5 \"\" \"lanes %s\" \"lanes manual\"\n", roff(version))
	fmt.Fprintln(w, `.SH NAME
lanes\-policy \- the lanes daemon's policy file, /etc/lanes/policy.yaml
.SH SYNOPSIS
.I /etc/lanes/policy.yaml
.SH DESCRIPTION
The policy says which interfaces lanes manages and which traffic and
tasks go in which lane: realtime > interactive (the default) > background.
It is one YAML file, owned by root, of at most 1 MiB; a key it leaves out
takes its default, which
.B lanes daemon \-\-print\-default\-policy
prints with a comment each.
.B lanes daemon \-\-check \-\-policy FILE
checks a file as the daemon loads it and names each error's line, field and
reason.
.B systemctl reload lanes
(or SIGHUP) applies an edited file whole, or refuses it and keeps the
running policy.
.PP
The rest of this page is the policy reference (docs/policy.md in the
source).`)
	manpage.Markdown(w, md)
	fmt.Fprintln(w, `.SH EXAMPLES
Example policies for three uses ship in
.IR /usr/share/doc/lanes/examples/ :
.TP
.I laptop.yaml
the default route in device-bottleneck mode; backups, sync and package
updates in background.
.TP
.I home\-server.yaml
a shaped uplink of known rate; off-site backups, torrents and updates in
background with a floor.
.TP
.I robot.yaml
the realtime lane for a control loop at SCHED_FIFO on its own CPU; log
uploads in background.
.PP
To use one:
.PP
.RS 4
.nf
sudo install \-m644 /usr/share/doc/lanes/examples/laptop.yaml /etc/lanes/policy.yaml
sudo lanes daemon \-\-check \-\-policy /etc/lanes/policy.yaml
sudo systemctl reload\-or\-restart lanes
.fi
.RE
.SH FILES
.TP
.I /etc/lanes/policy.yaml
the policy of the lanes.service unit (a conffile of the package)
.TP
.I /usr/share/doc/lanes/examples/
example policies
.SH SEE ALSO
lanes(1), lanes\-daemon(1), lanes\-run(1), lanes\-status(1), lanes\-monitor(1), systemctl(1)`)
}

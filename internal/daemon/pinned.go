// pinned.go: the OEM path's option. With Options.PinnedBPF the daemon's
// host runs on the classifier Android's loader pinned (datapath.Pinned,
// docs/android.md) instead of loading lanes' own.
package daemon

import "github.com/lanes-net/lanes/internal/datapath"

// pinned is the datapath's Pinned of the options, nil without PinnedBPF.
func (d *Daemon) pinned() *datapath.Pinned {
	if d.opts.PinnedBPF == "" {
		return nil
	}
	return &datapath.Pinned{Root: d.opts.PinnedBPF, Prefix: d.opts.PinnedPrefix}
}

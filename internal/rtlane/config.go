// config.go: the `realtime` section of the policy file.
//
//	realtime:
//	  enabled: true
//	  socket: /run/lanes/rt.sock
//	  rate: 1gbit           # link rate for transmit times; 0 = auto (sysfs speed)
//	  backlog: 6KB          # bound on released-but-not-yet-sent realtime bytes
//	  reserve: 1514B        # non-preemptible bytes ahead of us: frame on the wire, device queue
//	  overhead: 42B         # per-datagram bytes added on the wire (Ethernet+IPv4+UDP)
//	  max_queue: 10000      # packets; beyond this requests are refused
//	  max_queue_bytes: 8MiB # payload bytes lanes-rtd holds, allocated at its start
//	  client_requests: 2000 # requests/s of one uid not root (a connection: half)
//	  max_conns: 256        # client connections in total ...
//	  max_conns_per_uid: 16 # ... and of one uid; more are refused (too-many-connections)
//	  release_priority: 10  # SCHED_FIFO of lanes-rtd, the data path; 0 = normal
//	  follow_client_priority: true # lanes-rtd runs just above its clients
//	  pm_latency_us: -1     # CPU wake-up latency held while granted clients are connected
//	  grants:
//	    uids: [1000]
//	    gids: [20]
package rtlane

import (
	"github.com/lanes-net/lanes/internal/config"
)

// Grants says who may send on the realtime lane. Root always may.
type Grants struct {
	UIDs []config.UID `yaml:"uids"` // user names or uids
	GIDs []config.GID `yaml:"gids"` // group names or gids
}

// Allows reports whether a peer with this uid and these groups is granted.
func (g Grants) Allows(uid uint32, gids []uint32) bool {
	if uid == 0 {
		return true
	}
	for _, u := range g.UIDs {
		if uint32(u) == uid {
			return true
		}
	}
	for _, want := range g.GIDs {
		for _, have := range gids {
			if uint32(want) == have {
				return true
			}
		}
	}
	return false
}

// Config is the realtime lane's section of the policy.
type Config struct {
	Enabled bool   `yaml:"enabled"`
	Socket  string `yaml:"socket"`
	// Rate of the egress link, for T = size / rate. 0 = auto: the sysfs
	// speed of the interface the first destination routes through (1gbit if
	// unknown). The daemon may override it at run time (SetRate) with a
	// shaped uplink rate.
	Rate config.Rate `yaml:"rate"`
	// Backlog bounds the realtime bytes handed to the kernel and not yet on
	// the wire: releases are paced to keep under it (paper §3.3).
	Backlog config.Bytes `yaml:"backlog"`
	// Reserve is what cannot be preempted that is not ours: the rest of a
	// frame on the wire and the device queue (BQL limit). Added to T_now.
	Reserve config.Bytes `yaml:"reserve"`
	// Overhead is added to each payload for its time on the wire.
	Overhead config.Bytes `yaml:"overhead"`
	// MaxQueue bounds the number of queued packets.
	MaxQueue int `yaml:"max_queue"`
	// MaxQueueBytes bounds the queued payload bytes: lanes-rtd allocates
	// (and locks) this much at its start and never more. A connection not
	// root's holds at most 1/8 of it and of max_queue, a uid 1/4, and
	// root keeps 1/8 for itself (docs/realtime.md, "Shares and pacing").
	MaxQueueBytes config.Bytes `yaml:"max_queue_bytes"`
	// ClientRequests paces the requests of a uid not root, per second
	// (a burst of 64 ahead); one connection gets half. 0: not paced.
	ClientRequests int `yaml:"client_requests"`
	// ReleasePriority is the SCHED_FIFO priority of lanes-rtd, the data
	// path (0 = normal scheduling). Falls back to normal with a warning.
	// Best above the clients' own priorities: a thread below the client
	// that wakes it is woken on another CPU (docs/realtime.md, "The lane
	// above its clients").
	ReleasePriority int `yaml:"release_priority"`
	// FollowClientPriority: lanes-rtd runs at
	// max(release_priority, the client's highest real-time priority + 1),
	// followed once a second (clientprio.go); off: at release_priority.
	// Not applied when release_priority is 0.
	FollowClientPriority bool   `yaml:"follow_client_priority"`
	Grants               Grants `yaml:"grants"`
	// MaxConns and MaxConnsPerUID bound the client connections, in total
	// and of one uid (root included): each holds a descriptor in the
	// daemon or lanes-rtd, an ungranted one a goroutine.
	MaxConns       int `yaml:"max_conns"`
	MaxConnsPerUID int `yaml:"max_conns_per_uid"`
	// PMLatencyUS, when 0 or more, is the CPU wake-up latency (µs) the lane
	// requests through PM QoS (internal/pmqos) while at least one granted
	// client is connected: idle CPUs then stay out of deeper idle states,
	// so the reader thread a client's request wakes starts at once (what
	// cyclictest does while it measures). -1 (the default) leaves the
	// CPUs' idle states alone: holding costs power.
	PMLatencyUS int `yaml:"pm_latency_us"`
}

// DefaultSocket is where the daemon listens by default.
const DefaultSocket = "/run/lanes/rt.sock"

// DefaultConfig is the built-in realtime section: off, nobody but root
// granted.
func DefaultConfig() Config {
	return Config{
		Enabled:  false,
		Socket:   DefaultSocket,
		Rate:     0,
		Backlog:  4 * 1514,
		Reserve:  1514,
		Overhead: 42,
		MaxQueue: 10000,
		// 8 MiB: 67 ms of the queue at 1 Gbit/s; 128 max-size
		// datagrams for one connection, 32 of 65,507 bytes.
		MaxQueueBytes:  8 << 20,
		ClientRequests: 2000,
		// Above ordinary SCHED_FIFO tasks at 1..9, below kernel threads
		// and the lanes task policy's usual 50+.
		ReleasePriority:      10,
		FollowClientPriority: true,
		MaxConns:             256,
		MaxConnsPerUID:       16,
		PMLatencyUS:          -1,
	}
}

// Validate checks the section; errors name the field.
func (c Config) Validate() error {
	if c.Socket == "" {
		return config.Errorf("socket", "empty path")
	}
	if len(c.Socket) >= 108 {
		return config.Errorf("socket", "path longer than 107 bytes")
	}
	if c.Rate != 0 && c.Rate < 8000 {
		return config.Errorf("rate", "%v is below 8kbit", c.Rate)
	}
	if c.Backlog < 1514 {
		return config.Errorf("backlog", "%v is below one frame (1514B): nothing could be released", c.Backlog)
	}
	if c.Backlog > 16<<20 {
		return config.Errorf("backlog", "%v is above 16MiB", c.Backlog)
	}
	if c.Reserve > 16<<20 {
		return config.Errorf("reserve", "%v is above 16MiB", c.Reserve)
	}
	if c.Overhead > 256 {
		return config.Errorf("overhead", "%v is above 256B", c.Overhead)
	}
	if c.MaxQueue < 1 || c.MaxQueue > 1_000_000 {
		return config.Errorf("max_queue", "%d not in 1..1000000", c.MaxQueue)
	}
	if c.MaxQueueBytes < 1<<20 || c.MaxQueueBytes > 1<<30 {
		return config.Errorf("max_queue_bytes", "%v not in 1MiB..1GiB (a connection's share, 1/8, holds a datagram of 64KiB)", c.MaxQueueBytes)
	}
	if c.ClientRequests < 0 || c.ClientRequests > 1_000_000 {
		return config.Errorf("client_requests", "%d not in 0..1000000 (0: not paced)", c.ClientRequests)
	}
	if c.MaxConns < 1 || c.MaxConns > 4096 {
		return config.Errorf("max_conns", "%d not in 1..4096", c.MaxConns)
	}
	if c.MaxConnsPerUID < 1 || c.MaxConnsPerUID > c.MaxConns {
		return config.Errorf("max_conns_per_uid", "%d not in 1..max_conns (%d)", c.MaxConnsPerUID, c.MaxConns)
	}
	if c.ReleasePriority < 0 || c.ReleasePriority > 99 {
		return config.Errorf("release_priority", "%d not in 0..99", c.ReleasePriority)
	}
	if c.PMLatencyUS < -1 || c.PMLatencyUS > 1_000_000 {
		return config.Errorf("pm_latency_us", "%d not in -1..1000000 (-1: leave the CPUs' idle states alone)", c.PMLatencyUS)
	}
	return nil
}

#!/bin/bash
# scripts/system-vm-guest.sh: the steps of `make system-check`, run inside
# the booted Debian system (systemd as PID 1) from the check's own disk,
# mounted on /check, which also holds the package, three policies and a
# static leakcheck. Each step prints "== STEP <name>: PASS|FAIL" to the
# serial console, with what it saw; the system powers off at the end.
set -u
cd "$(mktemp -d)" # /check is read-only
export PATH=/usr/sbin:/usr/bin:/sbin:/bin SYSTEMD_PAGER= SYSTEMD_COLORS=0
fails=0

step() { # step NAME CMD...: run CMD, print its output and the verdict
  local name=$1; shift
  echo "== step $name: $*"
  if "$@" 2>&1 | sed 's/^/   /'; [ "${PIPESTATUS[0]}" = 0 ]; then
    echo "== STEP $name: PASS"
  else
    echo "== STEP $name: FAIL"; fails=$((fails + 1))
  fi
}

active() { # the unit is active (running) and ready: Type=notify reached
  systemctl show -p ActiveState,SubState,Type,NotifyAccess,MainPID lanes
  systemctl is-active lanes && systemctl show -p SubState --value lanes | grep -qx running
}

install_pkg() { # as the README says: apt install ./lanes_*.deb; nothing enabled or started by it
  cp /check/lanes_*.deb . && DEBIAN_FRONTEND=noninteractive apt-get install -y ./lanes_*.deb &&
    dpkg -s lanes | grep -E '^(Status|Version|Depends)' || return 1
  systemctl is-enabled lanes; systemctl is-active lanes
  ! systemctl --quiet is-enabled lanes && ! systemctl --quiet is-active lanes
}

# upgrade: apt install of a newer build of the package (Debian revision 2)
# while the daemon runs with an edited policy: the postinst restarts it, on
# the new binary (a new main process, started again, reporting the new
# version), with the admin's policy (a conffile) kept; a new lanes-rtd.
upgrade() {
  local pid ts sum rtd new e; e=$(errors); pid=$(systemctl show -p MainPID --value lanes)
  ts=$(systemctl show -p ExecMainStartTimestamp --value lanes); sum=$(sha256sum < /etc/lanes/policy.yaml)
  rtd=$(cat rtd.pid); new=$(dpkg-deb -f /check/upgrade/lanes_*.deb Version)
  echo "before: $(dpkg-query -W lanes), MainPID $pid, started $ts; lanes-rtd $rtd"
  mkdir -p up && cp /check/upgrade/lanes_*.deb up/ || return 1
  DEBIAN_FRONTEND=noninteractive apt-get install -y ./up/lanes_*.deb > apt.txt 2>&1; local rc=$?
  tail -n 4 apt.txt; [ $rc = 0 ] || return 1
  active >/dev/null || return 1
  local npid nts; npid=$(systemctl show -p MainPID --value lanes); nts=$(systemctl show -p ExecMainStartTimestamp --value lanes)
  echo "after: $(dpkg-query -W lanes), MainPID $npid, started $nts; exe $(readlink "/proc/$npid/exe")"
  lanes version | tee version.txt; lanes status | head -n 1 | tee status1.txt
  rtd_pid > rtd.pid && echo "lanes-rtd $rtd -> $(cat rtd.pid)"
  [ "$(dpkg-query -W -f '${Version}' lanes)" = "$new" ] && [ "$npid" != "$pid" ] && [ "$nts" != "$ts" ] &&
    [ "$(readlink "/proc/$npid/exe")" = /usr/bin/lanes ] && grep -qF " $new " version.txt && grep -qF "lanes $new " status1.txt &&
    [ "$(sha256sum < /etc/lanes/policy.yaml)" = "$sum" ] && echo "policy kept: $sum" &&
    [ "$(cat rtd.pid)" != "$rtd" ] && no_new_errors "$e"
}

purge() { # apt purge: the package, its unit and /var/lib/lanes gone, nothing of lanes running
  DEBIAN_FRONTEND=noninteractive apt-get purge -y lanes > apt.txt 2>&1; local rc=$?
  tail -n 2 apt.txt; dpkg-query -W -f '${Status}\n' lanes 2>&1
  [ $rc = 0 ] && ! dpkg-query -W -f '${Status}' lanes 2>/dev/null | grep -q installed &&
    [ ! -e /lib/systemd/system/lanes.service ] && [ ! -e /var/lib/lanes ] && ! pgrep -a -x lanes && ! pgrep -a -x lanes-rtd
}

enable_now() { systemctl enable --now lanes && systemctl is-enabled lanes; }

status() { lanes status; }

peer_up() { # a veth pair into a network namespace, an iperf3 server on two ports there
  ip netns add peer && ip link add vsc0 type veth peer name vsc1 netns peer &&
    ip addr add 10.99.0.1/24 dev vsc0 && ip link set vsc0 up &&
    ip -n peer addr add 10.99.0.2/24 dev vsc1 && ip -n peer link set vsc1 up && ip -n peer link set lo up &&
    ip netns exec peer iperf3 -s -D -p 5201 && ip netns exec peer iperf3 -s -D -p 5202 && sleep 1
}

# use_policy FILE RATE: install FILE and reload; the root class on vsc0
# then has RATE (95% of the policy's uplink).
use_policy() {
  install -m644 "$1" /etc/lanes/policy.yaml && systemctl reload lanes && sleep 2 && active >/dev/null &&
    tc class show dev vsc0 classid 1:1 | tee /dev/stderr | grep -q "rate $2"
}

kbits() { awk '/receiver/ { for (i = 1; i < NF; i++) if ($(i+1) == "Kbits/sec") print $i }'; }

transfer() { # a background transfer (port 5202, policy rule) next to a foreground one
  iperf3 -c 10.99.0.2 -p 5202 -t 8 -f k > bg.txt 2>&1 &
  local bg=$!
  iperf3 -c 10.99.0.2 -p 5201 -t 8 -f k > fg.txt 2>&1
  wait $bg
  local f b; f=$(kbits < fg.txt); b=$(kbits < bg.txt)
  echo "foreground $f kbit/s, background $b kbit/s (uplink 20 Mbit/s)"
  lanes status | grep -i -E 'vsc0|background|interactive' | head -8
  # Held: the background below a quarter of the foreground (under TCG the
  # foreground's rate is bounded by the emulated CPU, not the uplink).
  [ -n "$f" ] && [ -n "$b" ] && awk -v f="$f" -v b="$b" 'BEGIN { exit !(f > 1000 && b * 4 < f) }'
}

lane_run() { # lanes run: a lane group nested in the caller's unit cgroup
  lanes run --lane background -- sleep 600 >/dev/null 2>&1 & sleep 3
  local runpid; runpid=$(pgrep -x sleep | head -1); echo "$runpid" > run.pid; cat "/proc/$runpid/cgroup"
  grep -q '/lanes\..*\.background$' "/proc/$runpid/cgroup"
}

run_back() { # after the stop the process lives on, back in its own cgroup
  local runpid; runpid=$(cat run.pid); cat "/proc/$runpid/cgroup" && ! grep -q 'lanes\.' "/proc/$runpid/cgroup"; local rc=$?
  kill "$runpid"; return $rc
}

bad_reload() { # a broken policy: reload refused, the running policy kept
  cp /etc/lanes/policy.yaml good.yaml
  printf 'interfaces:\n  - name: vsc0\n    mode: nonsense\n' > /etc/lanes/policy.yaml
  systemctl reload lanes; local rc=$?
  # The daemon signalled directly refuses it too, logged at priority err.
  kill -HUP "$(systemctl show -p MainPID --value lanes)"; sleep 3
  install -m644 good.yaml /etc/lanes/policy.yaml
  journalctl -u lanes --no-pager -p err | tail -n 3 | tee err.txt
  [ $rc != 0 ] && active >/dev/null && tc class show dev vsc0 classid 1:1 | grep -q 'rate 9500Kbit' &&
    grep -q 'reload refused' err.txt
}

# The realtime lane (policy-rt.yaml: policy-10.yaml with realtime enabled
# and pm_latency_us 0; root is always granted): its data path, lanes-rtd,
# started by the daemon.
rtd_pid() { # the one lanes-rtd, waiting up to 10 s for the lane to start it
  local i pids
  for i in $(seq 20); do
    pids=$(pgrep -x lanes-rtd) && break; sleep 0.5
  done
  [ "$(echo "$pids" | wc -w)" = 1 ] || { echo "lanes-rtd processes: '$pids'" >&2; return 1; }
  echo "$pids"
}

rt_status() { # reload with the realtime lane; status names its data path
  use_policy /check/policy-rt.yaml 9500Kbit || return 1
  rtd_pid > rtd.pid || return 1
  lanes status -v | grep '^realtime:' | tee rt-status.txt
  grep -q '^realtime: path daemon (data path lanes-rtd;' rt-status.txt
}

rt_process() { # lanes-rtd in the unit's cgroup, at SCHED_FIFO 10 (release_priority), its memory locked
  local pid; pid=$(cat rtd.pid) || return 1
  cat "/proc/$pid/cgroup"; chrt -p "$pid" | tee chrt.txt; grep VmLck "/proc/$pid/status" | tee lck.txt
  systemctl status --no-pager lanes | sed -n '/CGroup:/,/^$/p' | tee cgls.txt
  # Nothing on its stderr (the journal): no warning (mlockall) or error.
  journalctl -u lanes -o cat --no-pager | grep 'lanes-rtd:' && return 1
  grep -qx '0::/system.slice/lanes.service' "/proc/$pid/cgroup" &&
    grep -q 'policy: SCHED_FIFO' chrt.txt && grep -q 'priority: 10$' chrt.txt &&
    ! grep -q -E ':[[:space:]]+0 kB' lck.txt && grep -q "$pid .*lanes-rtd" cgls.txt
}

# 10 datagrams with a deadline to a UDP listener in the namespace: admitted,
# received, through the realtime class. The deadline, 200 ms, leaves room
# for the emulated machine's delays (replies took up to 51 ms): the step
# checks the path under systemd, not its timing.
rt_send() {
  ip netns exec peer socat -u UDP-RECV:9000,bind=10.99.0.2 OPEN:rx.bin,creat,trunc &
  local rx=$!
  sleep 1
  tc -s class show dev vsc0 classid 1:11 | awk '/Sent/ { print $4 }' > pkts-before.txt
  lanes rt send --deadline 200ms --count 10 --size 100 --interval 10ms 10.99.0.2:9000 | tee send.txt
  local send=${PIPESTATUS[0]}
  sleep 1; kill "$rx"; wait "$rx" 2>/dev/null
  local got; got=$(stat -c %s rx.bin); echo "received $got bytes (10 x 100 sent)"
  tc -s class show dev vsc0 classid 1:11 | tee class.txt
  local before after; before=$(cat pkts-before.txt); after=$(awk '/Sent/ { print $4 }' class.txt)
  echo "realtime class 1:11: $before -> $after packets"
  [ "$send" = 0 ] && grep -q ': 10 admitted$' send.txt && ! grep -q -E 'refused|dropped' send.txt &&
    [ "$got" = 1000 ] && [ $((after - before)) -ge 10 ]
}

rt_follow() { # a client at SCHED_FIFO 20: lanes-rtd follows it to 21 (follow_client_priority), back to 10 once it has gone
  local pid i prio; pid=$(cat rtd.pid)
  chrt -f 20 lanes rt send --deadline 200ms --count 150 --interval 20ms --size 100 10.99.0.2:9001 > follow.txt &
  local cl=$!
  # The follower looks once a second: watch while the client runs (3 s).
  while kill -0 "$cl" 2>/dev/null; do chrt -p "$pid" | sed -n 's/.*priority: //p'; sleep 0.25; done | sort -n | uniq -c | tee during.txt
  wait "$cl"; local rc=$?; head -1 follow.txt
  for i in $(seq 12); do prio=$(chrt -p "$pid" | sed -n 's/.*priority: //p'); [ "$prio" = 10 ] && break; sleep 0.25; done
  echo "after the client: priority $prio"
  [ $rc = 0 ] && grep -q ' 21$' during.txt && ! grep -q -v -E ' (10|21)$' during.txt && [ "$prio" = 10 ]
}

rt_crash() { # lanes-rtd killed: the daemon's supervisor starts a new one, which serves
  local old new i; old=$(cat rtd.pid); kill -KILL "$old"
  for i in $(seq 20); do
    new=$(pgrep -x lanes-rtd) && [ "$new" != "$old" ] && break; sleep 0.5
  done
  echo "lanes-rtd pid $old -> $new"; echo "$new" > rtd.pid
  [ -n "$new" ] && [ "$new" != "$old" ] && rt_process >/dev/null && lanes status -v | grep '^realtime:' &&
    lanes rt send --deadline 200ms --count 3 --size 100 10.99.0.2:9001 | tee send2.txt && grep -q ': 3 admitted$' send2.txt
}

rt_stats() { # lanes rt stats: root's flow 1 sent 10, nothing dropped; the CPU wake-up latency held (pm_latency_us 0)
  lanes rt stats | tee stats.txt
  awk '$1 == "0" && $2 == "1" { ok = $3 == 10 && $5 == 10 && $7 == 0 && $8 == 0 } END { exit !ok }' stats.txt &&
    grep -q 'pm_latency_us): 0 µs held' stats.txt
}

errors() { journalctl --sync; journalctl -u lanes -p err -o cat --no-pager | wc -l; }

no_new_errors() { # no_new_errors N: the journal has no more than N errors of lanes
  local n; n=$(errors)
  [ "$n" -le "$1" ] || { journalctl -u lanes -p err --no-pager | tail -n $((n - $1)); return 1; }
}

restart() { # a new main process, ready again; nothing logged as an error
  local old e; old=$(systemctl show -p MainPID --value lanes); e=$(errors)
  systemctl restart lanes && active && [ "$(systemctl show -p MainPID --value lanes)" != "$old" ] && no_new_errors "$e"
}

rt_restart() { # the new daemon started a new lanes-rtd, in its cgroup, at SCHED_FIFO 10
  local old; old=$(cat rtd.pid)
  rtd_pid > rtd.pid && [ "$(cat rtd.pid)" != "$old" ] && rt_process >/dev/null && echo "lanes-rtd pid $old -> $(cat rtd.pid)"
}

stopped() { # nothing of lanes is left: qdiscs, BPF programs, cgroups, runtime files; no error logged
  local e; e=$(errors)
  systemctl stop lanes; local rc=0
  no_new_errors "$e" || rc=1
  systemctl is-active lanes && rc=1
  tc qdisc show dev vsc0 | tee /dev/stderr | grep -q -E 'htb|clsact|ingress' && rc=1
  bpftool prog show | grep -i lanes && rc=1
  find /sys/fs/bpf -mindepth 1 | grep . && rc=1
  find /sys/fs/cgroup -name 'lanes.*' | grep . && rc=1
  [ ! -e /run/lanes ] || { ls -la /run/lanes; rc=1; }
  pgrep -a -x lanes-rtd && rc=1
  /check/leakcheck || rc=1
  return $rc
}

journal() { # readable; its warnings and errors shown
  journalctl -u lanes --no-pager -p warning | tail -n 20
  journalctl -u lanes --no-pager | tail -n 8 && journalctl -u lanes --no-pager | grep -q 'Started lanes'
}

security() { # the exposure score inside the real system
  systemd-analyze security --no-pager lanes | tail -n 1 | tee security.txt
  grep -q 'Overall exposure level' security.txt
}

echo "== system $(. /etc/os-release && echo "$PRETTY_NAME"), kernel $(uname -r), systemd $(systemctl --version | head -1 | cut -d' ' -f2), PID 1 $(cat /proc/1/comm)"
step install install_pkg
step enable enable_now
step ready active
step status status
step peer peer_up
step reload use_policy /check/policy-20.yaml 19Mbit
step transfer transfer
step reload-changed use_policy /check/policy-10.yaml 9500Kbit
step reload-bad bad_reload
step realtime-status rt_status
step realtime-process rt_process
step realtime-send rt_send
step realtime-stats rt_stats
step realtime-follow rt_follow
step realtime-crash rt_crash
step lanes-run lane_run
step restart restart
step realtime-restart rt_restart
step upgrade upgrade
step stop stopped
step run-after-stop run_back
step journal journal
step security security
step purge purge
echo "== done: $fails failed"
systemctl poweroff

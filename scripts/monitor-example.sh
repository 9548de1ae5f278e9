#!/usr/bin/env bash
# monitor-example.sh SAMPLES [EVENTS]: the run behind docs/monitor-example.png
# (docs/monitor.md), as root: two cubic flows through a 40 Mbit/s TBF
# bottleneck between two fresh namespaces, sampled every 20 ms by lanes monitor
# into SAMPLES (and traced per ACK into EVENTS if given), drawn by lanes plot
# (SAMPLES without its extension .png and .svg). lanes is the one on PATH;
# make screenshots runs it.
A=tmdemoa$$; B=tmdemob$$
trap 'kill $(jobs -p); ip netns del $A; ip netns del $B' EXIT
ip netns add $A; ip netns add $B
ip -n $A link add va type veth peer name vb netns $B
ip -n $A addr add 10.77.0.1/24 dev va; ip -n $B addr add 10.77.0.2/24 dev vb
for n in $A $B; do ip -n $n link set lo up; done; ip -n $A link set va up; ip -n $B link set vb up
ip netns exec $A tc qdisc add dev va root tbf rate 40mbit burst 20k limit 200k
ip netns exec $B python3 -c "
import socket,threading
l=socket.socket();l.bind(('10.77.0.2',5201));l.listen()
def rd(c):
    while c.recv(1<<20): pass
while True:
    c,_=l.accept();threading.Thread(target=rd,args=(c,),daemon=True).start()" &
sleep 0.5
send='import socket,sys,time
s=socket.socket();s.setsockopt(socket.IPPROTO_TCP,socket.TCP_CONGESTION,b"cubic");s.connect(("10.77.0.2",5201))
end=time.time()+float(sys.argv[1]);b=b"x"*65536
while time.time()<end: s.sendall(b)'
ip netns exec $A python3 -c "$send" 8 &
(sleep 2; exec ip netns exec $A python3 -c "$send" 4) &
[ -n "${2:-}" ] && lanes monitor --events --probe --port 5201 --json --output "$2" --duration 9s &
lanes monitor --netns /var/run/netns/$A --port 5201 --interval 20ms --duration 9s --json --output "$1" >/dev/null
lanes plot --title "two cubic flows, 40 Mbit/s TBF bottleneck (lanes monitor, 20 ms samples)" "$1"

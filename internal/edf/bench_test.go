// bench_test.go: admit+enqueue+dequeue at constant queue depth for both
// implementations: `go test -run '^$' -bench . ./internal/edf/`.
package edf

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkAdmitDequeue keeps the queue at depth d: each iteration admits
// one packet at a random position (deadline uniform over the queued range)
// and dequeues the head, so one op = one admission test, one insertion and
// one dequeue.
func BenchmarkAdmitDequeue(b *testing.B) {
	for _, depth := range []int{10, 100, 1_000, 10_000, 100_000} {
		for _, impl := range []string{"reference", "tree"} {
			b.Run(fmt.Sprintf("%s/depth=%d", impl, depth), func(b *testing.B) {
				var q Queue
				if impl == "tree" {
					q = NewTree(depth + 1)
				} else {
					q = NewReference()
				}
				rng := rand.New(rand.NewPCG(1, 2))
				const tx, span = 1000, int64(1) << 40
				now := int64(0)
				next := func(id uint64) Packet {
					return Packet{ID: id, Deadline: now + span + rng.Int64N(span), Tx: tx}
				}
				// Prefill in deadline order (cheap for the O(n) reference too).
				for i := 0; i < depth; i++ {
					q.Admit(now, Packet{ID: uint64(i), Deadline: span + int64(i)*(span/int64(depth)), Tx: tx})
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if d := q.Admit(now, next(uint64(i))); !d.OK {
						b.Fatalf("refused: %v", d.Reason)
					}
					if _, late, _ := q.Pop(now); late {
						b.Fatal("late")
					}
					now += tx
				}
			})
		}
	}
}

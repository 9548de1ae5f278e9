// tree.go: the production EDF queue, an augmented AVL tree with O(log n)
// admission, insertion and dequeue whatever the queue length.
//
// Data structure: nodes in one slice addressed by int32 (no per-packet
// allocation in steady state, a free list reuses slots), ordered by
// (deadline, arrival sequence). Each node keeps, for its subtree S:
//
//	sum = sum_{k in S} T_k
//	min = min_{k in S} (D_k - C_k)  with C_k = sum of T over the nodes of S
//	                                 up to and including k (in order)
//
// so for the whole tree M_j = min_{k>=j}(D_k - C_k) - T_now. Combining a node
// x with children L and R: with c = L.sum + T_x,
//
//	sum = L.sum + T_x + R.sum
//	min = min(L.min, D_x - c, R.min - c)
package edf

import "math"

const (
	nilNode = int32(-1)
	inf     = int64(math.MaxInt64)
)

type node struct {
	p           Packet
	left, right int32
	height      int32
	sum         int64
	min         int64
}

// Tree is the O(log n) EDF queue. Use NewTree.
type Tree struct {
	nodes []node
	free  []int32
	root  int32
	n     int
}

// NewTree returns an empty tree; capacity is a hint for the expected depth.
func NewTree(capacity int) *Tree {
	return &Tree{nodes: make([]node, 0, capacity), root: nilNode}
}

func (t *Tree) Len() int { return t.n }

func (t *Tree) Backlog() int64 {
	if t.root == nilNode {
		return 0
	}
	return t.nodes[t.root].sum
}

func (t *Tree) height(i int32) int32 {
	if i == nilNode {
		return 0
	}
	return t.nodes[i].height
}

// update recomputes node i's height and augmentation from its children.
func (t *Tree) update(i int32) {
	x := &t.nodes[i]
	h := int32(0)
	var lsum, rsum int64
	m := inf
	if x.left != nilNode {
		l := &t.nodes[x.left]
		h, lsum, m = l.height, l.sum, l.min
	}
	c := lsum + x.p.Tx
	if v := x.p.Deadline - c; v < m {
		m = v
	}
	if x.right != nilNode {
		r := &t.nodes[x.right]
		if r.height > h {
			h = r.height
		}
		rsum = r.sum
		if v := r.min - c; v < m {
			m = v
		}
	}
	x.height = h + 1
	x.sum = c + rsum
	x.min = m
}

func (t *Tree) rotateRight(i int32) int32 {
	l := t.nodes[i].left
	t.nodes[i].left = t.nodes[l].right
	t.nodes[l].right = i
	t.update(i)
	t.update(l)
	return l
}

func (t *Tree) rotateLeft(i int32) int32 {
	r := t.nodes[i].right
	t.nodes[i].right = t.nodes[r].left
	t.nodes[r].left = i
	t.update(i)
	t.update(r)
	return r
}

// balance restores the AVL invariant at i (children already balanced) and
// returns the subtree's new root.
func (t *Tree) balance(i int32) int32 {
	t.update(i)
	x := &t.nodes[i]
	bf := t.height(x.left) - t.height(x.right)
	switch {
	case bf > 1:
		l := x.left
		if t.height(t.nodes[l].left) < t.height(t.nodes[l].right) {
			t.nodes[i].left = t.rotateLeft(l)
		}
		return t.rotateRight(i)
	case bf < -1:
		r := x.right
		if t.height(t.nodes[r].right) < t.height(t.nodes[r].left) {
			t.nodes[i].right = t.rotateRight(r)
		}
		return t.rotateLeft(i)
	}
	return i
}

// insert places node x (already filled) under subtree i, after every node
// with a deadline <= its own.
func (t *Tree) insert(i, x int32) int32 {
	if i == nilNode {
		return x
	}
	if t.nodes[x].p.Deadline < t.nodes[i].p.Deadline {
		t.nodes[i].left = t.insert(t.nodes[i].left, x)
	} else {
		t.nodes[i].right = t.insert(t.nodes[i].right, x)
	}
	return t.balance(i)
}

// removeMin detaches the leftmost node of subtree i; it returns the new
// subtree root and the detached node.
func (t *Tree) removeMin(i int32) (int32, int32) {
	if t.nodes[i].left == nilNode {
		return t.nodes[i].right, i
	}
	l, m := t.removeMin(t.nodes[i].left)
	t.nodes[i].left = l
	return t.balance(i), m
}

// Admit walks once from the root to the insertion point, collecting the
// prefix sum before p_ins (acc) and min_{k>=i}(D_k - C_k) (suf).
func (t *Tree) Admit(now int64, p Packet) Decision {
	if p.Tx <= 0 {
		return Decision{Reason: Invalid}
	}
	acc, suf := int64(0), inf
	for i := t.root; i != nilNode; {
		x := &t.nodes[i]
		var lsum int64
		if x.left != nilNode {
			lsum = t.nodes[x.left].sum
		}
		if p.Deadline < x.p.Deadline {
			// x and its right subtree come after p_ins.
			c := acc + lsum + x.p.Tx
			if v := x.p.Deadline - c; v < suf {
				suf = v
			}
			if x.right != nilNode {
				if v := t.nodes[x.right].min - c; v < suf {
					suf = v
				}
			}
			i = x.left
		} else {
			acc += lsum + x.p.Tx
			i = x.right
		}
	}
	// (4): T_ins <= M_i = suf - T_now.
	if suf != inf && p.Tx > suf-now {
		return Decision{Reason: Displaces}
	}
	// Own deadline, (1) for p_ins: M'_ins = D - T - (T_now + acc) >= 0.
	if p.Deadline-p.Tx-now-acc < 0 {
		return Decision{Reason: OwnDeadline}
	}
	var x int32
	if k := len(t.free); k > 0 {
		x = t.free[k-1]
		t.free = t.free[:k-1]
	} else {
		t.nodes = append(t.nodes, node{})
		x = int32(len(t.nodes) - 1)
	}
	t.nodes[x] = node{p: p, left: nilNode, right: nilNode}
	t.update(x)
	t.root = t.insert(t.root, x)
	t.n++
	return Decision{OK: true, Reason: Admitted}
}

func (t *Tree) Pop(now int64) (Packet, bool, bool) {
	if t.root == nilNode {
		return Packet{}, false, false
	}
	var m int32
	t.root, m = t.removeMin(t.root)
	p := t.nodes[m].p
	t.nodes[m] = node{}
	t.free = append(t.free, m)
	t.n--
	return p, p.Deadline-p.Tx-now < 0, true
}

func (t *Tree) Peek() (Packet, bool) {
	i := t.root
	if i == nilNode {
		return Packet{}, false
	}
	for t.nodes[i].left != nilNode {
		i = t.nodes[i].left
	}
	return t.nodes[i].p, true
}

// Slack returns M_1 = min_k (D_k - C_k) - T_now, the time the whole queue
// may still be delayed with every packet on time (negative: some packet is
// already going to be late), and false when the queue is empty.
func (t *Tree) Slack(now int64) (int64, bool) {
	if t.root == nilNode {
		return 0, false
	}
	return t.nodes[t.root].min - now, true
}

// slack returns M_j for every packet in order (for tests), O(n).
func (t *Tree) slack(now int64) []int64 {
	type pd struct{ d, tx int64 }
	var in []pd
	var walk func(i int32)
	walk = func(i int32) {
		if i == nilNode {
			return
		}
		walk(t.nodes[i].left)
		in = append(in, pd{t.nodes[i].p.Deadline, t.nodes[i].p.Tx})
		walk(t.nodes[i].right)
	}
	walk(t.root)
	out := make([]int64, len(in))
	var c int64
	for j := range in {
		c += in[j].tx
		out[j] = in[j].d - c - now
	}
	for j := len(out) - 2; j >= 0; j-- {
		if out[j+1] < out[j] {
			out[j] = out[j+1]
		}
	}
	return out
}

// check verifies the AVL and augmentation invariants (for tests).
func (t *Tree) check() error {
	var cnt int
	var err error
	var rec func(i int32) (h int32, sum, min int64)
	rec = func(i int32) (int32, int64, int64) {
		if i == nilNode || err != nil {
			return 0, 0, inf
		}
		cnt++
		x := t.nodes[i]
		lh, ls, lm := rec(x.left)
		rh, rs, rm := rec(x.right)
		if d := lh - rh; d > 1 || d < -1 {
			err = errorf("node %d unbalanced: %d vs %d", i, lh, rh)
		}
		if x.left != nilNode && t.nodes[x.left].p.Deadline > x.p.Deadline {
			err = errorf("node %d: left deadline larger", i)
		}
		if x.right != nilNode && t.nodes[x.right].p.Deadline < x.p.Deadline {
			err = errorf("node %d: right deadline smaller", i)
		}
		c := ls + x.p.Tx
		m := min(lm, x.p.Deadline-c)
		if x.right != nilNode {
			m = min(m, rm-c)
		}
		h := max(lh, rh) + 1
		if h != x.height || c+rs != x.sum || m != x.min {
			err = errorf("node %d: stale augmentation", i)
		}
		return h, c + rs, m
	}
	rec(t.root)
	if err == nil && cnt != t.n {
		err = errorf("count %d, want %d", cnt, t.n)
	}
	return err
}

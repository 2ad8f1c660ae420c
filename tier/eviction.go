package tier

// Eviction chooses which resident block a Manager evicts to make room.
// The Manager tells it of every resident block (Insert), every use (Access)
// and every block that leaves by other means (Remove); it asks for a
// victim only when one exists. All calls come from the owner goroutine.
//
// Slots are the Manager's slot numbers, 0 <= slot < the slots given to
// the constructor. Use NewLRU (the default) or NewS3FIFO, or write another
// (ARC, priority with TTL) to the same contract; make a fresh one per
// Manager.
type Eviction interface {
	// Insert adds a newly resident block.
	Insert(slot int, k Key)
	// Access records a use of a resident block (a Touch or a load).
	Access(slot int)
	// Remove forgets a resident block that left without being chosen as a
	// victim (its load failed, Reset).
	Remove(slot int)
	// Victim chooses a resident block for which protected returns false,
	// forgets it and returns it; ok is false if there is none.
	Victim(protected func(slot int) bool) (slot int, ok bool)
}

// nilSlot ends the intrusive lists below.
const nilSlot = -1

// ring is an intrusive doubly linked list over slot numbers: head is the
// most recent end, tail the oldest.
type ring struct {
	prev, next []int32
	in         []bool
	head, tail int32
	n          int
}

func newRing(slots int) ring {
	r := ring{prev: make([]int32, slots), next: make([]int32, slots), in: make([]bool, slots), head: nilSlot, tail: nilSlot}
	return r
}

func (r *ring) valid(s int) bool { return s >= 0 && s < len(r.in) }

func (r *ring) pushHead(s int32) {
	r.prev[s], r.next[s] = nilSlot, r.head
	if r.head != nilSlot {
		r.prev[r.head] = s
	} else {
		r.tail = s
	}
	r.head = s
	r.in[s] = true
	r.n++
}

func (r *ring) unlink(s int32) {
	if p := r.prev[s]; p != nilSlot {
		r.next[p] = r.next[s]
	} else {
		r.head = r.next[s]
	}
	if n := r.next[s]; n != nilSlot {
		r.prev[n] = r.prev[s]
	} else {
		r.tail = r.prev[s]
	}
	r.in[s] = false
	r.n--
}

// LRU evicts the least recently used unprotected block. Build it with
// NewLRU. Choose it by default: it is vLLM's default, and right when
// recent reuse predicts the next (a conversation's prefix). Choose S3FIFO
// when many blocks are used once (scans) and would flush the reused ones.
type LRU struct{ r ring }

// NewLRU returns an LRU policy over slots slots (the Manager calls it with
// its capacity).
func NewLRU(slots int) Eviction { return &LRU{r: newRing(max(slots, 0))} }

// Insert makes slot the most recently used block.
func (l *LRU) Insert(slot int, _ Key) {
	if l.r.valid(slot) && !l.r.in[slot] {
		l.r.pushHead(int32(slot))
	}
}

// Access makes slot the most recently used block.
func (l *LRU) Access(slot int) {
	if l.r.valid(slot) && l.r.in[slot] {
		l.r.unlink(int32(slot))
		l.r.pushHead(int32(slot))
	}
}

// Remove forgets slot.
func (l *LRU) Remove(slot int) {
	if l.r.valid(slot) && l.r.in[slot] {
		l.r.unlink(int32(slot))
	}
}

// Victim returns the least recently used unprotected block.
func (l *LRU) Victim(protected func(int) bool) (int, bool) {
	for s := l.r.tail; s != nilSlot; s = l.r.prev[s] {
		if !protected(int(s)) {
			l.r.unlink(s)
			return int(s), true
		}
	}
	return 0, false
}

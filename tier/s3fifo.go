package tier

// S3FIFO is the S3-FIFO eviction policy (Yang et al., SOSP 2023): new
// blocks enter a small FIFO queue (a tenth of the slots); a block used
// again before it leaves the small queue moves to the main queue, one that
// is not leaves the tier and its key is remembered in a ghost queue, so
// that it enters the main queue directly if it is stored again; the main
// queue evicts in FIFO order, giving each used block another round (up to
// three). Build it with NewS3FIFO.
//
// Choose it over LRU when many blocks are stored once and never reused (a
// flood of one-off prompts): they leave from the small queue without
// disturbing the reused blocks in the main queue. Choose LRU when reuse is
// mostly recent.
type S3FIFO struct {
	small, main ring
	freq        []uint8
	keys        []Key
	smallTarget int

	ghost     map[Key]struct{}
	ghostRing []Key
	ghostNext int
}

// NewS3FIFO returns an S3-FIFO policy over slots slots (the Manager calls
// it with its capacity).
func NewS3FIFO(slots int) Eviction {
	slots = max(slots, 0)
	return &S3FIFO{
		small: newRing(slots), main: newRing(slots),
		freq: make([]uint8, slots), keys: make([]Key, slots),
		smallTarget: max(slots/10, 1),
		ghost:       make(map[Key]struct{}, slots),
		ghostRing:   make([]Key, max(slots, 1)),
	}
}

func (p *S3FIFO) valid(s int) bool { return s >= 0 && s < len(p.freq) }

func (p *S3FIFO) resident(s int) bool { return p.small.in[s] || p.main.in[s] }

// Insert adds a block: to the main queue if its key is a ghost, else to
// the small queue.
func (p *S3FIFO) Insert(slot int, k Key) {
	if !p.valid(slot) || p.resident(slot) {
		return
	}
	p.keys[slot], p.freq[slot] = k, 0
	if _, ok := p.ghost[k]; ok {
		delete(p.ghost, k)
		p.main.pushHead(int32(slot))
		return
	}
	p.small.pushHead(int32(slot))
}

// Access counts a use, up to three.
func (p *S3FIFO) Access(slot int) {
	if p.valid(slot) && p.resident(slot) && p.freq[slot] < 3 {
		p.freq[slot]++
	}
}

// Remove forgets a block.
func (p *S3FIFO) Remove(slot int) {
	if !p.valid(slot) {
		return
	}
	switch {
	case p.small.in[slot]:
		p.small.unlink(int32(slot))
	case p.main.in[slot]:
		p.main.unlink(int32(slot))
	}
}

// remember puts k in the ghost queue, forgetting the oldest ghost when full.
func (p *S3FIFO) remember(k Key) {
	if old := p.ghostRing[p.ghostNext]; len(p.ghost) >= len(p.ghostRing) {
		delete(p.ghost, old)
	}
	p.ghostRing[p.ghostNext] = k
	p.ghostNext = (p.ghostNext + 1) % len(p.ghostRing)
	p.ghost[k] = struct{}{}
}

// Victim runs the S3-FIFO eviction loop, passing over protected blocks
// (rotated to the head of their queue). Every round either evicts, moves a
// block to the main queue or takes one use off a block, so the loop is
// bounded; past the bound it takes the oldest unprotected block, and
// reports none only when every block is protected.
func (p *S3FIFO) Victim(protected func(int) bool) (int, bool) {
	for range 8*(p.small.n+p.main.n) + 8 {
		if p.small.n > 0 && (p.small.n >= p.smallTarget || p.main.n == 0) {
			t := p.small.tail
			p.small.unlink(t)
			switch {
			case protected(int(t)):
				p.small.pushHead(t)
			case p.freq[t] > 0:
				p.freq[t] = 0
				p.main.pushHead(t)
			default:
				p.remember(p.keys[t])
				return int(t), true
			}
			continue
		}
		if p.main.n == 0 {
			return 0, false
		}
		t := p.main.tail
		p.main.unlink(t)
		switch {
		case protected(int(t)):
			p.main.pushHead(t)
		case p.freq[t] > 0:
			p.freq[t]--
			p.main.pushHead(t)
		default:
			return int(t), true
		}
	}
	// Every block the loop reached was protected: take any unprotected
	// one, oldest first, small queue first.
	for _, q := range []*ring{&p.small, &p.main} {
		for s := q.tail; s != nilSlot; s = q.prev[s] {
			if !protected(int(s)) {
				q.unlink(s)
				return int(s), true
			}
		}
	}
	return 0, false
}

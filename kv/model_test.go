package kv_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/pool"
)

// The model is a plain reference implementation of the manager's contract:
// blocks are objects, the eviction order is a scan for the smallest
// (priority, time listed), the cache is a map. It predicts every result and
// count of the real manager, which the test compares after every step,
// together with the manager's invariants, the events and the KV bytes every
// live sequence reads back.

type mblock struct {
	hash   kv.Hash
	ref    int
	pins   int
	prio   kv.Priority
	expiry int64 // 0: the priority does not decay
	listed bool
	tick   int // when it was listed or moved: the LRU position
}

type mseq struct {
	id      kv.SeqID
	blocks  []*mblock // blocks of the tokens, then of the lookahead slots
	tokens  []uint32
	look    int // lookahead slots
	key     kv.Key
	pending bool // released through the releaser, not drained yet
}

type model struct {
	bs, capacity, maxPinned int
	caching                 bool
	freed                   kv.FreedOrder
	high, low               float64
	hasher                  *kv.Hasher
	now                     func() int64

	poolFree int
	held     []*mblock // every block not in the pool
	cache    map[kv.Hash]*mblock
	tick     int
	seqs     []*mseq
	pending  []*mseq
	rejects  uint64     // doubled remote releases the next drain rejects
	dead     []kv.SeqID // released ids, for double releases
	st       kv.Stats
}

func (md *model) listedBlocks() (n, unhashed int) {
	for _, b := range md.held {
		if b.listed {
			n++
			if b.hash.IsZero() {
				unhashed++
			}
		}
	}
	return
}

func (md *model) push(b *mblock) { b.listed, b.tick = true, md.tick; md.tick++ }

func (md *model) victim() *mblock {
	var v *mblock
	for _, b := range md.held {
		if b.listed && (v == nil || b.prio < v.prio || (b.prio == v.prio && b.tick < v.tick)) {
			v = b
		}
	}
	return v
}

func (md *model) setPrio(b *mblock, p kv.Priority) {
	if b.prio == p {
		return
	}
	b.prio = p
	if b.listed {
		md.push(b)
	}
}

// decay mirrors the manager: expired priorities return to the default in
// order of expiry (the test never lets two expiries be equal).
func (md *model) decay() {
	now := md.now()
	for {
		var next *mblock
		for _, b := range md.held {
			if b.expiry != 0 && b.expiry <= now && (next == nil || b.expiry < next.expiry) {
				next = b
			}
		}
		if next == nil {
			return
		}
		next.expiry = 0
		md.setPrio(next, kv.DefaultPriority)
	}
}

func (md *model) remove(b *mblock) {
	md.held = slices.DeleteFunc(md.held, func(x *mblock) bool { return x == b })
	md.poolFree++
}

// evict reclaims the next victim for reuse.
func (md *model) evict() *mblock {
	v := md.victim()
	v.listed = false
	if !v.hash.IsZero() {
		delete(md.cache, v.hash)
		v.hash = kv.Hash{}
		md.st.Evictions++
	}
	v.prio, v.expiry = kv.DefaultPriority, 0
	return v
}

func (md *model) available() int {
	n, _ := md.listedBlocks()
	return md.poolFree + n
}

// fresh takes n blocks: from the pool first, then by eviction. hits are
// acquired between the two, as the manager does.
func (md *model) fresh(n int, hits []*mblock) []*mblock {
	k := min(n, md.poolFree)
	out := make([]*mblock, 0, n)
	for range k {
		b := &mblock{prio: kv.DefaultPriority}
		md.held = append(md.held, b)
		out = append(out, b)
	}
	md.poolFree -= k
	for _, b := range hits {
		md.acquire(b)
	}
	for range n - k {
		out = append(out, md.evict())
	}
	for _, b := range out {
		b.ref = 1
	}
	return out
}

func (md *model) acquire(b *mblock) {
	b.listed = false
	b.ref++
}

func (md *model) drop(b *mblock) {
	b.ref--
	if b.ref > 0 || b.pins > 0 {
		return
	}
	if !b.hash.IsZero() {
		md.push(b)
		return
	}
	if md.freed == kv.QueueFreedBehindCached {
		// A freed block is queued with the default priority (SetPriority:
		// "gets DefaultPriority back when it is evicted or freed").
		b.prio, b.expiry = kv.DefaultPriority, 0
		md.push(b)
		return
	}
	md.remove(b)
}

func (md *model) complete(s *mseq, i int, parent kv.Hash) kv.Hash {
	if !md.caching {
		return kv.Hash{}
	}
	h := md.hasher.Block(parent, s.tokens[i*md.bs:(i+1)*md.bs], s.key)
	if _, dup := md.cache[h]; !dup {
		md.cache[h] = s.blocks[i]
		s.blocks[i].hash = h
		md.st.Stored++
	}
	return h
}

func (md *model) admit(tokens []uint32, key kv.Key) (*mseq, int, error) {
	bs, n := md.bs, len(tokens)
	nblocks := (n + bs - 1) / bs
	if nblocks > md.capacity {
		md.st.Exhausted++
		return nil, 0, md.exhausted(nblocks, nblocks, md.available())
	}
	full := n / bs
	maxHit := 0
	if n > 0 {
		maxHit = (n - 1) / bs
	}
	var hits []*mblock
	listedHits := 0
	var parent kv.Hash
	for i := range full {
		if !md.caching {
			break
		}
		parent = md.hasher.Block(parent, tokens[i*bs:(i+1)*bs], key)
		if len(hits) == i && i < maxHit {
			if b, ok := md.cache[parent]; ok {
				hits = append(hits, b)
				if b.listed {
					listedHits++
				}
			}
		}
	}
	md.decay()
	need := nblocks - len(hits)
	if avail := md.available() - listedHits; need > avail {
		md.st.Exhausted++
		return nil, 0, md.exhausted(nblocks, need, avail)
	}
	s := &mseq{tokens: slices.Clone(tokens), key: key}
	s.blocks = append(slices.Clone(hits), md.fresh(need, hits)...)
	parent = kv.Hash{}
	for i := range full {
		if i < len(hits) {
			parent = hits[i].hash
			continue
		}
		parent = md.complete(s, i, parent)
	}
	if !md.caching {
		return s, 0, nil
	}
	md.st.QueryTokens += uint64(n)
	md.st.HitTokens += uint64(len(hits) * bs)
	md.st.QueryBlocks += uint64(full)
	md.st.HitBlocks += uint64(len(hits))
	return s, len(hits) * bs, nil
}

// parentOf returns the chain hash of block i-1 of s.
func (md *model) parentOf(s *mseq, i int) kv.Hash {
	var parent kv.Hash
	for k := range i {
		parent = md.hasher.Block(parent, s.tokens[k*md.bs:(k+1)*md.bs], s.key)
	}
	return parent
}

func (md *model) exhausted(blocks, need, avail int) error {
	return &kv.ExhaustedError{Blocks: blocks, Need: need, Available: avail, Capacity: md.capacity}
}

// extend appends tokens and leaves look lookahead slots: Append, Reserve
// and Accept.
func (md *model) extend(s *mseq, tokens []uint32, look int) error {
	bs := md.bs
	old := len(s.tokens)
	n := old + len(tokens)
	nblocks := (n + look + bs - 1) / bs
	if nblocks > md.capacity {
		md.st.Exhausted++
		return md.exhausted(nblocks, nblocks-len(s.blocks), md.available())
	}
	grow := max(0, nblocks-len(s.blocks))
	excess := max(0, len(s.blocks)-nblocks)
	cow := old%bs != 0 && (len(tokens) > 0 || look > 0) && s.blocks[old/bs].ref > 1
	need := grow
	if cow {
		need++
	}
	md.decay()
	if avail := md.available() + excess; need > avail {
		md.st.Exhausted++
		return md.exhausted(nblocks, need, avail)
	}
	if rolled := s.look - len(tokens) - look; rolled > 0 {
		md.st.RolledBackTokens += uint64(rolled)
	}
	for k := len(s.blocks) - 1; k >= nblocks; k-- {
		md.drop(s.blocks[k])
	}
	s.blocks = s.blocks[:min(len(s.blocks), nblocks)]
	fresh := md.fresh(need, nil)
	if cow {
		s.blocks[old/bs].ref--
		s.blocks[old/bs] = fresh[0]
		fresh = fresh[1:]
		md.st.CopyOnWrite++
	}
	s.blocks = append(s.blocks, fresh...)
	s.tokens = append(s.tokens, tokens...)
	for i := old / bs; i < n/bs; i++ {
		md.complete(s, i, md.parentOf(s, i))
	}
	s.look = look
	return nil
}

func (md *model) appendTokens(s *mseq, tokens []uint32) error {
	if len(tokens) == 0 {
		return nil
	}
	return md.extend(s, tokens, max(0, s.look-len(tokens)))
}

// canAdmit answers CanAdmit from the tokens alone.
func (md *model) canAdmit(tokens []uint32, key kv.Key) kv.Admission {
	n := len(tokens)
	hits, listedHits := 0, 0
	if md.caching && n > 0 {
		for _, b := range md.prefix(tokens[:(n-1)/md.bs*md.bs], key) {
			hits++
			if b.listed {
				listedHits++
			}
		}
	}
	a := kv.Admission{
		Blocks:       (n + md.bs - 1) / md.bs,
		CachedTokens: hits * md.bs,
		Available:    md.available() - listedHits,
	}
	a.Need = a.Blocks - hits
	switch {
	case a.Blocks > md.capacity:
		a.Status = kv.AdmitNever
	case a.Need > a.Available:
		a.Status = kv.AdmitLater
	default:
		a.Status = kv.AdmitOK
	}
	return a
}

// preempt releases s and answers for its readmission.
func (md *model) preempt(s *mseq) kv.Admission {
	for k := len(s.blocks) - 1; k >= 0; k-- {
		md.drop(s.blocks[k])
	}
	md.dead = append(md.dead, s.id)
	md.st.Preemptions++
	return md.canAdmit(s.tokens, s.key)
}

func (md *model) fork(s *mseq) *mseq {
	shared := s.blocks[:(len(s.tokens)+md.bs-1)/md.bs]
	for _, b := range shared {
		b.ref++
	}
	md.st.Forks++
	return &mseq{blocks: slices.Clone(shared), tokens: slices.Clone(s.tokens), key: s.key}
}

func (md *model) release(s *mseq) {
	for k := len(s.blocks) - 1; k >= 0; k-- {
		md.drop(s.blocks[k])
	}
	md.dead = append(md.dead, s.id)
	md.st.Releases++
}

func (md *model) prefix(tokens []uint32, key kv.Key) []*mblock {
	var out []*mblock
	if !md.caching {
		return nil
	}
	var parent kv.Hash
	for ; len(tokens) >= md.bs; tokens = tokens[md.bs:] {
		parent = md.hasher.Block(parent, tokens[:md.bs], key)
		b, ok := md.cache[parent]
		if !ok {
			break
		}
		out = append(out, b)
	}
	return out
}

func (md *model) pinned() int {
	n := 0
	for _, b := range md.held {
		if b.pins > 0 {
			n++
		}
	}
	return n
}

func (md *model) pin(tokens []uint32, key kv.Key) (int, error) {
	bs := md.prefix(tokens, key)
	added := 0
	for _, b := range bs {
		if b.pins == 0 {
			added++
		}
	}
	if md.pinned()+added > md.maxPinned {
		return 0, kv.ErrPinLimit
	}
	for _, b := range bs {
		b.pins++
		b.listed = false
	}
	return len(bs), nil
}

func (md *model) unpin(tokens []uint32, key kv.Key) int {
	n := 0
	for _, b := range md.prefix(tokens, key) {
		if b.pins == 0 {
			continue
		}
		n++
		b.pins--
		if b.pins == 0 && b.ref == 0 {
			md.push(b)
		}
	}
	return n
}

func (md *model) reset() int {
	n := 0
	for _, b := range slices.Clone(md.held) {
		if !b.listed {
			continue
		}
		if !b.hash.IsZero() {
			delete(md.cache, b.hash)
			n++
		}
		md.remove(b)
	}
	md.st.Cleared += uint64(n)
	return n
}

// pinCap is the number of blocks WithMaxPinned(share) lets pins hold.
func pinCap(share float64, capacity int) int {
	if share == 0 {
		return capacity
	}
	return int(share * float64(capacity))
}

func (md *model) drain() (released, rejected int) {
	for _, s := range md.pending {
		md.release(s)
		md.st.RemoteReleases++
		released++
	}
	md.pending = md.pending[:0]
	rejected = int(md.rejects)
	md.st.RejectedReleases += md.rejects
	md.rejects = 0
	md.decay()
	if md.high > 0 {
		listed, unhashed := md.listedBlocks()
		used := len(md.held) - unhashed
		if float64(used) >= md.high*float64(md.capacity) {
			low := int(md.low * float64(md.capacity))
			for used > low && listed > 0 {
				v := md.victim()
				if !v.hash.IsZero() {
					used--
					md.st.WatermarkEvictions++
				}
				md.evict()
				md.remove(v)
				listed--
			}
		}
	}
	return released, rejected
}

func (md *model) stats() kv.Stats {
	st := md.st
	listed, unhashed := md.listedBlocks()
	st.Free = md.poolFree + unhashed
	st.Cached = listed - unhashed
	st.InUse = len(md.held) - listed
	st.Pinned = md.pinned()
	st.Sequences, st.Reserved = 0, 0
	for _, s := range append(slices.Clone(md.seqs), md.pending...) {
		if s != nil {
			st.Sequences++
			st.Reserved += len(s.blocks) - (len(s.tokens)+md.bs-1)/md.bs
		}
	}
	return st
}

// byteReader hands out fuzz input, zeros once it runs out.
type byteReader struct{ b []byte }

func (r *byteReader) next() int {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return int(v)
}

func errClass(err error) string {
	if e := (*kv.ExhaustedError)(nil); errors.As(err, &e) {
		return fmt.Sprintf("%+v never=%v too-large=%v", *e, e.Never(), errors.Is(err, kv.ErrTooLarge))
	}
	for _, e := range []error{pool.ErrExhausted, kv.ErrStaleSequence, kv.ErrForeignSequence, kv.ErrUnknownSequence, kv.ErrInvalidSequence, kv.ErrPinLimit, pool.ErrInvalidArgument} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	if err != nil {
		return "other: " + err.Error()
	}
	return "nil"
}

// runModel replays ops decoded from data on the manager over p and on the
// model, and returns the first difference.
func runModel(p kv.BlockPool, data []byte) error {
	r := &byteReader{b: data}
	const bs = 4
	cfg := r.next()
	freed := kv.ReuseFreedFirst
	if cfg&1 != 0 {
		freed = kv.QueueFreedBehindCached
	}
	var high, low float64
	if cfg&2 != 0 {
		high, low = 0.9, 0.5
	}
	maxPinned := []float64{0, 0.25, 0.5, 0.001}[cfg>>2&3] // 0: no cap; 0.001: under one block, no pins
	caching := cfg&16 == 0
	var now int64 = 1
	clock := func() time.Time { return time.Unix(0, now) }
	cached := map[kv.Hash]bool{} // from the events
	var evErr error
	opts := []kv.Option{
		kv.WithTokensPerBlock(bs), kv.WithFreedOrder(freed), kv.WithMaxPinned(maxPinned), kv.WithClock(clock),
		kv.WithPrefixCaching(caching),
		kv.WithSubscriber(func(e *kv.Event) {
			switch e.Kind {
			case kv.BlockStored:
				if !caching {
					evErr = fmt.Errorf("a BlockStored event without prefix caching")
				}
				if len(e.Tokens) != len(e.Hashes)*bs {
					evErr = fmt.Errorf("stored %d hashes with %d tokens", len(e.Hashes), len(e.Tokens))
				}
				for _, h := range e.Hashes {
					cached[h] = true
				}
			case kv.BlockRemoved:
				for _, h := range e.Hashes {
					delete(cached, h)
				}
			case kv.AllBlocksCleared:
				clear(cached)
			}
		}),
	}
	if high > 0 {
		opts = append(opts, kv.WithWatermarks(high, low))
	}
	m, err := kv.New(p, opts...)
	if err != nil {
		return err
	}
	defer m.Close()
	rel, err := m.NewReleaser()
	if err != nil {
		return err
	}
	md := &model{
		bs: bs, capacity: p.Capacity(), maxPinned: pinCap(maxPinned, p.Capacity()),
		caching: caching, freed: freed, high: high, low: low, hasher: m.Hasher(), now: func() int64 { return now },
		poolFree: p.Capacity(), cache: map[kv.Hash]*mblock{},
	}
	// Prompts share a few system prefixes over a tiny alphabet, so that
	// hits, duplicates and evictions are frequent.
	systems := [][]uint32{{1, 2, 3, 0, 1, 2, 3, 0, 2}, {1, 2, 3, 0, 3, 3}, {2, 2}}
	keys := []kv.Key{{}, {Salt: "t1"}, {Adapter: "lora"}}
	tokens := func() []uint32 {
		t := slices.Clone(systems[r.next()%len(systems)])
		for range r.next() % 12 {
			t = append(t, uint32(r.next()%4))
		}
		return t
	}
	pick := func() (int, *mseq) {
		var live []int
		for i, s := range md.seqs {
			if s != nil {
				live = append(live, i)
			}
		}
		if len(live) == 0 {
			return -1, nil
		}
		i := live[r.next()%len(live)]
		return i, md.seqs[i]
	}
	bytes := func(h pool.Handle) []byte {
		b, err := p.Bytes(h)
		if err != nil {
			panic(err)
		}
		return b
	}
	write := func(s *mseq, from int) error {
		hs, err := m.Blocks(s.id)
		if err != nil {
			return err
		}
		for pos := from; pos < len(s.tokens); pos++ { // within the lookahead: the drafts' slots
			binary.LittleEndian.PutUint32(bytes(hs[pos/bs])[4*(pos%bs):], s.tokens[pos])
		}
		return nil
	}
	durations := 0
	for step := 0; len(r.b) > 0 && step < 400; step++ {
		op := r.next() % 16
		var what string
		var got, want error
		switch op {
		case 0, 1, 2: // admit
			toks, key := tokens(), keys[r.next()%len(keys)]
			if r.next()%8 == 0 { // longer than the pool: never admitted
				toks = append(toks, make([]uint32, bs*p.Capacity())...)
			}
			what = fmt.Sprintf("admit %v %+v", toks, key)
			a, err := m.CanAdmit(toks, key)
			if ma := md.canAdmit(toks, key); err != nil || a != ma {
				return fmt.Errorf("step %d %s: can admit %+v %v, model %+v", step, what, a, err, ma)
			}
			id, hit, err := m.Admit(toks, key)
			s, mhit, merr := md.admit(toks, key)
			got, want = err, merr
			if ok := err == nil; ok != (a.Status == kv.AdmitOK) || errors.Is(err, kv.ErrTooLarge) != (a.Status == kv.AdmitNever) {
				return fmt.Errorf("step %d %s: CanAdmit said %+v, Admit %v", step, what, a, err)
			}
			if err == nil && hit != a.CachedTokens {
				return fmt.Errorf("step %d %s: CanAdmit said %d cached tokens, Admit %d", step, what, a.CachedTokens, hit)
			}
			if err == nil && merr == nil {
				if hit != mhit {
					return fmt.Errorf("step %d %s: hit %d, model %d", step, what, hit, mhit)
				}
				s.id = id
				md.seqs = append(md.seqs, s)
				if err := write(s, hit); err != nil {
					return err
				}
			}
		case 3, 4: // append
			_, s := pick()
			if s == nil {
				continue
			}
			toks := make([]uint32, r.next()%7)
			for i := range toks {
				toks[i] = uint32(r.next() % 4)
			}
			what = fmt.Sprintf("append %v to %v", toks, s.id)
			old := len(s.tokens)
			got, want = m.Append(s.id, toks), md.appendTokens(s, toks)
			if got == nil && want == nil {
				if err := write(s, old); err != nil {
					return err
				}
			}
		case 5: // fork
			_, s := pick()
			if s == nil {
				continue
			}
			what = "fork " + s.id.String()
			id, err := m.Fork(s.id)
			if err != nil {
				return fmt.Errorf("step %d %s: %v", step, what, err)
			}
			ns := md.fork(s)
			ns.id = id
			md.seqs = append(md.seqs, ns)
		case 6: // release on the owner
			i, s := pick()
			if s == nil {
				continue
			}
			what = "release " + s.id.String()
			got = m.Release(s.id)
			md.release(s)
			md.seqs[i] = nil
		case 7: // release through the releaser
			i, s := pick()
			if s == nil {
				continue
			}
			what = "remote release " + s.id.String()
			got = rel.Release(s.id)
			s.pending = true
			md.pending = append(md.pending, s)
			md.seqs[i] = nil
			if r.next()%2 == 0 { // and a second time: rejected at the drain
				_ = rel.Release(s.id)
				md.rejects++
			}
		case 8: // release a released id again
			if len(md.dead) == 0 {
				continue
			}
			id := md.dead[r.next()%len(md.dead)]
			what = "double release " + id.String()
			got, want = m.Release(id), kv.ErrStaleSequence
			md.st.RejectedReleases++
		case 9: // drain
			what = "drain"
			d, err := m.Drain()
			mn, rejected := md.drain()
			if d.Released != mn || d.Rejected != rejected {
				return fmt.Errorf("step %d drain: released %d, rejected %d; model %d, %d", step, d.Released, d.Rejected, mn, rejected)
			}
			got = err
			if rejected > 0 {
				want = kv.ErrStaleSequence // only doubled releases reach a drain
			}
		case 10: // pin, unpin, priority, reset, time
			switch r.next() % 5 {
			case 0:
				toks, key := tokens(), keys[r.next()%len(keys)]
				what = fmt.Sprintf("pin %v", toks)
				n, err := m.Pin(toks, key)
				mn, merr := md.pin(toks, key)
				got, want = err, merr
				if n != mn {
					return fmt.Errorf("step %d %s: pinned %d, model %d", step, what, n, mn)
				}
			case 1:
				toks, key := tokens(), keys[r.next()%len(keys)]
				what = fmt.Sprintf("unpin %v", toks)
				n, err := m.Unpin(toks, key)
				if mn := md.unpin(toks, key); n != mn || err != nil {
					return fmt.Errorf("step %d %s: unpinned %d %v, model %d", step, what, n, err, mn)
				}
			case 2:
				_, s := pick()
				if s == nil || len(s.tokens) == 0 {
					continue
				}
				k := r.next() % ((len(s.tokens) + bs - 1) / bs) // not a lookahead block
				prio := kv.Priority(r.next() % 101)
				var d time.Duration
				if r.next()%2 == 0 {
					durations++
					d = time.Duration(r.next()*1000 + durations) // distinct expiries
				}
				what = fmt.Sprintf("priority %d for %v of block %d of %v", prio, d, k, s.id)
				got = m.SetPriority(s.id, k*bs, min((k+1)*bs, len(s.tokens)), prio, d)
				b := s.blocks[k]
				md.setPrio(b, prio)
				b.expiry = 0
				if d > 0 {
					b.expiry = now + int64(d)
				}
			case 3:
				what = "reset"
				n, err := m.Reset()
				if mn := md.reset(); n != mn || err != nil {
					return fmt.Errorf("step %d reset: %d %v, model %d", step, n, err, mn)
				}
			case 4:
				what = "tick"
				now += int64(r.next() * 1000)
			}
		case 11: // a zero or foreign id is rejected
			what = "foreign release"
			got, want = m.Release(kv.SeqID{}), kv.ErrUnknownSequence
			md.st.RejectedReleases++
		case 12: // reserve lookahead slots and write drafts into them
			_, s := pick()
			if s == nil {
				continue
			}
			n := r.next() % 9
			if r.next()%16 == 0 {
				n = bs * p.Capacity() // more than the pool: never
			}
			what = fmt.Sprintf("reserve %d for %v", n, s.id)
			got, want = m.Reserve(s.id, n), md.extend(s, nil, n)
			if got == nil && want == nil {
				for pos := len(s.tokens); pos < len(s.tokens)+n; pos++ {
					h, err := m.Block(s.id, pos)
					if err != nil {
						return fmt.Errorf("step %d %s: slot %d: %v", step, what, pos, err)
					}
					binary.LittleEndian.PutUint32(bytes(h)[4*(pos%bs):], 0xd1af7) // a draft's KV
				}
			}
		case 13: // accept some drafts, reject the rest
			_, s := pick()
			if s == nil {
				continue
			}
			toks := make([]uint32, r.next()%(s.look+2))
			for i := range toks {
				toks[i] = uint32(r.next() % 4)
			}
			what = fmt.Sprintf("accept %v of %d for %v", toks, s.look, s.id)
			old := len(s.tokens)
			got, want = m.Accept(s.id, toks), md.extend(s, toks, 0)
			if got == nil && want == nil {
				if err := write(s, old); err != nil {
					return err
				}
			}
		case 14: // preempt
			i, s := pick()
			if s == nil {
				continue
			}
			what = "preempt " + s.id.String()
			a, err := m.Preempt(s.id)
			ma := md.preempt(s)
			md.seqs[i] = nil
			if err != nil || a != ma {
				return fmt.Errorf("step %d %s: readmission %+v %v, model %+v", step, what, a, err, ma)
			}
			if ca, err := m.CanAdmit(s.tokens, s.key); err != nil || ca != a {
				return fmt.Errorf("step %d %s: readmission %+v, CanAdmit %+v %v", step, what, a, ca, err)
			}
		case 15: // look a prompt up
			toks, key := tokens(), keys[r.next()%len(keys)]
			what = fmt.Sprintf("lookup %v", toks)
			n, err := m.Lookup(toks, key)
			if mn := md.canAdmit(toks, key).CachedTokens; err != nil || n != mn {
				return fmt.Errorf("step %d %s: %d %v, model %d", step, what, n, err, mn)
			}
		}
		if errClass(got) != errClass(want) {
			return fmt.Errorf("step %d %s: error %v, model %v", step, what, got, want)
		}
		if err := m.Check(); err != nil {
			return fmt.Errorf("step %d %s: %v", step, what, err)
		}
		st, mst := m.Stats(), md.stats()
		st.Capacity, st.TokensPerBlock = 0, 0
		if st != mst {
			return fmt.Errorf("step %d %s:\nstats %+v\nmodel %+v", step, what, st, mst)
		}
		if st.Free+st.Cached+st.InUse != p.Capacity() {
			return fmt.Errorf("step %d %s: capacity identity broken: %+v", step, what, st)
		}
		real := m.CachedHashes()
		if !maps.Equal(real, cached) || len(real) != len(md.cache) {
			return fmt.Errorf("step %d %s: %d hashes cached, %d by events, %d by the model", step, what, len(real), len(cached), len(md.cache))
		}
		for h := range md.cache {
			if !real[h] {
				return fmt.Errorf("step %d %s: the model caches %v, the manager does not", step, what, h)
			}
		}
		if evErr != nil {
			return evErr
		}
		for _, s := range md.seqs {
			if s == nil {
				continue
			}
			hs, err := m.Blocks(s.id)
			if err != nil || len(hs) != len(s.blocks) {
				return fmt.Errorf("step %d %s: %v has %d blocks (%v), model %d", step, what, s.id, len(hs), err, len(s.blocks))
			}
			for pos, tok := range s.tokens {
				if v := binary.LittleEndian.Uint32(bytes(hs[pos/bs])[4*(pos%bs):]); v != tok {
					return fmt.Errorf("step %d %s: %v reads %d at token %d, wrote %d", step, what, s.id, v, pos, tok)
				}
			}
		}
	}
	return nil
}

// FuzzManager runs random admissions (asked with CanAdmit first), appends,
// forks, local and remote releases, double releases, pins, priorities,
// resets, drains, lookups, lookahead reservations with accepted and
// rejected drafts, and preemptions against the model, with and without
// prefix caching.
func FuzzManager(f *testing.F) {
	for _, seed := range modelSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := runModel(newPool(t, 12, 16), data); err != nil {
			t.Fatal(err)
		}
	})
}

// modelSeeds are fixed pseudo-random op streams, one per configuration
// byte, that the plain test runs and the fuzzer starts from.
func modelSeeds() [][]byte {
	var seeds [][]byte
	x := uint64(0x9e3779b97f4a7c15)
	for cfg := range 32 {
		b := []byte{byte(cfg)}
		for range 2000 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			b = append(b, byte(x))
		}
		seeds = append(seeds, b)
	}
	return seeds
}

func TestModel(t *testing.T) {
	for i, seed := range modelSeeds() {
		t.Run(fmt.Sprint("seed", i), func(t *testing.T) {
			if err := runModel(newPool(t, 12, 16), seed); err != nil {
				t.Fatal(err)
			}
		})
	}
}

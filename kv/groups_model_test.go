package kv_test

import (
	"errors"
	mrand "math/rand/v2"
	"testing"

	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/pool"
)

// The groups model: random operations on Groups, each checked against a
// reference that knows only the cache groups' definitions. After every
// step every group's accounting identity holds and Check passes; every
// admission's hit is the longest prefix every group can serve, computed
// by brute force from the groups' cached hashes; every sliding-window
// block table holds exactly the blocks of its window.

type gmSeq struct {
	id     kv.SeqID
	tokens []uint32
	look   int
	skip   []int // per group: expected blocks outside the window
}

type gmodel struct {
	t       testing.TB
	g       *kv.Groups
	bs      int
	kinds   []kv.GroupKind
	windows []int
	seqs    []*gmSeq
	next    uint32
	sts     []kv.Stats
}

// gmConfigs are the group sets the model runs: windows are set per run.
var gmConfigs = [][]kv.GroupKind{
	{kv.FullAttention, kv.SlidingWindow, kv.StateSpace},
	{kv.FullAttention, kv.SlidingWindow},
	{kv.SlidingWindow, kv.SlidingWindow},
	{kv.FullAttention, kv.SlidingWindow, kv.FullAttention},
}

func newGModel(t testing.TB, conf, w byte) *gmodel {
	md := &gmodel{t: t, bs: 4, kinds: gmConfigs[int(conf)%len(gmConfigs)]}
	specs := make([]kv.GroupSpec, len(md.kinds))
	for i, k := range md.kinds {
		s := kv.GroupSpec{Kind: k}
		switch k {
		case kv.FullAttention:
			s.Pool = newPool(t, 24, 16)
		case kv.SlidingWindow:
			s.Window = 1 + (int(w)+5*i)%14
			s.Pool = newPool(t, 10, 16)
		case kv.StateSpace:
			s.Pool = newPool(t, 3, 16)
		}
		md.windows = append(md.windows, s.Window)
		specs[i] = s
	}
	g, err := kv.NewGroups(specs, kv.WithTokensPerBlock(md.bs))
	if err != nil {
		t.Fatal(err)
	}
	md.g = g
	return md
}

func (md *gmodel) skipFor(group, computed int) int {
	if md.kinds[group] != kv.SlidingWindow {
		return 0
	}
	return max(0, computed-md.windows[group]+1) / md.bs
}

// refHit is the longest prefix, in blocks, that every group can serve.
func (md *gmodel) refHit(tokens []uint32) int {
	n := len(tokens)
	if n == 0 {
		return 0
	}
	for _, k := range md.kinds {
		if k == kv.StateSpace {
			return 0
		}
	}
	hashes := chain(md.g.Manager(0), tokens, md.bs)
	cached := make([]map[kv.Hash]bool, len(md.kinds))
	for i := range md.kinds {
		cached[i] = md.g.Manager(i).CachedHashes()
	}
	for hit := (n - 1) / md.bs; hit > 0; hit-- {
		ok := true
		for i, k := range md.kinds {
			from := 0
			if k == kv.SlidingWindow {
				need := max(1, (md.windows[i]-1+md.bs-1)/md.bs)
				from = max(0, hit-need)
			}
			for _, h := range hashes[from:hit] {
				ok = ok && cached[i][h]
			}
		}
		if ok {
			return hit
		}
	}
	return 0
}

func (md *gmodel) fresh(n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		md.next++
		out[i] = 1000 + md.next
	}
	return out
}

// bases are the prompts' shared beginnings, so that prompts share prefixes.
var bases = [3][]uint32{span(0, 64), cat(span(0, 12), span(500, 552)), cat(span(0, 4), span(700, 760))}

func (md *gmodel) step(op, a, b byte) {
	t := md.t
	pick := func() *gmSeq {
		if len(md.seqs) == 0 {
			return nil
		}
		return md.seqs[int(a)%len(md.seqs)]
	}
	exhausted := func(err error) {
		t.Helper()
		if !errors.Is(err, pool.ErrExhausted) {
			t.Fatalf("op %d: %v, want pool.ErrExhausted", op, err)
		}
	}
	switch op % 8 {
	case 0, 1: // admit
		tokens := append([]uint32(nil), bases[int(a)%3][:int(b)%41]...)
		want := md.refHit(tokens)
		id, hit, err := md.g.Admit(tokens, kv.Key{})
		if err != nil {
			exhausted(err)
			return
		}
		if hit != want*md.bs {
			t.Fatalf("admit %d tokens: hit %d tokens, the groups can serve %d blocks", len(tokens), hit, want)
		}
		s := &gmSeq{id: id, tokens: tokens, skip: make([]int, len(md.kinds))}
		for i := range md.kinds {
			s.skip[i] = md.skipFor(i, hit)
		}
		md.seqs = append(md.seqs, s)
	case 2: // append
		s := pick()
		if s == nil {
			return
		}
		toks := md.fresh(1 + int(b)%9)
		if err := md.g.Append(s.id, toks); err != nil {
			exhausted(err) // refused before any group changed, its window too
			return
		}
		md.slid(s)
		s.tokens = append(s.tokens, toks...)
		s.look = max(0, s.look-len(toks))
	case 3: // reserve
		s := pick()
		if s == nil {
			return
		}
		if err := md.g.Reserve(s.id, int(b)%6); err != nil {
			exhausted(err)
			return
		}
		md.slid(s)
		s.look = int(b) % 6
	case 4: // accept
		s := pick()
		if s == nil {
			return
		}
		toks := md.fresh(int(b) % (s.look + 2))
		if err := md.g.Accept(s.id, toks); err != nil {
			exhausted(err)
			return
		}
		md.slid(s)
		s.tokens = append(s.tokens, toks...)
		s.look = 0
	case 5: // fork
		s := pick()
		if s == nil {
			return
		}
		id, err := md.g.Fork(s.id)
		if err != nil {
			exhausted(err)
			return
		}
		md.seqs = append(md.seqs, &gmSeq{id: id, tokens: append([]uint32(nil), s.tokens...), skip: append([]int(nil), s.skip...)})
	case 6, 7: // release or preempt
		s := pick()
		if s == nil {
			return
		}
		var err error
		if op%8 == 6 {
			err = md.g.Release(s.id)
		} else {
			_, err = md.g.Preempt(s.id)
		}
		if err != nil {
			t.Fatal(err)
		}
		i := int(a) % len(md.seqs)
		md.seqs = append(md.seqs[:i], md.seqs[i+1:]...)
		if err := md.g.Release(s.id); !errors.Is(err, kv.ErrInvalidSequence) {
			t.Fatalf("second release: %v", err)
		}
	}
}

// slid records that an extension of s released the blocks before the
// window of its next token.
func (md *gmodel) slid(s *gmSeq) {
	for i := range md.kinds {
		s.skip[i] = max(s.skip[i], md.skipFor(i, len(s.tokens)))
	}
}

func (md *gmodel) check() {
	t := md.t
	t.Helper()
	if err := md.g.Check(); err != nil {
		t.Fatal(err)
	}
	md.sts = md.g.Stats(md.sts[:0])
	groupIdentity(t, md.sts)
	for _, s := range md.seqs {
		n, err := md.g.Tokens(s.id)
		if err != nil || n != len(s.tokens) {
			t.Fatalf("sequence %v: %d tokens (%v), want %d", s.id, n, err, len(s.tokens))
		}
		for i, k := range md.kinds {
			hs, err := md.g.Blocks(s.id, i)
			if err != nil {
				t.Fatal(err)
			}
			if k == kv.StateSpace {
				if len(hs) != 1 || hs[0].IsZero() {
					t.Fatalf("group %d: state blocks %v", i, hs)
				}
				continue
			}
			want := (len(s.tokens) + s.look + md.bs - 1) / md.bs
			if len(hs) != want || zeros(hs) != s.skip[i] {
				t.Fatalf("group %d (%v, window %d): %d tokens + %d slots in %d blocks, %d outside the window; want %d and %d",
					i, k, md.windows[i], len(s.tokens), s.look, len(hs), zeros(hs), want, s.skip[i])
			}
		}
	}
}

func runGroupsModel(t testing.TB, ops []byte) {
	if len(ops) < 2 {
		return
	}
	md := newGModel(t, ops[0], ops[1])
	ops = ops[2:]
	for ; len(ops) >= 3; ops = ops[3:] {
		md.step(ops[0], ops[1], ops[2])
		md.check()
	}
	for _, s := range md.seqs {
		if err := md.g.Release(s.id); err != nil {
			t.Fatal(err)
		}
	}
	md.seqs = nil
	md.check()
	for i, st := range md.sts {
		if st.InUse != 0 {
			t.Fatalf("group %d: %d blocks in use with no sequence", i, st.InUse)
		}
	}
	if err := md.g.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestGroupsModel(t *testing.T) {
	runs, steps := 200, 300
	if testing.Short() {
		runs = 20
	}
	for seed := range runs {
		r := mrand.New(mrand.NewPCG(uint64(seed), 17))
		ops := make([]byte, 2+3*steps)
		for i := range ops {
			ops[i] = byte(r.IntN(256))
		}
		runGroupsModel(t, ops)
	}
}

func FuzzGroups(f *testing.F) {
	f.Add([]byte{0, 3, 0, 0, 30, 0, 0, 30, 2, 0, 8, 6, 0, 0})
	f.Add([]byte{1, 7, 0, 1, 40, 5, 0, 0, 3, 0, 4, 4, 0, 2, 7, 0, 0})
	f.Add([]byte{2, 12, 0, 2, 33, 1, 2, 33, 2, 1, 9, 7, 1, 0})
	f.Add([]byte{3, 0, 0, 0, 40, 0, 0, 20, 6, 0, 0, 0, 1, 40})
	f.Fuzz(func(t *testing.T, ops []byte) { runGroupsModel(t, ops) })
}

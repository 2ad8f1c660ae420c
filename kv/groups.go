package kv

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/locus-go/locus/internal/invariants"
	"github.com/locus-go/locus/internal/nocopy"
	"github.com/locus-go/locus/internal/owner"
	"github.com/locus-go/locus/internal/typednil"
	"github.com/locus-go/locus/pool"
)

// GroupKind is the kind of layers a KV cache group serves; see GroupSpec.
type GroupKind uint8

const (
	// FullAttention layers attend to every earlier token: a sequence holds
	// a block for every TokensPerBlock tokens, and a prefix hit needs
	// every block of the prefix cached.
	FullAttention GroupKind = iota + 1
	// SlidingWindow layers attend to the last Window tokens: a sequence
	// holds only the blocks of its window (see WithSlidingWindow), and a
	// prefix hit needs only the window's blocks before the hit point.
	SlidingWindow
	// StateSpace layers (Mamba and its kin) keep one fixed-size state per
	// sequence, whatever its length: a sequence holds one state block.
	// States are not cached: a prefix hit is never served from a state
	// group (see Groups).
	StateSpace
)

// String returns the kind's name.
func (k GroupKind) String() string {
	switch k {
	case FullAttention:
		return "full-attention"
	case SlidingWindow:
		return "sliding-window"
	case StateSpace:
		return "state-space"
	}
	return fmt.Sprintf("GroupKind(%d)", uint8(k))
}

// GroupSpec describes one KV cache group of a hybrid model: the layers of
// one kind that share a block table, and the pool their blocks come from.
type GroupSpec struct {
	Kind GroupKind
	// Window is the sliding window in tokens, the token itself included,
	// of a SlidingWindow group (Mistral's and Gemma's sliding_window); it
	// must be 0 for the other kinds.
	Window int
	// Pool is the group's own pool: blocks of the size one block of this
	// group takes (for an attention group, BlockBytes of the group's
	// layers; for a state group, the bytes of one sequence's state in
	// those layers). Every group needs a pool of its own.
	Pool BlockPool
}

// Groups manages the KV cache of a hybrid model: several KV cache groups,
// each with a spec (FullAttention, SlidingWindow, StateSpace) and a block
// table per sequence, as vLLM's hybrid allocator manages them. A sequence
// of Groups is one sequence in every group: Admit, Append, Reserve,
// Accept, Fork, Release and Preempt act on all groups at once, all or
// nothing, and Blocks gives each group's block table.
//
// # One pool per group
//
// Each group has a pool of its own, and a Manager of its own over it for
// the attention groups. A pool hands out blocks of one size, and the
// groups' blocks differ in bytes: a state block holds a whole sequence's
// state while an attention block holds TokensPerBlock tokens of KV, and
// groups of different layer counts or head shapes differ too. vLLM
// shares one pool by making the page sizes uniform: it splits the layers
// into groups of equal layer counts and pads the attention block size
// until a page also holds a state, which wastes the padding and ties the
// block size to the model. Separate pools need no padding and keep each
// group's accounting exact (Free + Cached + InUse == Capacity per group);
// the price is that a group cannot borrow another group's free blocks,
// so size each pool for its group (BlockBytes, BlocksIn): full attention
// needs blocks for the whole context, a sliding-window group about
// Window/TokensPerBlock + 1 per running sequence plus one step's
// tokens, a state group one per running sequence.
//
// # Prefix hits
//
// A prefix hit is the longest prefix every group can serve, as vLLM's
// hybrid allocator defines it: full attention needs every block of the
// prefix cached; a sliding window needs the blocks covering the last
// Window tokens before the hit point, found right to left. Admit finds
// the longest prefix all groups agree on by lowering the hit point until
// no group lowers it further, and each group then holds exactly the
// cached blocks it needs (a sliding-window group none before its window).
// State groups cache no states: a model with a state group gets no prefix
// hits (Admit returns 0 cached tokens) though its attention groups still
// cache their full blocks. vLLM can cache a state at block boundaries
// for this; Groups does not.
//
// # Use
//
// Use Groups for a model whose layers are not all full attention
// (Gemma 2 and 3, gpt-oss, Jamba, the Qwen3-Next and Granite 4 hybrids).
// A model whose every layer is full attention, or whose every layer
// slides with one window, needs only a Manager (WithSlidingWindow).
// Groups is owner-only, like a Manager: one goroutine at a time calls
// it. It supports neither WithTiers nor WithSubscriber (NewGroups refuses
// them), nor pins, priorities or remote Releasers; use Managers directly
// for those.
//
// The zero Groups is not usable; make one with NewGroups. It must not be
// copied.
type Groups struct {
	_       nocopy.NoCopy
	id      uint32
	bs      int
	caching bool
	hasher  *Hasher
	gs      []group
	states  bool // has a state group

	seqs     []gseq
	freeSeqs []uint32
	live     int

	hashes []Hash // scratch: a prompt's chain hashes
	closed bool
}

// group is one KV cache group: a Manager for an attention group, or the
// accounting of a state group's pool.
type group struct {
	kind GroupKind
	m    *Manager

	p        BlockPool
	capacity int
	inUse    int
	st       Stats // a state group's counters
	one      [1]pool.Handle
}

// gseq is one sequence of Groups: its sequence in each attention group's
// manager and its state block in each state group, by group.
type gseq struct {
	gen    uint64 // odd while live
	tokens int
	ids    []SeqID
	states []pool.Handle
}

var errZeroGroups = fmt.Errorf("%w: zero or nil kv.Groups; make it with kv.NewGroups", pool.ErrClosed)

// NewGroups returns a manager of the KV cache groups specs, in that
// order; group i of every call is specs[i]. opts configure every group
// alike (WithTokensPerBlock, WithHash, WithPrefixCaching, WithFreedOrder,
// WithWatermarks, WithClock); WithTiers, WithSubscriber and
// WithSlidingWindow are refused (a window is a spec's). It fails with
// pool.ErrInvalidConfig for no spec, an unknown kind, a window that is
// missing or not wanted, a nil pool, a pool used twice or already in use,
// or an invalid option.
func NewGroups(specs []GroupSpec, opts ...Option) (*Groups, error) {
	bad := func(format string, a ...any) (*Groups, error) {
		return nil, fmt.Errorf("kv: %w: "+format, append([]any{pool.ErrInvalidConfig}, a...)...)
	}
	if len(specs) == 0 {
		return bad("no cache group")
	}
	cfg := defaults()
	for _, o := range opts {
		if typednil.Is(o) {
			return bad("nil option")
		}
		o.apply(&cfg)
	}
	switch {
	case len(cfg.tiers) > 0:
		return bad("cache groups with tiers")
	case cfg.subscriber != nil:
		return bad("cache groups with a subscriber")
	case cfg.window != 0:
		return bad("WithSlidingWindow for cache groups; set GroupSpec.Window")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	hasher, err := NewHasher(cfg.algo, cfg.seed)
	if err != nil {
		return nil, err
	}
	for i, s := range specs {
		switch {
		case s.Kind < FullAttention || s.Kind > StateSpace:
			return bad("group %d: %v", i, s.Kind)
		case s.Kind == SlidingWindow && s.Window <= 0:
			return bad("group %d: sliding window of %d tokens", i, s.Window)
		case s.Kind != SlidingWindow && s.Window != 0:
			return bad("group %d: a window of %d tokens for %v", i, s.Window, s.Kind)
		case typednil.Is(s.Pool):
			return bad("group %d: nil pool", i)
		}
	}
	g := &Groups{bs: cfg.tokensPerBlock, caching: cfg.caching, hasher: hasher, gs: make([]group, len(specs))}
	g.id = managerIDs.Next()
	for i, s := range specs {
		gr := &g.gs[i]
		gr.kind, gr.p = s.Kind, s.Pool
		if s.Kind == StateSpace {
			g.states = true
			err = g.claimState(gr)
		} else {
			gr.m, err = New(s.Pool, append(opts[:len(opts):len(opts)], WithSlidingWindow(s.Window))...)
		}
		if err != nil {
			g.closeGroups()
			return nil, fmt.Errorf("group %d: %w", i, err)
		}
	}
	return g, nil
}

// claimState makes gr the owner of its state pool.
func (g *Groups) claimState(gr *group) error {
	n := gr.p.Capacity()
	if n <= 0 || n > pool.MaxBlocks {
		return fmt.Errorf("kv: %w: pool of %d blocks", pool.ErrInvalidConfig, n)
	}
	if lp, ok := gr.p.(interface{ Live() int }); ok && lp.Live() != 0 {
		return fmt.Errorf("kv: %w: the pool has %d blocks allocated already", pool.ErrInvalidConfig, lp.Live())
	}
	if v := reflect.ValueOf(gr.p); v.Kind() == reflect.Pointer {
		if err := owner.Claim(&pools, v.Pointer(), gr); err != nil {
			return fmt.Errorf("kv: %w: the pool is %v by another open manager", pool.ErrInvalidConfig, err)
		}
	}
	gr.capacity = n
	gr.st.Capacity, gr.st.TokensPerBlock = n, g.bs
	return nil
}

// Len returns how many groups g manages.
func (g *Groups) Len() int {
	if g == nil {
		return 0
	}
	return len(g.gs)
}

// TokensPerBlock returns how many tokens an attention block holds, in
// every group.
func (g *Groups) TokensPerBlock() int {
	if g == nil {
		return 0
	}
	return g.bs
}

func (g *Groups) usable() error {
	switch {
	case g == nil || g.id == 0:
		return errZeroGroups
	case g.closed:
		return errClosedManager
	}
	return nil
}

// liveSeq returns id's slot when the Groups are usable and id names a live
// sequence of theirs; seqError says why not.
func (g *Groups) liveSeq(id SeqID) (uint32, bool) {
	if g != nil && !g.closed && id.mgr == g.id && id.idx < uint32(len(g.seqs)) && id.gen&1 == 1 && g.seqs[id.idx].gen == id.gen {
		return id.idx, true
	}
	return 0, false
}

// seqError says why liveSeq rejected id.
func (g *Groups) seqError(id SeqID) error {
	if err := g.usable(); err != nil {
		return err
	}
	in := id.idx < uint32(len(g.seqs))
	var cur uint64
	if in {
		cur = g.seqs[id.idx].gen
	}
	return seqErr(id, g.id, in, cur)
}

// Admit starts a sequence of prompt tokens in every group and returns its
// id and how many of its first tokens every group holds cached: the
// longest prefix hit all groups can serve (see Groups), never the block
// of the last prompt token. Each group reuses the cached blocks it needs
// for that hit and allocates the rest; a state group allocates the
// sequence's state block.
//
// Like Manager.Admit it is all or nothing across the groups: when a group
// cannot cover its blocks it changes nothing and returns that group's
// *ExhaustedError (matching pool.ErrExhausted, and ErrTooLarge when the
// prompt needs more blocks than the group's pool has), wrapped with the
// group's index.
func (g *Groups) Admit(tokens []uint32, key Key) (SeqID, int, error) {
	if err := g.usable(); err != nil {
		return SeqID{}, 0, err
	}
	n := len(tokens)
	g.hashTokens(tokens, key)
	hit := g.coordinate(n)
	for i := range g.gs {
		if err := g.gs[i].admissible(n, hit); err != nil {
			return SeqID{}, 0, fmt.Errorf("kv: group %d: %w", i, err)
		}
	}
	id, si := g.newSeq()
	s := &g.seqs[si]
	for i := range g.gs {
		gr := &g.gs[i]
		if gr.m == nil {
			if err := gr.alloc(&s.states[i]); err != nil {
				g.abandon(si)
				return SeqID{}, 0, fmt.Errorf("kv: group %d: %w", i, err)
			}
			continue
		}
		sid, _, err := gr.m.admitHashed(tokens, key, hit)
		if err != nil { // a pool that broke its contract: checked above
			g.abandon(si)
			return SeqID{}, 0, fmt.Errorf("kv: group %d: %w", i, err)
		}
		s.ids[i] = sid
	}
	s.tokens = n
	return id, hit * g.bs, nil
}

// hashTokens sets g.hashes to the chain hashes of the full blocks of
// tokens (none without prefix caching).
func (g *Groups) hashTokens(tokens []uint32, key Key) {
	g.hashes = g.hashes[:0]
	if g.caching {
		g.hashes = g.hasher.AppendHashes(g.hashes, tokens, g.bs, key)
	}
}

// coordinate gives every attention group the hashes in g.hashes and
// returns the longest prefix hit, in blocks, that every group can serve
// for a prompt of n tokens: it lowers the hit point until no group lowers
// it further. Each group's hit at a point is the longest it can serve up
// to that point, so the fixed point is the longest common one.
func (g *Groups) coordinate(n int) int {
	limit := 0
	if n > 0 {
		limit = (n - 1) / g.bs
	}
	if g.states || !g.caching {
		limit = 0 // states are not cached
	}
	for i := range g.gs {
		if m := g.gs[i].m; m != nil {
			m.hashes = append(m.hashes[:0], g.hashes...)
		}
	}
	for changed := true; changed && limit > 0; {
		changed = false
		for i := range g.gs {
			m := g.gs[i].m
			if m == nil {
				continue
			}
			if h, _, _ := m.hit(limit); h < limit {
				limit, changed = h, true
			}
		}
	}
	return limit
}

// admission is group gr's answer for a prompt of n tokens admitted with a
// prefix hit of hit blocks, which the group can serve.
func (gr *group) admission(n, hit int) Admission {
	if gr.m != nil {
		return gr.m.windowAdmission(n, hit)
	}
	a := Admission{Blocks: 1, Need: 1, Available: gr.capacity - gr.inUse}
	a.Status = AdmitOK
	if a.Available < 1 {
		a.Status = AdmitLater
	}
	return a
}

// admissible returns the *ExhaustedError Admit would fail with in group
// gr, counting it, or nil.
func (gr *group) admissible(n, hit int) error {
	a := gr.admission(n, hit)
	if a.Status == AdmitOK {
		return nil
	}
	if gr.m != nil {
		return gr.m.exhausted(a.Blocks, a.Need, a.Available)
	}
	gr.st.Exhausted++
	return &ExhaustedError{Blocks: a.Blocks, Need: a.Need, Available: a.Available, Capacity: gr.capacity}
}

// alloc takes a state block of group gr into *h.
func (gr *group) alloc(h *pool.Handle) error {
	if err := gr.p.AllocChunk(gr.one[:]); err != nil {
		return err
	}
	*h, gr.one[0] = gr.one[0], pool.Handle{}
	gr.inUse++
	return nil
}

// free returns state block *h of group gr to its pool and zeroes *h.
func (gr *group) free(h *pool.Handle) error {
	if h.IsZero() {
		return nil
	}
	gr.one[0] = *h
	err := gr.p.FreeChunk(gr.one[:])
	gr.one[0], *h = pool.Handle{}, pool.Handle{}
	gr.inUse--
	if err != nil {
		return fmt.Errorf("kv: the pool refused a state block: %w", err)
	}
	return nil
}

// CanAdmit says whether Admit(tokens, key) would succeed now, later, or
// never, without changing anything, as Manager.CanAdmit does for one
// group. Status is the worst of the groups' answers and CachedTokens the
// prefix hit every group can serve; Blocks, Need and Available are those
// of the group that decides the answer: the one furthest short of blocks,
// or, when every group can admit, the one with the fewest blocks to spare.
// Use it in a scheduler's admission loop as CanAdmit; Lookup gives the hit
// alone.
func (g *Groups) CanAdmit(tokens []uint32, key Key) (Admission, error) {
	if err := g.usable(); err != nil {
		return Admission{}, err
	}
	g.hashTokens(tokens, key)
	return g.admission(len(tokens), g.coordinate(len(tokens))), nil
}

// admission combines the groups' answers for a prompt of n tokens with a
// prefix hit of hit blocks.
func (g *Groups) admission(n, hit int) Admission {
	var worst Admission
	for i := range g.gs {
		a := g.gs[i].admission(n, hit)
		if i == 0 || a.Status > worst.Status ||
			(a.Status == worst.Status && a.Available-a.Need < worst.Available-worst.Need) {
			worst = a
		}
	}
	worst.CachedTokens = hit * g.bs
	return worst
}

// Lookup returns how many of the first tokens of a prompt every group
// holds cached: what Admit would return as its second result, without
// admitting. It changes nothing; use it to plan a chunked prefill as
// Manager.Lookup.
func (g *Groups) Lookup(tokens []uint32, key Key) (int, error) {
	if err := g.usable(); err != nil {
		return 0, err
	}
	g.hashTokens(tokens, key)
	return g.coordinate(len(tokens)) * g.bs, nil
}

// Append grows a live sequence by tokens in every group: a decode step or
// a prefill chunk. Sliding-window groups first release the blocks that
// fell out of the window; a state group's block does not change. It is
// all or nothing across the groups: when a group cannot cover its new
// blocks no group changes (no window slides either) and it returns that
// group's *ExhaustedError, wrapped with the group's index.
func (g *Groups) Append(id SeqID, tokens []uint32) error {
	return g.extend(id, tokens, 0, opAppend)
}

// Reserve makes a live sequence hold exactly n lookahead slots for draft
// tokens in every attention group, as Manager.Reserve does; the state
// groups hold one state block still (keeping the states of rejected
// drafts, if the engine needs them, is the engine's part). All or nothing
// across the groups.
func (g *Groups) Reserve(id SeqID, n int) error {
	if n < 0 {
		if _, ok := g.liveSeq(id); !ok {
			return g.seqError(id)
		}
		return fmt.Errorf("kv: %w: reserve %d slots", pool.ErrInvalidArgument, n)
	}
	return g.extend(id, nil, n, opReserve)
}

// Accept ends a speculative step in every attention group, as
// Manager.Accept does: it appends the accepted tokens into the reserved
// slots and gives back the rest. All or nothing across the groups.
func (g *Groups) Accept(id SeqID, accepted []uint32) error {
	return g.extend(id, accepted, 0, opAccept)
}

const (
	opAppend = iota
	opReserve
	opAccept
)

func (g *Groups) extend(id SeqID, tokens []uint32, look, op int) error {
	si, ok := g.liveSeq(id)
	if !ok {
		return g.seqError(id)
	}
	if op == opAppend && len(tokens) == 0 {
		return nil
	}
	s := &g.seqs[si]
	// Ask every group first, so that none changes when one cannot.
	for i := range g.gs {
		m := g.gs[i].m
		if m == nil {
			continue
		}
		mi := s.ids[i].idx
		if err := m.canExtend(mi, len(tokens), m.lookFor(mi, len(tokens), look, op)); err != nil {
			return fmt.Errorf("kv: group %d: %w", i, err)
		}
	}
	for i := range g.gs {
		m := g.gs[i].m
		if m == nil {
			continue
		}
		mi := s.ids[i].idx
		if err := m.extend(mi, tokens, m.lookFor(mi, len(tokens), look, op)); err != nil {
			return fmt.Errorf("kv: group %d: %w", i, err) // a pool that broke its contract
		}
	}
	s.tokens += len(tokens)
	return nil
}

// lookFor is the lookahead slots sequence si keeps after op appends ntok
// tokens: Append keeps what the tokens did not fill.
func (m *Manager) lookFor(si uint32, ntok, look, op int) int {
	if op == opAppend {
		return max(0, m.seqs[si].look-ntok)
	}
	return look
}

// Fork returns a new sequence that shares every attention block of id, as
// Manager.Fork does in each attention group, and has a copy of id's state
// block in each state group. It fails with an *ExhaustedError, changing
// nothing, when a state group has no free block for the copy.
func (g *Groups) Fork(id SeqID) (SeqID, error) {
	si, ok := g.liveSeq(id)
	if !ok {
		return SeqID{}, g.seqError(id)
	}
	for i := range g.gs {
		if gr := &g.gs[i]; gr.m == nil && gr.capacity-gr.inUse < 1 {
			gr.st.Exhausted++
			return SeqID{}, fmt.Errorf("kv: group %d: %w", i, &ExhaustedError{Blocks: 1, Need: 1, Capacity: gr.capacity})
		}
	}
	nid, ni := g.newSeq() // may move g.seqs
	s, ns := &g.seqs[si], &g.seqs[ni]
	for i := range g.gs {
		gr := &g.gs[i]
		if gr.m != nil {
			var err error
			if ns.ids[i], err = gr.m.Fork(s.ids[i]); err != nil {
				g.abandon(ni)
				return SeqID{}, fmt.Errorf("kv: group %d: %w", i, err)
			}
			continue
		}
		if err := gr.alloc(&ns.states[i]); err != nil {
			g.abandon(ni)
			return SeqID{}, fmt.Errorf("kv: group %d: %w", i, err)
		}
		if err := copyBlock(gr.p, ns.states[i], s.states[i]); err != nil {
			g.abandon(ni)
			return SeqID{}, fmt.Errorf("kv: group %d: %w", i, err)
		}
		gr.st.Forks++
	}
	ns.tokens = s.tokens
	return nid, nil
}

// Release ends a sequence in every group, as Manager.Release does (its
// full attention blocks stay cached), and frees its state blocks. A stale
// or foreign id fails with ErrInvalidSequence and changes nothing.
func (g *Groups) Release(id SeqID) error {
	si, ok := g.liveSeq(id)
	if !ok {
		return g.seqError(id)
	}
	return g.end(si, false)
}

// Preempt takes a running sequence off every group, as Manager.Preempt
// does (vLLM's recompute preemption: its full blocks stay cached, its
// state blocks are freed), and says what readmitting its tokens will
// take, combined over the groups as CanAdmit combines them. The id is
// stale afterwards; readmit with Admit.
func (g *Groups) Preempt(id SeqID) (Admission, error) {
	si, ok := g.liveSeq(id)
	if !ok {
		return Admission{}, g.seqError(id)
	}
	s := &g.seqs[si]
	n := s.tokens
	g.hashes = g.hashes[:0]
	for i := range g.gs {
		if m := g.gs[i].m; m != nil {
			g.hashes = append(g.hashes, m.seqs[s.ids[i].idx].hashes...)
			break
		}
	}
	err := g.end(si, true)
	return g.admission(n, g.coordinate(n)), err
}

// end releases (or preempts) sequence slot si in every group.
func (g *Groups) end(si uint32, preempt bool) error {
	s := &g.seqs[si]
	var errs error
	for i := range g.gs {
		gr := &g.gs[i]
		if gr.m != nil {
			var err error
			if preempt {
				_, err = gr.m.Preempt(s.ids[i])
			} else {
				err = gr.m.Release(s.ids[i])
			}
			errs = errors.Join(errs, err)
			s.ids[i] = SeqID{}
			continue
		}
		errs = errors.Join(errs, gr.free(&s.states[i]))
		if preempt {
			gr.st.Preemptions++
		} else {
			gr.st.Releases++
		}
	}
	g.freeSlot(si)
	return errs
}

// abandon undoes a half-made sequence: what its groups hold goes back.
func (g *Groups) abandon(si uint32) {
	s := &g.seqs[si]
	for i := range g.gs {
		gr := &g.gs[i]
		if gr.m != nil {
			if !s.ids[i].IsZero() {
				_ = gr.m.Release(s.ids[i])
				gr.m.st.Releases--
				s.ids[i] = SeqID{}
			}
			continue
		}
		_ = gr.free(&s.states[i])
	}
	g.freeSlot(si)
}

// newSeq takes a sequence slot and returns its id and index.
func (g *Groups) newSeq() (SeqID, uint32) {
	si := takeSlot(&g.freeSeqs, &g.seqs)
	s := &g.seqs[si]
	if s.ids == nil { // a new slot
		s.ids, s.states = make([]SeqID, len(g.gs)), make([]pool.Handle, len(g.gs))
	}
	s.gen++
	g.live++
	for i := range g.gs {
		if g.gs[i].m == nil {
			g.gs[i].st.Sequences++
		}
	}
	return SeqID{gen: s.gen, idx: si, mgr: g.id}, si
}

func (g *Groups) freeSlot(si uint32) {
	s := &g.seqs[si]
	s.gen++
	s.tokens = 0
	g.freeSeqs = append(g.freeSeqs, si)
	g.live--
	for i := range g.gs {
		if g.gs[i].m == nil {
			g.gs[i].st.Sequences--
		}
	}
}

// Tokens returns a live sequence's length in tokens.
func (g *Groups) Tokens(id SeqID) (int, error) {
	si, ok := g.liveSeq(id)
	if !ok {
		return 0, g.seqError(id)
	}
	return g.seqs[si].tokens, nil
}

// Blocks returns a copy of a live sequence's block table in group i: for
// an attention group as Manager.Blocks gives it (a sliding-window group
// has zero handles for the blocks out of its window), for a state group
// its one state block. A group out of range fails with
// pool.ErrInvalidArgument. AppendBlocks appends it to a reused slice
// instead.
func (g *Groups) Blocks(id SeqID, i int) ([]pool.Handle, error) {
	return g.AppendBlocks(nil, id, i)
}

// AppendBlocks appends a live sequence's block table in group i (see
// Blocks) to dst and returns the extended slice; on error it returns dst
// unchanged.
func (g *Groups) AppendBlocks(dst []pool.Handle, id SeqID, i int) ([]pool.Handle, error) {
	si, ok := g.liveSeq(id)
	if !ok {
		return dst, g.seqError(id)
	}
	if i < 0 || i >= len(g.gs) {
		return dst, fmt.Errorf("kv: %w: group %d of %d", pool.ErrInvalidArgument, i, len(g.gs))
	}
	s := &g.seqs[si]
	if m := g.gs[i].m; m != nil {
		return append(dst, m.seqs[s.ids[i].idx].blocks...), nil
	}
	return append(dst, s.states[i]), nil
}

// Block returns the block of group i that holds token t of a live
// sequence, as Manager.Block does (ErrOutsideWindow for a token a
// sliding-window group has let go); for a state group, the state block,
// whatever t. A group or token out of range fails with
// pool.ErrInvalidArgument.
func (g *Groups) Block(id SeqID, i, t int) (pool.Handle, error) {
	si, ok := g.liveSeq(id)
	if !ok {
		return pool.Handle{}, g.seqError(id)
	}
	if i < 0 || i >= len(g.gs) || t < 0 {
		return pool.Handle{}, fmt.Errorf("kv: %w: group %d of %d, token %d", pool.ErrInvalidArgument, i, len(g.gs), t)
	}
	s := &g.seqs[si]
	if m := g.gs[i].m; m != nil {
		return m.Block(s.ids[i], t)
	}
	return s.states[i], nil
}

// Stats appends each group's accounting to dst, in group order, and
// returns it; Free + Cached + InUse == Capacity holds for each. An
// attention group's is its Manager's Stats; a state group's counts its
// state blocks (never Cached), its sequences, forks, releases,
// preemptions and refusals. Owner only; pass the previous result back as
// dst to allocate nothing. In invariant builds (-race, -tags
// locus_invariants) it first checks every group and panics if one is
// inconsistent.
func (g *Groups) Stats(dst []Stats) []Stats {
	if g == nil || g.id == 0 {
		return dst
	}
	if invariants.Enabled && !g.closed {
		if err := g.check(); err != nil {
			panic("kv: invariant violated: " + err.Error())
		}
	}
	for i := range g.gs {
		gr := &g.gs[i]
		if gr.m != nil {
			dst = append(dst, gr.m.Stats())
			continue
		}
		st := gr.st
		st.Free, st.InUse = gr.capacity-gr.inUse, gr.inUse
		dst = append(dst, st)
	}
	return dst
}

// Drain is the owner's once-per-step call: it drains every group's
// Manager (priorities, watermarks, its pool; see Manager.Drain) and every
// state group's pool that has a Drain method. Errors are joined.
func (g *Groups) Drain() error {
	if err := g.usable(); err != nil {
		return err
	}
	var errs error
	for i := range g.gs {
		gr := &g.gs[i]
		if gr.m != nil {
			_, err := gr.m.Drain()
			errs = errors.Join(errs, err)
		} else if d, ok := gr.p.(interface{ Drain() (int, error) }); ok {
			_, err := d.Drain()
			errs = errors.Join(errs, err)
		}
	}
	return errs
}

// Close returns every block of every group to its pool, live sequences'
// included. Later calls fail with pool.ErrClosed; the pools stay open.
func (g *Groups) Close() error {
	if err := g.usable(); err != nil {
		return err
	}
	var errs error
	for si := range g.seqs {
		s := &g.seqs[si]
		for i := range g.gs {
			if gr := &g.gs[i]; gr.m == nil {
				errs = errors.Join(errs, gr.free(&s.states[i]))
			}
		}
	}
	errs = errors.Join(errs, g.closeGroups())
	g.closed = true
	g.seqs, g.freeSeqs = nil, nil
	return errs
}

// closeGroups closes the managers made so far and gives up the state
// pools' claims.
func (g *Groups) closeGroups() error {
	var errs error
	for i := range g.gs {
		gr := &g.gs[i]
		if gr.m != nil {
			errs = errors.Join(errs, gr.m.Close())
		} else if gr.capacity > 0 {
			if v := reflect.ValueOf(gr.p); v.Kind() == reflect.Pointer {
				owner.Release(&pools, v.Pointer(), gr)
			}
		}
	}
	return errs
}

// check verifies every group and that the groups agree on every sequence.
func (g *Groups) check() error {
	for i := range g.gs {
		gr := &g.gs[i]
		if gr.m == nil {
			continue
		}
		if err := gr.m.check(); err != nil {
			return fmt.Errorf("group %d: %w", i, err)
		}
		if gr.m.live != g.live {
			return fmt.Errorf("group %d: %d sequences, the groups have %d", i, gr.m.live, g.live)
		}
	}
	held := make([]int, len(g.gs))
	live := 0
	for si := range g.seqs {
		s := &g.seqs[si]
		if s.gen&1 == 0 {
			continue
		}
		live++
		for i := range g.gs {
			gr := &g.gs[i]
			if gr.m == nil {
				if s.states[i].IsZero() {
					return fmt.Errorf("group %d: sequence %d has no state block", i, si)
				}
				held[i]++
				continue
			}
			mi, ok := gr.m.liveSeq(s.ids[i])
			if !ok {
				return fmt.Errorf("group %d: sequence %d: %w", i, si, gr.m.seqError(s.ids[i]))
			}
			if t := gr.m.seqs[mi].tokens; t != s.tokens {
				return fmt.Errorf("group %d: sequence %d has %d tokens, the groups %d", i, si, t, s.tokens)
			}
		}
	}
	if live != g.live {
		return fmt.Errorf("%d live sequences, counted %d", live, g.live)
	}
	for i := range g.gs {
		if gr := &g.gs[i]; gr.m == nil && (held[i] != gr.inUse || gr.inUse > gr.capacity) {
			return fmt.Errorf("group %d: %d state blocks held, counted %d of %d", i, held[i], gr.inUse, gr.capacity)
		}
	}
	return nil
}

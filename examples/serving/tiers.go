package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"

	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/metrics"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/disk"
	"github.com/locus-go/locus/tier/host"
)

// Defaults of the tiered shared scenario (-tiers).
const (
	// tieredBlocks is the pool size -tiers uses when -blocks is not given:
	// small enough that conversations are evicted between their turns.
	tieredBlocks = 1024
	// tieredConversations is how many conversations -tiers chats in when
	// -conversations is not given.
	tieredConversations = 32
	// diskFile is the disk tier's file in the -disk directory. A later run
	// with the same directory and geometry serves its blocks again.
	diskFile = "serving-kv.tier"
)

// errTiers: the tiers' accounting does not balance at the end of a run.
var errTiers = errors.New("serving: tier accounting does not balance")

// offload is the shared scenario's offload tiers, behind the kv.Manager:
// a host tier and, with -disk, a disk tier behind it. A nil *offload is
// "no tiers": every method does nothing.
type offload struct {
	names []string
	tiers []*tier.Manager
	disk  *disk.Tier
}

// newOffload opens the tiers c asks for, with blockBytes-byte blocks (the
// pool's); nil without -tiers.
func newOffload(c config, blockBytes int) (*offload, error) {
	if !c.tiers {
		return nil, nil
	}
	st, err := host.New(blockBytes, c.hostBlocks) // one mapped region, exactly hostBlocks rows

	if err != nil {
		return nil, err
	}
	h, err := tier.New(st)
	if err != nil {
		return nil, errors.Join(err, st.Close())
	}
	o := &offload{names: []string{"host"}, tiers: []*tier.Manager{h}}
	if c.disk == "" {
		return o, nil
	}
	d, err := disk.Open(filepath.Join(c.disk, diskFile), blockBytes, c.diskBlocks)
	if err != nil {
		return nil, errors.Join(err, o.close())
	}
	// A disk waits on I/O: a few more copy workers than a host tier.
	dm, err := tier.New(d, tier.WithWorkers(min(2*runtime.GOMAXPROCS(0), 8)))
	if err != nil {
		return nil, errors.Join(err, d.Close(), o.close())
	}
	o.names, o.tiers, o.disk = append(o.names, "disk"), append(o.tiers, dm), d
	return o, nil
}

// options returns the kv.Manager options that put the tiers behind its
// pool, hottest first.
func (o *offload) options() []kv.Option {
	if o == nil {
		return nil
	}
	ts := make([]kv.Tier, len(o.tiers))
	for i, t := range o.tiers {
		ts[i] = t
	}
	return []kv.Option{kv.WithTiers(ts...)}
}

// register registers each tier's metrics, if metrics are on.
func (o *offload) register(obs *observer) error {
	if o == nil {
		return nil
	}
	var errs []error
	for i, t := range o.tiers {
		var opts []metrics.TierOption
		if t.Medium() == tier.MediumDisk {
			opts = append(opts, metrics.WithRecovery(o.disk))
		}
		errs = append(errs, obs.register(metrics.NewTier(o.names[i], t, opts...)))
	}
	return errors.Join(errs...)
}

// ready reports whether sequence id may run: its loads from the tiers are
// done (always, without tiers).
func (o *offload) ready(m *kv.Manager, id kv.SeqID) bool {
	if o == nil {
		return true
	}
	_, ready, err := m.Ready(id)
	return ready || err != nil // an error surfaces at the Append
}

// settle drains until no copy is in flight between the pool and the tiers:
// the blocks of unfinished stores stay held (within kv's InUse) until then.
func (o *offload) settle(m *kv.Manager) error {
	if o == nil {
		return nil
	}
	for m.Stats().InFlight > 0 {
		if _, err := m.Drain(); err != nil {
			return err
		}
		runtime.Gosched()
	}
	return nil
}

// report prints each tier's hits and checks its accounting: every slot
// counted once, no job or pin left, the manager's view of the tier (st)
// agreeing with the tier's own.
func (o *offload) report(out io.Writer, st kv.Stats) error {
	if o == nil {
		return nil
	}
	var errs []error
	if o.disk != nil {
		r := o.disk.Recovery()
		fmt.Fprintf(out, "tier disk: opened with %d blocks recovered, %d slots discarded, %d stale\n", r.Recovered, r.Discarded, r.Stale)
	}
	for i, t := range o.tiers {
		ks, ts := st.Tiers[i], t.Stats()
		fmt.Fprintf(out, "tier %s (%s): %d hit blocks (%d tokens), %d loaded; %d blocks stored, %d evicted; %d of %d slots hold blocks\n",
			o.names[i], ts.Medium, ks.HitBlocks, ks.HitTokens, ks.LoadedBlocks, ks.StoredBlocks, ts.Evictions, ts.Evictable, ts.Capacity)
		switch {
		case t.Check() != nil:
			errs = append(errs, fmt.Errorf("%w: tier %s: %v", errTiers, o.names[i], t.Check()))
		case ts.Free+ts.Evictable != ts.Capacity || ts.StorePending != 0 || ts.LoadPinned != 0 || ts.JobsInFlight != 0:
			errs = append(errs, fmt.Errorf("%w: tier %s: %+v", errTiers, o.names[i], ts))
		case ks.LoadedBlocks+ks.FailedBlocks > ks.HitBlocks || ks.FailedBlocks != 0 || ks.LoadedBlocks > ts.Loads:
			errs = append(errs, fmt.Errorf("%w: tier %s: kv counts %+v, the tier's %+v", errTiers, o.names[i], ks, ts))
		case ks.StoredBlocks != ts.Stores:
			errs = append(errs, fmt.Errorf("%w: tier %s: kv stored %d blocks, the tier %d", errTiers, o.names[i], ks.StoredBlocks, ts.Stores))
		}
	}
	return errors.Join(errs...)
}

// close closes the tiers, coldest first.
func (o *offload) close() error {
	if o == nil {
		return nil
	}
	var errs []error
	for i := len(o.tiers) - 1; i >= 0; i-- {
		errs = append(errs, o.tiers[i].Close())
	}
	return errors.Join(errs...)
}

// conversationRequest returns request i of a chat in c.conversations
// conversations: turn i / c.conversations of conversation
// i % c.conversations. Its prompt is the conversation's system prompt, then
// every earlier turn's text and answer (the tokens the serving loop
// generated: each is its position), then this turn's text; so each turn
// finds the previous one's blocks in the prefix cache, in the pool or, once
// the pool evicted them, in a tier.
func conversationRequest(c config, i int) *sharedRequest {
	v, turn := i%c.conversations, i/c.conversations
	tokens := make([]uint32, 0, maxTokens(c))
	sys := v % c.prompts
	for k := range c.system {
		tokens = append(tokens, uint32(sys<<20|k))
	}
	for u := 0; ; u++ {
		idx := u*c.conversations + v // the request of turn u
		for k := range c.prompt {
			tokens = append(tokens, uint32(1<<30|idx<<12|k))
		}
		if u == turn {
			break
		}
		for range c.decode/2 + idx%c.decode { // its answer
			tokens = append(tokens, uint32(len(tokens)))
		}
	}
	return &sharedRequest{tokens: tokens, left: c.decode/2 + i%c.decode, owner: i % c.workers}
}

// maxTokens bounds the tokens of a request of the shared scenario, its
// decode included.
func maxTokens(c config) int {
	turns := 1
	if c.conversations > 0 {
		turns = (c.requests + c.conversations - 1) / c.conversations
	}
	return c.system + turns*(c.prompt+c.decode/2+c.decode)
}

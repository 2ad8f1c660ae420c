package main

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/locus-go/locus"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/metrics"
	"github.com/locus-go/locus/pool"
)

// serveShared is the serving loop over a kv.Manager: every request's prompt
// is one of c.prompts system prompts of c.system tokens followed by its own
// c.prompt tokens; admissions reuse the cached system prompt, decoding
// appends a token per step, and workers release finished sequences through
// their own releaser. Admission asks CanAdmit (later or never); a decode
// step that finds the pool full preempts the latest admitted request,
// which is admitted again later and recomputes only what the prefix cache
// lost. It reports the blocks held against what the same requests would
// hold without sharing. With c.tiers, offload tiers keep what the pool
// evicts (see offload), and requests are the turns of c.conversations
// conversations.
func serveShared(out io.Writer, c config, o *observer) error {
	p, err := locus.Default(locus.WithBlocks(c.blocks))
	if err != nil {
		return err
	}
	defer p.Close()
	opts, err := o.managerOptions()
	if err != nil {
		return err
	}
	tiers, err := newOffload(c, p.BlockSize())
	if err != nil {
		return err
	}
	defer tiers.close() // after the manager's Close (defers run last first)
	opts = append(opts, tiers.options()...)
	m, err := kv.New(p, append(opts, kv.WithTokensPerBlock(c.tokensPerBlock))...)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := errors.Join(o.register(metrics.NewPool("kv", p)), o.register(metrics.NewManager("kv", m)), tiers.register(o)); err != nil {
		return err
	}

	done := make([]chan kv.SeqID, c.workers)
	var wg sync.WaitGroup
	for w := range done {
		done[w] = make(chan kv.SeqID, c.requests)
		r, err := m.NewReleaser()
		if err != nil {
			return err
		}
		wg.Go(func() {
			for id := range done[w] {
				// ... send the response, then release the sequence: one push.
				if err := r.Release(id); err != nil {
					fmt.Fprintln(out, "release:", err)
				}
			}
		})
	}

	blocksFor := func(tokens int) int { return (tokens + c.tokensPerBlock - 1) / c.tokensPerBlock }
	if need := blocksFor(maxTokens(c)); need > c.blocks {
		return fmt.Errorf("a request may need %d blocks, the pool has %d", need, c.blocks)
	}
	var active, waiting []*sharedRequest // running in admission order; preempted, to readmit first
	arrived, finished, steps, waits, preemptions := 0, 0, 0, 0, 0
	peakShared, peakPrivate := 0, 0
	var sumShared, sumPrivate int
	// preempt takes the latest admitted request off the pool (vLLM's
	// choice) and puts it first in line for readmission: its full blocks
	// stay cached, so readmission recomputes little.
	preempt := func() (*sharedRequest, error) {
		r := active[len(active)-1]
		active = active[:len(active)-1]
		if _, err := m.Preempt(r.id); err != nil {
			return nil, err
		}
		waiting = append([]*sharedRequest{r}, waiting...)
		preemptions++
		return r, nil
	}
	for finished < c.requests {
		steps++
		if _, err := m.Drain(); err != nil { // apply the workers' releases
			return err
		}
		if _, err := p.Drain(); err != nil { // publish the pool's counts for the metrics
			return err
		}
		// Admission, first come first served: preempted requests, then new
		// ones, while the pool can take them and leave a block per running
		// request for its next decode step.
		for k := 0; k < c.arrivals; k++ {
			if len(waiting) == 0 && arrived < c.requests {
				waiting = append(waiting, newRequest(c, arrived))
				arrived++
			}
			if len(waiting) == 0 {
				break
			}
			r := waiting[0]
			a, err := m.CanAdmit(r.tokens, kv.Key{})
			if err != nil {
				return err
			}
			if a.Status == kv.AdmitNever {
				return fmt.Errorf("step %d: a request of %d blocks can never fit", steps, a.Blocks)
			}
			if a.Status == kv.AdmitLater || (len(active) > 0 && a.Available-a.Need < len(active)) {
				waits++
				break // later: running requests will finish or make room
			}
			if r.id, _, err = m.Admit(r.tokens, kv.Key{}); err != nil {
				return fmt.Errorf("step %d: admit: %w", steps, err)
			}
			waiting = waiting[1:]
			active = append(active, r)
		}
		// Decode: a token per running request; when the pool is full,
		// preempt the latest admitted request (this one, if it is the
		// latest) instead of failing.
	decode:
		for i := 0; i < len(active); {
			r := active[i]
			if r.left == 0 {
				done[r.owner] <- r.id
				finished++
				active = append(active[:i], active[i+1:]...)
				continue
			}
			if !tiers.ready(m, r.id) {
				i++ // its blocks are loading from a tier: it runs after a later Drain
				continue
			}
			tok := uint32(len(r.tokens))
			for {
				err := m.Append(r.id, []uint32{tok})
				if err == nil {
					break
				}
				if !errors.Is(err, pool.ErrExhausted) || errors.Is(err, kv.ErrTooLarge) {
					return fmt.Errorf("step %d: decode: %w", steps, err)
				}
				victim, err := preempt()
				if err != nil {
					return err
				}
				if victim == r {
					break decode
				}
			}
			r.tokens = append(r.tokens, tok)
			r.left--
			i++
		}
		o.step() // this step's cache events go out as one batch
		private := 0
		for _, r := range active {
			private += blocksFor(len(r.tokens))
		}
		held := m.Stats().InUse
		peakShared, peakPrivate = max(peakShared, held), max(peakPrivate, private)
		sumShared += held
		sumPrivate += private
		if len(active) == 0 {
			runtime.Gosched() // waiting for the workers' releases
		}
	}
	for _, d := range done {
		close(d)
	}
	wg.Wait()
	if _, err := m.Drain(); err != nil {
		return err
	}
	if err := tiers.settle(m); err != nil {
		return err
	}
	if _, err := p.Drain(); err != nil {
		return err
	}
	st := m.Stats()
	fmt.Fprintf(out, "served %d requests sharing %d system prompts of %d tokens in %d steps (%d admissions waited, %d preemptions)\n",
		c.requests, c.prompts, c.system, steps, waits, preemptions)
	fmt.Fprintf(out, "blocks held at peak: %d shared vs %d without sharing (%.0f %% saved); mean %.0f vs %.0f\n",
		peakShared, peakPrivate, 100*(1-float64(peakShared)/float64(peakPrivate)),
		float64(sumShared)/float64(steps), float64(sumPrivate)/float64(steps))
	fmt.Fprintf(out, "prefix cache: %d of %d prompt tokens hit (%.0f %%), %d blocks cached, %d evicted\n",
		st.HitTokens, st.QueryTokens, 100*float64(st.HitTokens)/float64(st.QueryTokens), st.Cached, st.Evictions)
	fmt.Fprintf(out, "sequences: %d released remotely, %d rejected; %d live, %d blocks in use\n",
		st.RemoteReleases, st.RejectedReleases, st.Sequences, st.InUse)
	if err := tiers.report(out, st); err != nil {
		return err
	}
	if st.InUse != 0 || st.Sequences != 0 || st.RejectedReleases != 0 || st.RemoteReleases != uint64(c.requests) ||
		st.Preemptions != uint64(preemptions) {
		return fmt.Errorf("accounting does not balance: %+v", st)
	}
	return nil
}

// sharedRequest is a request of the shared scenario. It keeps its tokens
// (prompt, then what it generated) so that it can be admitted again after a
// preemption.
type sharedRequest struct {
	id     kv.SeqID
	tokens []uint32
	left   int // decode steps to go
	owner  int // worker
}

// newRequest returns request i: system prompt i % c.prompts and its own
// text, with its decode length.
func newRequest(c config, i int) *sharedRequest {
	if c.conversations > 0 {
		return conversationRequest(c, i)
	}
	tokens := make([]uint32, c.system+c.prompt, c.system+c.prompt+c.decode/2+c.decode)
	sys := i % c.prompts
	for k := range c.system {
		tokens[k] = uint32(sys<<20 | k) // system prompt sys
	}
	for k := range c.prompt {
		tokens[c.system+k] = uint32(1<<30 | i<<12 | k) // the request's own text
	}
	return &sharedRequest{tokens: tokens, left: c.decode/2 + i%c.decode, owner: i % c.workers}
}

package main

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/locus-go/locus"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/metrics"
)

// serveShared is the serving loop over a kv.Manager: every request's prompt
// is one of c.prompts system prompts of c.system tokens followed by its own
// c.prompt tokens; admissions reuse the cached system prompt, decoding
// appends a token per step, and workers release finished sequences through
// their own releaser. It reports the blocks held against what the same
// requests would hold without sharing.
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
	m, err := kv.New(p, append(opts, kv.WithTokensPerBlock(c.tokensPerBlock))...)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := errors.Join(o.register(metrics.NewPool("kv", p)), o.register(metrics.NewManager("kv", m))); err != nil {
		return err
	}

	type request struct {
		id    kv.SeqID
		n     int // tokens
		left  int // decode steps to go
		owner int // worker
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
	prompt := make([]uint32, c.system+c.prompt)
	var active []request
	admitted, finished, steps, waits := 0, 0, 0, 0
	peakShared, peakPrivate := 0, 0
	var sumShared, sumPrivate int
	for finished < c.requests {
		steps++
		if _, err := m.Drain(); err != nil { // apply the workers' releases
			return err
		}
		if _, err := p.Drain(); err != nil { // publish the pool's counts for the metrics
			return err
		}
		for k := 0; k < c.arrivals && admitted < c.requests; k++ {
			sys := admitted % c.prompts
			for i := range c.system {
				prompt[i] = uint32(sys<<20 | i) // system prompt sys
			}
			for i := range c.prompt {
				prompt[c.system+i] = uint32(1<<30 | admitted<<12 | i) // the request's own text
			}
			left := c.decode/2 + admitted%c.decode
			// Admit only what the pool can carry to the end, as serve does.
			if st := m.Stats(); st.Free+st.Cached < blocksFor(len(prompt)+left)+len(active) {
				waits++
				break
			}
			id, _, err := m.Admit(prompt, kv.Key{})
			if err != nil {
				return fmt.Errorf("step %d: admit: %w", steps, err)
			}
			active = append(active, request{id: id, n: len(prompt), left: left, owner: admitted % c.workers})
			admitted++
		}
		kept := active[:0]
		for _, r := range active {
			if r.left == 0 {
				done[r.owner] <- r.id
				finished++
				continue
			}
			if err := m.Append(r.id, []uint32{uint32(r.n)}); err != nil {
				return fmt.Errorf("step %d: decode: %w", steps, err)
			}
			r.n++
			r.left--
			kept = append(kept, r)
		}
		active = kept
		o.step() // this step's cache events go out as one batch
		private := 0
		for _, r := range active {
			private += blocksFor(r.n)
		}
		held := m.Stats().InUse
		peakShared, peakPrivate = max(peakShared, held), max(peakPrivate, private)
		sumShared += held
		sumPrivate += private
	}
	for _, d := range done {
		close(d)
	}
	wg.Wait()
	if _, err := m.Drain(); err != nil {
		return err
	}
	if _, err := p.Drain(); err != nil {
		return err
	}
	st := m.Stats()
	fmt.Fprintf(out, "served %d requests sharing %d system prompts of %d tokens in %d steps (%d admissions waited)\n",
		c.requests, c.prompts, c.system, steps, waits)
	fmt.Fprintf(out, "blocks held at peak: %d shared vs %d without sharing (%.0f %% saved); mean %.0f vs %.0f\n",
		peakShared, peakPrivate, 100*(1-float64(peakShared)/float64(peakPrivate)),
		float64(sumShared)/float64(steps), float64(sumPrivate)/float64(steps))
	fmt.Fprintf(out, "prefix cache: %d of %d prompt tokens hit (%.0f %%), %d blocks cached, %d evicted\n",
		st.HitTokens, st.QueryTokens, 100*float64(st.HitTokens)/float64(st.QueryTokens), st.Cached, st.Evictions)
	fmt.Fprintf(out, "sequences: %d released remotely, %d rejected; %d live, %d blocks in use\n",
		st.RemoteReleases, st.RejectedReleases, st.Sequences, st.InUse)
	if st.InUse != 0 || st.Sequences != 0 || st.RejectedReleases != 0 || st.RemoteReleases != uint64(c.requests) {
		return fmt.Errorf("accounting does not balance: %+v", st)
	}
	return nil
}

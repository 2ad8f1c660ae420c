package transporttest

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
)

// Pool frees blocks of a real pool over the subject's transport from worker
// goroutines while the owner allocates, writes and drains: half the workers
// free with blocking FreeChunk, half with TryFreeChunk (retrying what did not
// fit), and every third request is freed by a sender made for it and closed
// after. Every block comes back, the pool's and the transport's counters
// balance, and only the workers' own senders stay counted and kept. rounds
// is the number of requests.
func Pool(s Subject, rounds int) error {
	const blocks, workers = 64, 4
	b, err := heap.New(64, blocks)
	if err != nil {
		return err
	}
	tr, err := s.make()
	if err != nil {
		return err
	}
	p, err := pool.New(b, tr, lifo.Policy{})
	if err != nil {
		return err
	}
	defer p.Close()
	jobs := make(chan []pool.Handle, blocks)
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		own, err := p.NewSender()
		if err != nil {
			return err
		}
		wg.Go(func() {
			for i := 0; ; i++ {
				hs, ok := <-jobs
				if !ok {
					return
				}
				s := own
				if i%3 == 2 { // a sender per request
					if s, err = p.NewSender(); err != nil {
						errc <- err
						return
					}
				}
				if err := free(s, hs, w%2 == 0); err != nil {
					errc <- err
					return
				}
				if s != own {
					if err := s.Close(); err != nil {
						errc <- err
						return
					}
				}
			}
		})
	}
	allocated := 0
	deadline := time.Now().Add(Timeout)
	for i := 0; i < rounds; {
		if time.Now().After(deadline) {
			close(jobs)
			_ = p.Close()
			return fmt.Errorf("only %d of %d requests went round in %v", i, rounds, Timeout)
		}
		if _, err := p.Drain(); err != nil {
			return err
		}
		hs := make([]pool.Handle, 1+i%7)
		if err := p.AllocChunk(hs); errors.Is(err, pool.ErrExhausted) {
			runtime.Gosched()
			continue
		} else if err != nil {
			return err
		}
		for _, h := range hs {
			buf, err := p.Bytes(h)
			if err != nil {
				return err
			}
			buf[0] = byte(i) // the worker's free hands the write back
		}
		jobs <- hs
		allocated += len(hs)
		i++
	}
	close(jobs)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running || p.Stats().Live > 0; {
		select {
		case <-done:
			running = false
		case err := <-errc:
			return err
		default:
			if time.Now().After(deadline) {
				return fmt.Errorf("%d blocks still live after %v", p.Stats().Live, Timeout)
			}
		}
		if n, err := p.Drain(); err != nil {
			return err
		} else if n == 0 {
			runtime.Gosched()
		}
	}
	select {
	case err := <-errc:
		return err
	default:
	}
	st := p.Stats()
	if st.Live != 0 || st.Allocs != uint64(allocated) || st.RemoteSubmitted != uint64(allocated) ||
		st.RemoteDrained != st.RemoteSubmitted || st.Rejected != 0 {
		return fmt.Errorf("pool Stats() = %+v, want all %d blocks back, submitted = drained, none rejected", st, allocated)
	}
	if c, ok := s.counts(tr); ok && (c.Submitted != c.Drained || c.Pending != 0 || c.Producers != workers) {
		return fmt.Errorf("transport counters %+v, want submitted = drained, none pending, %d producers", c, workers)
	}
	if s.Queues != nil {
		if n := s.Queues(tr); n != workers {
			return fmt.Errorf("transport keeps %d queues, want the %d workers' (closed senders' queues forgotten)", n, workers)
		}
	}
	return nil
}

// free frees hs through s, with FreeChunk or by retrying TryFreeChunk.
func free(s *pool.Sender, hs []pool.Handle, blocking bool) error {
	if blocking {
		return s.FreeChunk(hs)
	}
	for rest := hs; len(rest) > 0; {
		n, err := s.TryFreeChunk(rest)
		rest = rest[n:]
		if errors.Is(err, pool.ErrFull) {
			runtime.Gosched()
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

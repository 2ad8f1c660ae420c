package adapters

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Order is how a Batcher picks the adapters of a batch.
type Order uint8

// The orders.
const (
	// ResidencyFirst is S-LoRA-style residency-aware batching, the
	// default: adapters whose oldest request has waited MaxWait steps
	// first (oldest first: nobody starves), then hot adapters, then the
	// longest queues.
	ResidencyFirst Order = iota
	// LargestQueueFirst is the ADR's baseline: the longest queues first,
	// whatever their residency, with no starvation guard.
	LargestQueueFirst
)

// Request is one queued request: its sequence number (the caller's) and
// the adapter it needs.
type Request struct {
	Seq     uint64
	Adapter string
}

type queued struct {
	Request
	step uint64 // the step it was enqueued at
}

// BatchConfig configures a Batcher. The zero value takes every default.
type BatchConfig struct {
	// MaxAdapters caps the distinct adapters per batch (SGLang's
	// max_loras_per_batch); default 8.
	MaxAdapters int
	// MaxRequests caps the requests per batch; default 256.
	MaxRequests int
	// MaxWait is the number of steps after which an adapter's oldest
	// request goes first (ResidencyFirst only); default 16.
	MaxWait uint64
	// Order picks adapters; default ResidencyFirst.
	Order Order
	// NoPrefetch turns off prefetching the adapters likely in the next
	// batch.
	NoPrefetch bool
}

// Batch is one step's batch: its requests, and one handle per distinct
// adapter, held until Release.
type Batch struct {
	Step     uint64
	Requests []Request
	Adapters []string
	Handles  []Handle // Handles[i] holds Adapters[i]
	// Waits holds each request's queueing delay in steps.
	Waits []uint64
	// Loads counts adapters this batch had to load (not hot before);
	// Hits those found hot; Prefetched the prefetches it started for the
	// next batch.
	Loads, Hits, Prefetched int
}

// Batcher forms batches of queued requests that mix adapters
// (heterogeneous batching, S-LoRA style), at most MaxAdapters distinct
// adapters per batch, preferring adapters already hot so that a step
// loads as little as possible, and acquiring (pinning) each adapter of the
// batch until the batch is released. It prefetches the adapters that
// come next, so the next step finds them hot. An adapter whose oldest
// request has waited MaxWait steps goes before every other, so no adapter
// starves however unpopular.
//
// A Batcher runs on the Manager's owner goroutine. The zero Batcher is not
// usable; make one with NewBatcher.
type Batcher struct {
	m      *Manager
	cfg    BatchConfig
	step   uint64
	queues map[string][]queued
	n      int
	order  []string // scratch
	closed bool
}

// NewBatcher returns a Batcher over m. It fails with an error wrapping
// pool.ErrInvalidConfig for a nil Manager or a negative or unknown
// setting.
func NewBatcher(m *Manager, cfg BatchConfig) (*Batcher, error) {
	if !m.ok() {
		return nil, fmt.Errorf("%w: adapters: NewBatcher needs an open Manager", errConfig)
	}
	if cfg.MaxAdapters < 0 || cfg.MaxRequests < 0 || cfg.Order > LargestQueueFirst {
		return nil, fmt.Errorf("%w: adapters: batch config %+v", errConfig, cfg)
	}
	if cfg.MaxAdapters == 0 {
		cfg.MaxAdapters = 8
	}
	if cfg.MaxRequests == 0 {
		cfg.MaxRequests = 256
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = 16
	}
	b := &Batcher{m: m, cfg: cfg, queues: map[string][]queued{}}
	m.batchers = append(m.batchers, b)
	m.loraDirty = true
	return b, nil
}

// Close detaches the Batcher from its Manager: the Manager stops counting
// its MaxAdapters and queued requests in Stats.Lora, the state behind
// vLLM's router gauge. Close a Batcher that is no longer used, or the
// router keeps seeing its queue. Its batches' handles stay held until
// released (Release still works); Enqueue and Next fail with
// pool.ErrClosed. Close may be called more than once.
func (b *Batcher) Close() error {
	if b == nil || b.m == nil || b.closed {
		return nil
	}
	b.closed = true
	if i := slices.Index(b.m.batchers, b); i >= 0 {
		b.m.batchers = slices.Delete(b.m.batchers, i, i+1)
	}
	b.m.loraDirty = true
	return nil
}

func (b *Batcher) ok() bool { return b != nil && !b.closed && b.m.ok() }

// Enqueue queues a request. It fails with ErrUnknown if its adapter is not
// registered.
func (b *Batcher) Enqueue(r Request) error {
	if !b.ok() {
		return errClosed
	}
	if _, ok := b.m.byID[r.Adapter]; !ok {
		return ErrUnknown
	}
	q := b.queues[r.Adapter]
	if len(q) == 0 {
		b.m.loraDirty = true // a new waiting adapter
	}
	b.queues[r.Adapter] = append(q, queued{Request: r, step: b.step})
	b.n++
	return nil
}

// Pending returns the number of queued requests.
func (b *Batcher) Pending() int {
	if b == nil {
		return 0
	}
	return b.n
}

// Next forms the next batch into dst (reusing its slices) and advances the
// step. Adapters that cannot be acquired now (loading, no room, a failed
// load) keep their requests queued; their errors, other than ErrLoading
// and ErrNoRoom, are joined in the returned error. An empty queue gives an
// empty batch.
func (b *Batcher) Next(dst *Batch) error {
	if !b.ok() {
		return errClosed
	}
	if dst == nil {
		return fmt.Errorf("%w: adapters: nil batch", errArg)
	}
	*dst = Batch{Step: b.step, Requests: dst.Requests[:0], Adapters: dst.Adapters[:0], Handles: dst.Handles[:0], Waits: dst.Waits[:0]}
	b.order = b.order[:0]
	for id, q := range b.queues {
		if len(q) > 0 {
			b.order = append(b.order, id)
		}
	}
	b.sort()
	var errs []error
	next := 0
	starving := 0 // adapters taken for their wait, at most a quarter of the batch (at least one)
	for i, id := range b.order {
		if b.cfg.Order == ResidencyFirst && b.step-b.queues[id][0].step >= b.cfg.MaxWait {
			if starving == max(1, b.cfg.MaxAdapters/4) {
				continue
			}
			starving++
		}
		if len(dst.Adapters) == b.cfg.MaxAdapters || len(dst.Requests) == b.cfg.MaxRequests {
			next = i
			break
		}
		next = i + 1
		res, err := b.m.Residency(id)
		if err != nil { // unregistered since it was queued: drop its requests
			b.n -= len(b.queues[id])
			delete(b.queues, id)
			b.m.loraDirty = true
			continue
		}
		h, err := b.m.Acquire(id)
		if err != nil {
			if !errors.Is(err, ErrLoading) && !errors.Is(err, ErrNoRoom) {
				errs = append(errs, fmt.Errorf("adapter %q: %w", id, err))
			}
			continue
		}
		if res == Hot {
			dst.Hits++
		} else {
			dst.Loads++
		}
		dst.Adapters = append(dst.Adapters, id)
		dst.Handles = append(dst.Handles, h)
		q := b.queues[id]
		k := min(len(q), b.cfg.MaxRequests-len(dst.Requests))
		for _, r := range q[:k] {
			dst.Requests = append(dst.Requests, r.Request)
			dst.Waits = append(dst.Waits, b.step-r.step)
		}
		b.queues[id] = q[k:]
		if k == len(q) {
			delete(b.queues, id)
			b.m.loraDirty = true
		}
		b.n -= k
	}
	if !b.cfg.NoPrefetch {
		for _, id := range b.order[next:] {
			if dst.Prefetched == b.cfg.MaxAdapters {
				break
			}
			if res, err := b.m.Residency(id); err == nil && res < Loading {
				if b.m.Prefetch(id) == nil {
					dst.Prefetched++
				}
			}
		}
	}
	b.step++
	return errors.Join(errs...)
}

// sort orders the adapters with queued requests by the Batcher's Order.
func (b *Batcher) sort() {
	step, maxWait := b.step, b.cfg.MaxWait
	wait := func(id string) uint64 { return step - b.queues[id][0].step }
	hot := func(id string) bool {
		r, err := b.m.Residency(id)
		return err == nil && r == Hot
	}
	slices.SortFunc(b.order, func(x, y string) int {
		if b.cfg.Order == ResidencyFirst {
			sx, sy := wait(x) >= maxWait, wait(y) >= maxWait
			if sx != sy {
				return boolFirst(sx)
			}
			if sx && wait(x) != wait(y) {
				return cmpDesc(wait(x), wait(y))
			}
			if hx, hy := hot(x), hot(y); hx != hy {
				return boolFirst(hx)
			}
		}
		if lx, ly := len(b.queues[x]), len(b.queues[y]); lx != ly {
			return cmpDesc(uint64(lx), uint64(ly))
		}
		if wx, wy := wait(x), wait(y); wx != wy {
			return cmpDesc(wx, wy)
		}
		return strings.Compare(x, y)
	})
}

func boolFirst(x bool) int {
	if x {
		return -1
	}
	return 1
}

func cmpDesc(x, y uint64) int {
	if x > y {
		return -1
	}
	return 1
}

// Release releases the handles of a finished batch on the owner goroutine
// (a worker releases them through a Releaser instead) and empties them.
func (b *Batcher) Release(batch *Batch) error {
	if b == nil || !b.m.ok() {
		return errClosed
	}
	if batch == nil {
		return nil
	}
	var errs []error
	for _, h := range batch.Handles {
		if err := b.m.Release(h); err != nil {
			errs = append(errs, err)
		}
	}
	batch.Handles = batch.Handles[:0]
	return errors.Join(errs...)
}

// RequestsInfo is one Batcher's view of the state behind vLLM's router
// gauge vllm:lora_requests_info: its labels max_lora (this Batcher's
// MaxAdapters), running_lora_adapters (adapters with live handles) and
// waiting_lora_adapters (adapters with requests queued here). The gauge
// itself is rendered from the Manager's Stats.Lora, which joins every
// open Batcher of the Manager (metrics.NewVLLMLora).
type RequestsInfo struct {
	MaxLora int
	Running []string
	Waiting []string
}

// RequestsInfo returns the router-facing state, ids sorted.
func (b *Batcher) RequestsInfo() RequestsInfo {
	if !b.ok() {
		return RequestsInfo{}
	}
	info := RequestsInfo{MaxLora: b.cfg.MaxAdapters}
	for id, q := range b.queues {
		if len(q) > 0 {
			info.Waiting = append(info.Waiting, id)
		}
	}
	for i := range b.m.leases {
		if l := &b.m.leases[i]; l.gen&1 == 1 {
			info.Running = append(info.Running, b.m.ads[l.adapter].id)
		}
	}
	slices.Sort(info.Running)
	info.Running = slices.Compact(info.Running)
	slices.Sort(info.Waiting)
	return info
}

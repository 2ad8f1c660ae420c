package adapters_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/locus-go/locus/adapters"
	"github.com/locus-go/locus/pool"
)

// traceResult is what one replay of a trace measured.
type traceResult struct {
	requests, loads, hits int
	waits                 []uint64
	extra                 map[uint64]uint64 // the waits of the extra requests served
}

func (r traceResult) loadsPer1000() float64 { return 1000 * float64(r.loads) / float64(r.requests) }
func (r traceResult) hitRate() float64      { return float64(r.hits) / float64(r.hits+r.loads) }
func (r traceResult) pct(p float64) uint64 {
	w := slices.Clone(r.waits)
	slices.Sort(w)
	return w[int(p*float64(len(w)-1))]
}

// replay runs a deterministic Zipf trace through a Batcher: arrivals per
// step, one batch per step, released at the end of the step, prefetches
// waited for so that the result does not depend on timing.
func replay(t testing.TB, order adapters.Order, steps int, extra func(step int) []string) traceResult {
	t.Helper()
	const nAdapters, size = 64, pageSize
	f := newFixture(t, 1024, adapters.WithHotBudget(12, 0), adapters.WithWarm(1<<20, 0, pageSize))
	for i := range nAdapters {
		f.register(t, fmt.Sprint("lora-", i), size)
	}
	b, err := adapters.NewBatcher(f.m, adapters.BatchConfig{MaxAdapters: 4, MaxRequests: 24, MaxWait: 8, Order: order})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(42, 7))
	zipf := rand.NewZipf(rng, 1.2, 1, nAdapters-1)
	res := traceResult{extra: map[uint64]uint64{}}
	var batch adapters.Batch
	seq := uint64(0)
	extraSeqs := map[uint64]bool{}
	for step := range steps {
		ids := extra(step)
		for i := range ids {
			extraSeqs[seq+1+uint64(i)] = true
		}
		for range 20 {
			ids = append(ids, fmt.Sprint("lora-", zipf.Uint64()))
		}
		for _, id := range ids {
			seq++
			if err := b.Enqueue(adapters.Request{Seq: seq, Adapter: id}); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Next(&batch); err != nil {
			t.Fatal(err)
		}
		res.requests += len(batch.Requests)
		res.loads += batch.Loads
		res.hits += batch.Hits
		res.waits = append(res.waits, batch.Waits...)
		for i, r := range batch.Requests {
			if extraSeqs[r.Seq] {
				res.extra[r.Seq] = batch.Waits[i]
			}
		}
		f.clk.advance(100 * time.Millisecond)
		if err := b.Release(&batch); err != nil {
			t.Fatal(err)
		}
		for f.m.Stats().Loading > 0 {
			if _, err := f.m.Drain(nil); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Microsecond)
		}
		if err := f.m.Tick(); err != nil {
			t.Fatal(err)
		}
		f.check(t)
	}
	return res
}

// TestBatcherZipf compares residency-aware batching with the ADR's
// largest-queue-first rule on a skewed trace: fewer loads per request, a
// bounded worst wait.
func TestBatcherZipf(t *testing.T) {
	none := func(int) []string { return nil }
	rf := replay(t, adapters.ResidencyFirst, 400, none)
	lq := replay(t, adapters.LargestQueueFirst, 400, none)
	for name, r := range map[string]traceResult{"residency-first": rf, "largest-queue-first": lq} {
		t.Logf("%-20s loads/1000 req %6.1f  hit rate %.3f  wait p50 %d p99 %d max %d steps (%d requests)",
			name, r.loadsPer1000(), r.hitRate(), r.pct(0.5), r.pct(0.99), r.pct(1), r.requests)
	}
	if rf.loadsPer1000() > lq.loadsPer1000() {
		t.Errorf("residency-first loads %.1f per 1000 requests, largest-queue-first %.1f", rf.loadsPer1000(), lq.loadsPer1000())
	}
}

// TestBatcherStarvation: one request for the rarest adapter among a flood
// for popular ones. Residency-first serves it: once it has waited MaxWait
// steps it takes one of the batch's starvation slots as soon as the
// adapters starving longer have had theirs. Largest-queue-first serves it
// only when no longer queue is left, much later.
func TestBatcherStarvation(t *testing.T) {
	rare := func(step int) []string {
		if step == 0 {
			return []string{"lora-63"}
		}
		return nil
	}
	rf := replay(t, adapters.ResidencyFirst, 120, rare)
	lq := replay(t, adapters.LargestQueueFirst, 120, rare)
	w, ok := rf.extra[1]
	if !ok || w < 8 || w > 8+64 {
		t.Errorf("residency-first: the rare request served %v, after %d steps", ok, w)
	}
	if w2, ok := lq.extra[1]; ok && w2 <= w {
		t.Errorf("largest-queue-first served the rare request after %d steps, residency-first after %d", w2, w)
	}
	t.Logf("rare request served after %d steps (largest-queue-first: %d)", w, lq.extra[1])
}

func TestBatcherRejects(t *testing.T) {
	f := newFixture(t, 64)
	if _, err := adapters.NewBatcher(nil, adapters.BatchConfig{}); !errors.Is(err, pool.ErrInvalidConfig) {
		t.Fatalf("nil manager: %v", err)
	}
	if _, err := adapters.NewBatcher(f.m, adapters.BatchConfig{MaxAdapters: -1}); !errors.Is(err, pool.ErrInvalidConfig) {
		t.Fatalf("negative: %v", err)
	}
	b, err := adapters.NewBatcher(f.m, adapters.BatchConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Enqueue(adapters.Request{Adapter: "nope"}); !errors.Is(err, adapters.ErrUnknown) {
		t.Fatalf("unknown adapter: %v", err)
	}
	if err := b.Next(nil); !errors.Is(err, pool.ErrInvalidArgument) {
		t.Fatalf("nil batch: %v", err)
	}
	var nilB *adapters.Batcher
	if err := nilB.Next(&adapters.Batch{}); !errors.Is(err, pool.ErrClosed) {
		t.Fatalf("nil batcher: %v", err)
	}
	// A registered adapter unregistered while queued: its requests go.
	f.register(t, "a", 10)
	f.register(t, "b", 10)
	_ = b.Enqueue(adapters.Request{Seq: 1, Adapter: "a"})
	_ = b.Enqueue(adapters.Request{Seq: 2, Adapter: "b"})
	if info := b.RequestsInfo(); info.MaxLora != 8 || len(info.Waiting) != 2 {
		t.Fatalf("info %+v", info)
	}
	_ = f.m.Unregister("a")
	var batch adapters.Batch
	if err := b.Next(&batch); err != nil {
		t.Fatal(err)
	}
	if len(batch.Requests) != 1 || batch.Requests[0].Seq != 2 || b.Pending() != 0 {
		t.Fatalf("batch %+v, pending %d", batch, b.Pending())
	}
	if info := b.RequestsInfo(); len(info.Running) != 1 || info.Running[0] != "b" || len(info.Waiting) != 0 {
		t.Fatalf("info %+v", info)
	}
	if err := b.Release(&batch); err != nil {
		t.Fatal(err)
	}
}

// TestLoraInfo: the state behind vllm:lora_requests_info follows the
// handles and the queues of every open Batcher, and max_lora their
// MaxAdapters (the hot slot budget without one).
func TestLoraInfo(t *testing.T) {
	f := newFixture(t, 64, adapters.WithHotBudget(3, 0))
	for _, id := range []string{"a", "b", "c"} {
		f.register(t, id, 10)
	}
	lora := func() adapters.LoraInfo {
		t.Helper()
		s := f.m.Stats()
		if !s.Lora.At.Equal(f.clk.now()) {
			t.Fatalf("recorded at %v, clock %v", s.Lora.At, f.clk.now())
		}
		s.Lora.At = time.Time{}
		return s.Lora
	}
	want := func(got, want adapters.LoraInfo) {
		t.Helper()
		if got != want {
			t.Fatalf("lora info %+v, want %+v", got, want)
		}
	}
	want(lora(), adapters.LoraInfo{MaxLora: 3})
	b, err := adapters.NewBatcher(f.m, adapters.BatchConfig{MaxAdapters: 2, NoPrefetch: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"c", "a", "a", "b"} {
		if err := b.Enqueue(adapters.Request{Seq: uint64(i), Adapter: id}); err != nil {
			t.Fatal(err)
		}
	}
	want(lora(), adapters.LoraInfo{MaxLora: 2, Waiting: "a,b,c"})
	var batch adapters.Batch
	if err := b.Next(&batch); err != nil {
		t.Fatal(err)
	}
	running := slices.Clone(batch.Adapters)
	slices.Sort(running)
	if len(running) != 2 {
		t.Fatalf("batch %+v", batch)
	}
	waiting := "a"
	for _, id := range []string{"b", "c"} {
		if !slices.Contains(running, id) {
			waiting = id
		}
	}
	want(lora(), adapters.LoraInfo{MaxLora: 2, Running: running[0] + "," + running[1], Waiting: waiting})
	b2, err := adapters.NewBatcher(f.m, adapters.BatchConfig{MaxAdapters: 5})
	if err != nil {
		t.Fatal(err)
	}
	if err := b2.Enqueue(adapters.Request{Adapter: running[0]}); err != nil {
		t.Fatal(err)
	}
	h := mustAcquire(t, f.m, running[0], 10) // a second holder: listed once
	want(lora(), adapters.LoraInfo{MaxLora: 5, Running: running[0] + "," + running[1], Waiting: strings.Join(slices.Sorted(slices.Values([]string{waiting, running[0]})), ",")})
	if err := b2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b2.Enqueue(adapters.Request{Adapter: "a"}); !errors.Is(err, pool.ErrClosed) {
		t.Fatalf("Enqueue after Close: %v", err)
	}
	if err := b.Release(&batch); err != nil {
		t.Fatal(err)
	}
	want(lora(), adapters.LoraInfo{MaxLora: 2, Running: running[0], Waiting: waiting})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.m.Release(h); err != nil {
		t.Fatal(err)
	}
	want(lora(), adapters.LoraInfo{MaxLora: 3})
	f.check(t)
}

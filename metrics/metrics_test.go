package metrics_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/locus-go/locus"
	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/kv/events"
	"github.com/locus-go/locus/metrics"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/pool"
)

// A scripted sequence of pool operations, and the exact exposition it
// leaves.
func TestPool(t *testing.T) {
	p, err := locus.Default(locus.WithBlocks(8), locus.WithBlockSize(64))
	require.NoError(t, err)
	defer p.Close()
	h := make([]pool.Handle, 3)
	require.NoError(t, p.AllocChunk(h))
	a, err := p.Alloc()
	require.NoError(t, err)
	_, err = p.Alloc()
	require.NoError(t, err)
	require.NoError(t, p.Free(a))
	_, err = p.Drain() // takes nothing
	require.NoError(t, err)
	s, err := p.NewSender()
	require.NoError(t, err)
	require.NoError(t, s.FreeChunk(h[:2]))
	require.NoError(t, s.Free(h[0])) // a double free: rejected at the drain
	_, err = p.Drain()               // takes three handles
	require.ErrorIs(t, err, pool.ErrStaleHandle)

	want := `
# HELP locus_pool_allocated_blocks_total Blocks handed out.
# TYPE locus_pool_allocated_blocks_total counter
locus_pool_allocated_blocks_total{pool="test"} 5
# HELP locus_pool_block_size_bytes Size of every block of the pool.
# TYPE locus_pool_block_size_bytes gauge
locus_pool_block_size_bytes{pool="test"} 64
# HELP locus_pool_blocks Blocks of the pool by state: free, or in_use (allocated and not yet freed back).
# TYPE locus_pool_blocks gauge
locus_pool_blocks{pool="test",state="free"} 6
locus_pool_blocks{pool="test",state="in_use"} 2
# HELP locus_pool_drain_size_handles Handles taken out of the transport per drain.
# TYPE locus_pool_drain_size_handles histogram
` + buckets("locus_pool_drain_size_handles", `pool="test"`, map[float64]uint64{0: 1, 3: 2}, 2) + `
locus_pool_drain_size_handles_sum{pool="test"} 3
locus_pool_drain_size_handles_count{pool="test"} 2
# HELP locus_pool_freed_blocks_total Blocks returned to the free list, locally or by drains.
# TYPE locus_pool_freed_blocks_total counter
locus_pool_freed_blocks_total{pool="test"} 3
# HELP locus_pool_high_water_blocks Most blocks ever allocated at once.
# TYPE locus_pool_high_water_blocks gauge
locus_pool_high_water_blocks{pool="test"} 5
# HELP locus_pool_rejected_handles_total Handles refused: stale, double-freed, foreign, zero or out of range.
# TYPE locus_pool_rejected_handles_total counter
locus_pool_rejected_handles_total{pool="test"} 1
# HELP locus_pool_remote_drained_handles_total Handles the owner's drains took out of the transport.
# TYPE locus_pool_remote_drained_handles_total counter
locus_pool_remote_drained_handles_total{pool="test"} 3
# HELP locus_pool_remote_submitted_handles_total Handles accepted by senders for a remote free.
# TYPE locus_pool_remote_submitted_handles_total counter
locus_pool_remote_submitted_handles_total{pool="test"} 3
`
	p.Stats() // the owner publishes; a scraper on another goroutine is served at the next Drain
	require.NoError(t, testutil.CollectAndCompare(metrics.NewPool("test", p), strings.NewReader(want)))
	lint(t, metrics.NewPool("test", p))
}

// lint checks a collector's metrics against Prometheus's naming rules.
func lint(t *testing.T, c prometheus.Collector) {
	t.Helper()
	problems, err := testutil.CollectAndLint(c)
	require.NoError(t, err)
	require.Empty(t, problems)
}

// buckets writes the bucket lines of a drain histogram: the cumulative
// count at every bound of pool.DrainBucketBound, from the bounds where it
// changes (cum), and count at +Inf.
func buckets(name, labels string, cum map[float64]uint64, count uint64) string {
	var b strings.Builder
	c := uint64(0)
	for k := range pool.DrainBuckets - 1 {
		le := float64(pool.DrainBucketBound(k))
		if v, ok := cum[le]; ok {
			c = v
		}
		fmt.Fprintf(&b, "%s_bucket{%s,le=\"%g\"} %d\n", name, labels, le, c)
	}
	fmt.Fprintf(&b, "%s_bucket{%s,le=\"+Inf\"} %d", name, labels, count)
	return b.String()
}

// A scripted sequence of manager operations, and the exact exposition it
// leaves.
func TestManager(t *testing.T) {
	p, err := locus.Default(locus.WithBlocks(16))
	require.NoError(t, err)
	defer p.Close()
	m, err := kv.New(p)
	require.NoError(t, err)
	defer m.Close()

	prompt := make([]uint32, 40) // two full blocks and a partial one
	a, _, err := m.Admit(prompt, kv.Key{})
	require.NoError(t, err)
	b, hit, err := m.Admit(append(prompt[:32:32], 7, 7, 7, 7, 7, 7, 7, 7), kv.Key{})
	require.NoError(t, err)
	require.Equal(t, 32, hit)
	c, err := m.Fork(b)
	require.NoError(t, err)
	require.NoError(t, m.Append(c, []uint32{1})) // copies the shared partial block
	_, err = m.Pin(prompt[:32], kv.Key{})
	require.NoError(t, err)
	require.NoError(t, m.Release(a))
	r, err := m.NewReleaser()
	require.NoError(t, err)
	require.NoError(t, r.Release(b))
	_, err = m.Drain()
	require.NoError(t, err)
	require.ErrorIs(t, m.Release(a), kv.ErrInvalidSequence)
	_, _, err = m.Admit(make([]uint32, 17*16), kv.Key{})
	require.ErrorIs(t, err, pool.ErrExhausted)
	m.Stats() // publishes for Snapshot

	want := `
# HELP locus_kv_blocks Blocks of the manager's pool by state: free, cached (evictable), in_use (held by sequences, not pinned) or pinned.
# TYPE locus_kv_blocks gauge
locus_kv_blocks{manager="m",state="cached"} 0
locus_kv_blocks{manager="m",state="free"} 13
locus_kv_blocks{manager="m",state="in_use"} 1
locus_kv_blocks{manager="m",state="pinned"} 2
# HELP locus_kv_cleared_blocks_total Cached blocks dropped by Reset.
# TYPE locus_kv_cleared_blocks_total counter
locus_kv_cleared_blocks_total{manager="m"} 0
# HELP locus_kv_copy_on_write_blocks_total Shared partial blocks copied before an append.
# TYPE locus_kv_copy_on_write_blocks_total counter
locus_kv_copy_on_write_blocks_total{manager="m"} 1
# HELP locus_kv_evicted_blocks_total Cached blocks evicted: for an allocation, or down to the low watermark.
# TYPE locus_kv_evicted_blocks_total counter
locus_kv_evicted_blocks_total{manager="m",reason="allocation"} 0
locus_kv_evicted_blocks_total{manager="m",reason="watermark"} 0
# HELP locus_kv_exhausted_total Admissions and appends refused for lack of blocks.
# TYPE locus_kv_exhausted_total counter
locus_kv_exhausted_total{manager="m"} 1
# HELP locus_kv_forks_total Sequences forked.
# TYPE locus_kv_forks_total counter
locus_kv_forks_total{manager="m"} 1
# HELP locus_kv_prefix_hit_blocks_total Full prompt blocks admissions found in the prefix cache.
# TYPE locus_kv_prefix_hit_blocks_total counter
locus_kv_prefix_hit_blocks_total{manager="m"} 2
# HELP locus_kv_prefix_hit_tokens_total Prompt tokens admissions found in the prefix cache.
# TYPE locus_kv_prefix_hit_tokens_total counter
locus_kv_prefix_hit_tokens_total{manager="m"} 32
# HELP locus_kv_prefix_query_blocks_total Full prompt blocks admissions looked up in the prefix cache.
# TYPE locus_kv_prefix_query_blocks_total counter
locus_kv_prefix_query_blocks_total{manager="m"} 4
# HELP locus_kv_prefix_query_tokens_total Prompt tokens admissions looked up in the prefix cache.
# TYPE locus_kv_prefix_query_tokens_total counter
locus_kv_prefix_query_tokens_total{manager="m"} 80
# HELP locus_kv_rejected_releases_total Releases refused: zero, foreign, stale or double.
# TYPE locus_kv_rejected_releases_total counter
locus_kv_rejected_releases_total{manager="m"} 1
# HELP locus_kv_subscriber_panics_total Cache events lost because the event subscriber panicked.
# TYPE locus_kv_subscriber_panics_total counter
locus_kv_subscriber_panics_total{manager="m"} 0
# HELP locus_kv_releases_total Sequences released, by the owner or through a releaser.
# TYPE locus_kv_releases_total counter
locus_kv_releases_total{manager="m",via="owner"} 1
locus_kv_releases_total{manager="m",via="releaser"} 1
# HELP locus_kv_sequences Live sequences.
# TYPE locus_kv_sequences gauge
locus_kv_sequences{manager="m"} 1
# HELP locus_kv_stored_blocks_total Blocks added to the prefix cache.
# TYPE locus_kv_stored_blocks_total counter
locus_kv_stored_blocks_total{manager="m"} 2
# HELP locus_kv_tokens_per_block Tokens a block holds.
# TYPE locus_kv_tokens_per_block gauge
locus_kv_tokens_per_block{manager="m"} 16
`
	require.NoError(t, testutil.CollectAndCompare(metrics.NewManager("m", m), strings.NewReader(want)))
	lint(t, metrics.NewManager("m", m))
}

// fakePublisher is a publisher whose counts the test sets.
type fakePublisher events.Stats

func (f *fakePublisher) Snapshot() events.Stats { return events.Stats(*f) }

// Every count of a publisher, in its metric.
func TestPublisher(t *testing.T) {
	src := &fakePublisher{Events: 40, Batches: 9, Published: 5, PublishedEvents: 30, Dropped: 3, Failed: 1,
		DroppedEvents: 10, Invalid: 2, Queued: 4, Delivered: 7, Undelivered: 2, Unheard: 1, Subscribers: 2,
		Joined: 5, Left: 3, TimedOut: 1, ReplayRequests: 4, ReplayInvalid: 1}
	want := `
# HELP locus_kv_events_batches_total Batches sealed: the sequence numbers used.
# TYPE locus_kv_events_batches_total counter
locus_kv_events_batches_total{publisher="p"} 9
# HELP locus_kv_events_delivered_batches_total Batch copies written to subscribers' connections, over all subscribers.
# TYPE locus_kv_events_delivered_batches_total counter
locus_kv_events_delivered_batches_total{publisher="p"} 7
# HELP locus_kv_events_dropped_batches_total Batches lost: dropped because the queue was full, or refused by the socket.
# TYPE locus_kv_events_dropped_batches_total counter
locus_kv_events_dropped_batches_total{publisher="p",reason="buffer_full"} 3
locus_kv_events_dropped_batches_total{publisher="p",reason="send_error"} 1
# HELP locus_kv_events_dropped_events_total Events not published: in lost batches, or received after Close.
# TYPE locus_kv_events_dropped_events_total counter
locus_kv_events_dropped_events_total{publisher="p"} 10
# HELP locus_kv_events_invalid_events_total Nil events and events of unknown kinds, ignored.
# TYPE locus_kv_events_invalid_events_total counter
locus_kv_events_invalid_events_total{publisher="p"} 2
# HELP locus_kv_events_published_batches_total Batches written to the socket.
# TYPE locus_kv_events_published_batches_total counter
locus_kv_events_published_batches_total{publisher="p"} 5
# HELP locus_kv_events_published_events_total Events in the batches written to the socket.
# TYPE locus_kv_events_published_events_total counter
locus_kv_events_published_events_total{publisher="p"} 30
# HELP locus_kv_events_queued_batches Sealed batches waiting for the publisher's goroutine.
# TYPE locus_kv_events_queued_batches gauge
locus_kv_events_queued_batches{publisher="p"} 4
# HELP locus_kv_events_replay_requests_total Replay requests: served, or malformed and ignored.
# TYPE locus_kv_events_replay_requests_total counter
locus_kv_events_replay_requests_total{publisher="p",result="invalid"} 1
locus_kv_events_replay_requests_total{publisher="p",result="served"} 4
# HELP locus_kv_events_subscriber_disconnects_total Subscriber connections lost; timed_out: cut after the write timeout (those are not counted in left).
# TYPE locus_kv_events_subscriber_disconnects_total counter
locus_kv_events_subscriber_disconnects_total{publisher="p",reason="left"} 2
locus_kv_events_subscriber_disconnects_total{publisher="p",reason="timed_out"} 1
# HELP locus_kv_events_subscribers Subscribers connected now.
# TYPE locus_kv_events_subscribers gauge
locus_kv_events_subscribers{publisher="p"} 2
# HELP locus_kv_events_undelivered_batches_total Batch copies a subscriber did not get: its own queue full, its connection lost, or still queued when Close gave up.
# TYPE locus_kv_events_undelivered_batches_total counter
locus_kv_events_undelivered_batches_total{publisher="p"} 2
# HELP locus_kv_events_unheard_batches_total Published batches no subscriber's subscription covered (before the first subscriber connected).
# TYPE locus_kv_events_unheard_batches_total counter
locus_kv_events_unheard_batches_total{publisher="p"} 1
`
	require.NoError(t, testutil.CollectAndCompare(metrics.NewPublisher("p", src), strings.NewReader(want)))
	lint(t, metrics.NewPublisher("p", src))

	// A real publisher, through its Snapshot.
	pub, err := events.New("tcp://127.0.0.1:0", events.WithFlushInterval(time.Hour))
	require.NoError(t, err)
	record := pub.Subscriber()
	for range 3 {
		record(&kv.Event{Kind: kv.AllBlocksCleared})
	}
	require.NoError(t, pub.Close())
	c := metrics.NewPublisher("p", pub)
	require.Equal(t, 1, testutil.CollectAndCount(c, "locus_kv_events_published_batches_total"))
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(`
# HELP locus_kv_events_published_events_total Events in the batches written to the socket.
# TYPE locus_kv_events_published_events_total counter
locus_kv_events_published_events_total{publisher="p"} 3
`), "locus_kv_events_published_events_total"))
}

// Registration of bad sources fails with an error, never a panic; two
// sources of one kind need two names.
func TestRegistration(t *testing.T) {
	var nilPool *locus.DefaultPool
	var nilManager *kv.Manager
	var nilPublisher *events.Publisher
	var nilClasses *classes.DefaultPool
	var nilPages *pages.Pool
	for _, c := range []prometheus.Collector{
		metrics.NewClasses("c", nil), metrics.NewClasses("c", nilClasses),
		metrics.NewPages("g", nil), metrics.NewPages("g", nilPages),
		metrics.NewPool("p", nil), metrics.NewPool("p", nilPool),
		metrics.NewManager("m", nil), metrics.NewManager("m", nilManager),
		metrics.NewPublisher("e", nil), metrics.NewPublisher("e", nilPublisher),
	} {
		require.Error(t, prometheus.NewRegistry().Register(c))
	}
	p, err := locus.Default()
	require.NoError(t, err)
	defer p.Close()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(metrics.NewPool("a", p)))
	require.Error(t, reg.Register(metrics.NewPool("a", p)), "a second collector of the same name")
	require.NoError(t, reg.Register(metrics.NewPool("b", p)))
}

// A scraper reads the metrics of a busy pool and manager: under -race it
// must not race the owner, and every scrape must be consistent: counters
// never go down, and the block states sum to the capacity.
func TestScrapeRacesOwner(t *testing.T) {
	const blocks = 256
	p, err := locus.Default(locus.WithBlocks(blocks))
	require.NoError(t, err)
	defer p.Close()
	m, err := kv.New(p)
	require.NoError(t, err)
	defer m.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewPool("kv", p), metrics.NewManager("kv", m))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	releases := make(chan kv.SeqID, 1024)
	wg.Go(func() { // a worker releasing finished sequences
		r, err := m.NewReleaser()
		if err != nil {
			t.Error(err)
			return
		}
		for id := range releases {
			if err := r.Release(id); err != nil {
				t.Error(err)
			}
		}
	})
	var scrapes atomic.Int64
	wg.Go(func() { // the scraper
		last := map[string]float64{}
		for {
			select {
			case <-stop:
				return
			default:
			}
			mfs, err := reg.Gather()
			if err != nil {
				t.Error(err)
				return
			}
			checkScrape(t, mfs, last, blocks)
			scrapes.Add(1)
		}
	})
	prompt := make([]uint32, 100)
	admitted := 0
	for step := 0; step < 3000 || scrapes.Load() < 100; step++ {
		for i := range prompt {
			prompt[i] = uint32(step % 7 * i)
		}
		if id, _, err := m.Admit(prompt, kv.Key{}); err == nil {
			admitted++
			_ = m.Append(id, []uint32{1, 2, 3})
			releases <- id
		}
		if _, err := m.Drain(); err != nil {
			t.Error(err)
			break
		}
	}
	close(releases)
	close(stop)
	wg.Wait()
	require.Positive(t, admitted)
	t.Logf("%d admissions, %d scrapes", admitted, scrapes.Load())
}

func checkScrape(t *testing.T, mfs []*dto.MetricFamily, last map[string]float64, capacity int) {
	sums := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.Metric {
			key := mf.GetName()
			for _, l := range mt.Label {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				v := mt.GetCounter().GetValue()
				if v < last[key] {
					t.Errorf("%s went down: %v after %v", key, v, last[key])
				}
				last[key] = v
			case dto.MetricType_GAUGE:
				if n := mf.GetName(); n == "locus_pool_blocks" || n == "locus_kv_blocks" {
					sums[mf.GetName()] += mt.GetGauge().GetValue()
				}
			}
		}
	}
	for _, name := range []string{"locus_pool_blocks", "locus_kv_blocks"} {
		if sums[name] != float64(capacity) {
			t.Errorf("%s sums to %v, want %d", name, sums[name], capacity)
		}
	}
}

// NewVLLM exports a manager under vLLM's names, which dashboards and
// routers already read.
func TestVLLM(t *testing.T) {
	src := fakeManager{Capacity: 100, TokensPerBlock: 16, InUse: 25, Cached: 30, Free: 45, QueryTokens: 640, HitTokens: 320, Preemptions: 3}
	want := `
# HELP vllm:cache_config_info Information of the KV cache configuration.
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",engine="0",model_name="llama",num_gpu_blocks="100"} 1
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="llama"} 0.25
# HELP vllm:num_preemptions_total Cumulative number of preemptions from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="llama"} 3
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="llama"} 320
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="llama"} 640
`
	require.NoError(t, testutil.CollectAndCompare(metrics.NewVLLM("llama", src), strings.NewReader(want)))
	reg := prometheus.NewRegistry()
	require.Error(t, reg.Register(metrics.NewVLLM("llama", nil)), "a nil source registers")
}

type fakeManager kv.Stats

func (f fakeManager) Snapshot() kv.Stats { return kv.Stats(f) }

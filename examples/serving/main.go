// Command serving shows locus embedded in a toy LLM serving loop: one owner
// goroutine schedules requests step by step and allocates their KV blocks;
// worker goroutines finish requests and free all of a request's blocks with
// one call through their own sender; the owner drains once per step, off the
// allocation path.
//
// The shared-prefix scenario (-scenario shared) runs the same loop through a
// kv.Manager: requests start with one of a few system prompts, the prefix
// cache shares their blocks, workers release whole sequences with one push,
// and the command prints the blocks held with and without sharing.
//
// With -tiers (shared scenario) a host tier, and with -disk DIR a disk tier
// behind it, keep the blocks the pool evicts (kv.WithTiers): requests become
// the turns of -conversations chats, each turn's prompt is the conversation
// so far, and a turn whose history the small pool evicted loads it back from
// a tier instead of recomputing it. The command prints each tier's hits.
//
// With -metrics it serves the pool's and the manager's Prometheus metrics
// at /metrics on a loopback address, and keeps serving them after the run
// until interrupted; with -events (shared scenario) it publishes the
// manager's cache events in vLLM's format on a ZMQ PUB socket, one batch
// per scheduling step, for KV-cache-aware routers.
//
//	go run ./examples/serving -requests 256 -workers 4
//	go run ./examples/serving -scenario shared
//	go run ./examples/serving -scenario shared -metrics 127.0.0.1:9090 -events tcp://127.0.0.1:5557
//	go run ./examples/serving -scenario shared -tiers -disk /tmp/kv -metrics 127.0.0.1:9090
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/locus-go/locus"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/kv/events"
	"github.com/locus-go/locus/metrics"
)

type config struct {
	requests, workers, arrivals int
	blocks, tokensPerBlock      int
	prompt, decode              int
	system, prompts             int // shared scenario: system prompt tokens, distinct system prompts
	// Shared scenario with tiers: requests are turns of conversations
	// (0: independent requests); a host tier of hostBlocks, and a disk tier
	// of diskBlocks in directory disk ("": none).
	conversations          int
	tiers                  bool
	hostBlocks, diskBlocks int
	disk                   string
}

func main() {
	var c config
	flag.IntVar(&c.requests, "requests", 256, "requests to serve")
	flag.IntVar(&c.workers, "workers", 4, "worker goroutines that finish requests")
	flag.IntVar(&c.arrivals, "arrivals", 8, "requests admitted per step")
	flag.IntVar(&c.blocks, "blocks", 4096, "KV blocks in the pool (4 KiB each)")
	flag.IntVar(&c.tokensPerBlock, "tokens-per-block", 16, "tokens per KV block")
	flag.IntVar(&c.prompt, "prompt", 256, "prompt tokens per request")
	flag.IntVar(&c.decode, "decode", 64, "decode steps per request (varied by request)")
	flag.IntVar(&c.system, "system", 512, "shared scenario: tokens of each system prompt")
	flag.IntVar(&c.prompts, "system-prompts", 2, "shared scenario: distinct system prompts")
	flag.BoolVar(&c.tiers, "tiers", false, "shared scenario: a host tier behind the pool (default pool: 1024 blocks, 32 conversations)")
	flag.IntVar(&c.hostBlocks, "host-blocks", 8192, "with -tiers: blocks of the host tier (32 MiB)")
	flag.StringVar(&c.disk, "disk", "", "with -tiers: a disk tier behind the host tier, in this directory (served again by the next run)")
	flag.IntVar(&c.diskBlocks, "disk-blocks", 8192, "with -disk: blocks of the disk tier")
	flag.IntVar(&c.conversations, "conversations", 0, "shared scenario: requests are turns of this many conversations (0: independent requests)")
	scenario := flag.String("scenario", "private", "private (a block table per request) or shared (prefix cache)")
	metricsAddr := flag.String("metrics", "", "serve Prometheus metrics at /metrics on this loopback address, e.g. 127.0.0.1:9090")
	public := flag.Bool("metrics-public", false, "allow -metrics on an address other than loopback")
	var o observer
	flag.StringVar(&o.events, "events", "", "shared scenario: publish KV cache events in vLLM's format on this ZMQ endpoint, e.g. tcp://127.0.0.1:5557")
	flag.StringVar(&o.topic, "topic", events.Topic("serving", "toy"), "topic of the KV events")
	flag.IntVar(&o.subscribers, "subscribers", 0, "with -events: wait for this many subscribers (at most -wait) before serving, so that none misses the first batches")
	flag.DurationVar(&o.wait, "wait", 10*time.Second, "with -subscribers: how long to wait for them")
	flag.Parse()
	if c.tiers {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["blocks"] {
			c.blocks = tieredBlocks
		}
		if !set["conversations"] {
			c.conversations = tieredConversations
		}
	}
	run := serve
	switch *scenario {
	case "private":
		if o.events != "" || c.tiers || c.conversations > 0 {
			fail(2, "-events, -tiers and -conversations need -scenario shared")
		}
	case "shared":
		run = serveShared
	default:
		fail(2, "-scenario is private or shared")
	}
	if c.disk != "" && !c.tiers {
		fail(2, "-disk needs -tiers")
	}
	if *metricsAddr != "" {
		reg := prometheus.NewRegistry()
		_, addr, err := serveMetrics(*metricsAddr, *public, reg)
		if err != nil {
			fail(1, err)
		}
		o.reg = reg
		fmt.Printf("metrics at http://%s/metrics\n", addr)
	}
	err := run(os.Stdout, c, &o)
	if cerr := o.close(os.Stdout); err == nil {
		err = cerr
	}
	if err != nil {
		fail(1, err)
	}
	if o.reg != nil {
		fmt.Println("serving metrics until interrupted")
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt)
		<-sig
	}
}

func fail(code int, msg any) {
	fmt.Fprintln(os.Stderr, "serving:", msg)
	os.Exit(code)
}

type request struct {
	id    int
	left  int // decode steps to go
	table *kv.Table
}

func serve(out io.Writer, c config, o *observer) error {
	p, err := locus.Default(locus.WithBlocks(c.blocks))
	if err != nil {
		return err
	}
	defer p.Close()
	if err := o.register(metrics.NewPool("kv", p)); err != nil {
		return err
	}

	// Workers: each owns a sender and releases finished requests' tables.
	done := make([]chan *request, c.workers)
	recycled := make(chan *request, c.requests)
	var wg sync.WaitGroup
	for w := range done {
		done[w] = make(chan *request, c.requests)
		s, err := p.NewSender()
		if err != nil {
			return err
		}
		wg.Go(func() {
			for r := range done[w] {
				// ... send the response, then give the blocks back.
				if err := r.table.Release(s); err != nil {
					fmt.Fprintln(os.Stderr, "release:", err)
				}
				recycled <- r
			}
		})
	}

	var active []*request
	admitted, finished, steps, waits := 0, 0, 0, 0
	// owed is the blocks admitted requests will still allocate: a request is
	// admitted only if the free blocks cover its whole lifetime, so decoding
	// never runs out of blocks (a real engine would preempt instead).
	owed := 0
	blocksFor := func(tokens int) int { return (tokens + c.tokensPerBlock - 1) / c.tokensPerBlock }
	for finished < c.requests {
		steps++
		// Once per step, off the allocation path: take back every block
		// the workers freed since the last step.
		if _, err := p.Drain(); err != nil {
			return err
		}
		for k := 0; k < c.arrivals && admitted < c.requests; k++ {
			var r *request
			select {
			case r = <-recycled: // reuse a finished request's table
			default:
				t, err := kv.NewTable(c.tokensPerBlock)
				if err != nil {
					return err
				}
				r = &request{table: t}
			}
			r.id, r.left = admitted, c.decode/2+admitted%c.decode
			need := blocksFor(c.prompt + r.left)
			if need > c.blocks {
				return fmt.Errorf("a request needs %d blocks, the pool has %d", need, c.blocks)
			}
			if p.Stats().Free-owed < need {
				recycled <- r // not admitted: retry next step
				waits++
				break
			}
			if err := r.table.Append(p, c.prompt); err != nil {
				return err
			}
			owed += need - len(r.table.Handles())
			active = append(active, r)
			admitted++
		}
		// Decode: one token per active request; finished ones go to a worker.
		kept := active[:0]
		for _, r := range active {
			if r.left == 0 {
				done[r.id%c.workers] <- r
				finished++
				continue
			}
			had := len(r.table.Handles())
			if err := r.table.Append(p, 1); err != nil {
				return fmt.Errorf("step %d: request %d: %w", steps, r.id, err)
			}
			owed -= len(r.table.Handles()) - had
			blk, _ := p.Bytes(r.table.Handles()[len(r.table.Handles())-1])
			blk[(r.table.Tokens()-1)%c.tokensPerBlock] = byte(r.id) // write the token's KV
			r.left--
			kept = append(kept, r)
		}
		active = kept
	}
	for _, d := range done {
		close(d)
	}
	wg.Wait()
	if _, err := p.Drain(); err != nil {
		return err
	}
	st := p.Stats()
	fmt.Fprintf(out, "served %d requests in %d steps with %d workers (%d admissions waited for blocks)\n",
		c.requests, steps, c.workers, waits)
	fmt.Fprintf(out, "blocks: %d allocated, %d freed, %d live, high water %d of %d\n",
		st.Allocs, st.Frees, st.Live, st.HighWater, st.Capacity)
	fmt.Fprintf(out, "remote frees: %d submitted, %d drained, %d rejected\n",
		st.RemoteSubmitted, st.RemoteDrained, st.Rejected)
	if st.Live != 0 || st.RemoteSubmitted != st.RemoteDrained || st.Rejected != 0 {
		return fmt.Errorf("accounting does not balance: %+v", st)
	}
	return nil
}

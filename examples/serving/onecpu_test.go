package main

import (
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// The shared scenario on one CPU, where workers release finished requests
// late and the pool runs full: the loop must wait or preempt, never fail.
// It runs the default configuration (which failed here before preemption),
// a pool so tight that decode steps preempt, and the same with CPU-bound
// goroutines competing for the one CPU and with events published.
func TestServeSharedOneCPU(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	def := config{requests: 256, workers: 4, arrivals: 8, blocks: 4096, tokensPerBlock: 16, prompt: 256, decode: 64, system: 512, prompts: 2}
	tight := config{requests: 48, workers: 2, arrivals: 16, blocks: 40, tokensPerBlock: 16, prompt: 32, decode: 64, system: 64, prompts: 2}
	runs := 4
	if testing.Short() {
		def.requests, runs = 64, 2
	}
	preempted := regexp.MustCompile(`(\d+) preemptions`)
	total := 0
	for _, tc := range []struct {
		name   string
		c      config
		load   bool
		events bool
	}{
		{"default", def, false, false},
		{"tight", tight, false, false},
		{"tight-under-load", tight, true, false},
		{"tight-with-events", tight, false, true},
		{"default-under-load-with-events", def, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range runs {
				var stop atomic.Bool
				var load sync.WaitGroup
				if tc.load {
					for range 2 {
						load.Go(func() {
							x := 0
							for !stop.Load() {
								x++ // CPU-bound work with no yield points but the loop's
							}
							_ = x
						})
					}
				}
				o := &observer{}
				if tc.events {
					o.events, o.topic = "tcp://127.0.0.1:0", "kv@test@toy"
				}
				var out strings.Builder
				err := serveShared(&out, tc.c, o)
				if cerr := o.close(&out); err == nil {
					err = cerr
				}
				stop.Store(true)
				load.Wait()
				if err != nil {
					t.Fatalf("%v\n%s", err, out.String())
				}
				if !strings.Contains(out.String(), "0 live, 0 blocks in use") {
					t.Fatalf("unbalanced:\n%s", out.String())
				}
				if m := preempted.FindStringSubmatch(out.String()); m != nil {
					n, _ := strconv.Atoi(m[1])
					total += n
				}
			}
		})
	}
	if total == 0 {
		t.Error("no run preempted: the test does not reach the full-pool path")
	}
	t.Logf("%d preemptions in all", total)
}

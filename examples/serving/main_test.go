package main

import (
	"strings"
	"testing"
)

func TestServeBalances(t *testing.T) {
	for _, c := range []config{
		{requests: 64, workers: 4, arrivals: 8, blocks: 4096, tokensPerBlock: 16, prompt: 256, decode: 64},
		// A pool too small for every request at once: admissions wait.
		{requests: 64, workers: 2, arrivals: 16, blocks: 128, tokensPerBlock: 16, prompt: 64, decode: 32},
	} {
		var out strings.Builder
		if err := serve(&out, c); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "0 live") || !strings.Contains(out.String(), "0 rejected") {
			t.Fatalf("unbalanced:\n%s", out.String())
		}
	}
}

func TestServeSharedSavesBlocks(t *testing.T) {
	for _, c := range []config{
		{requests: 64, workers: 4, arrivals: 8, blocks: 4096, tokensPerBlock: 16, prompt: 64, decode: 32, system: 512, prompts: 2},
		// A pool too small for every request at once: admissions wait and
		// cached system prompts are evicted and recomputed.
		{requests: 48, workers: 2, arrivals: 16, blocks: 160, tokensPerBlock: 16, prompt: 32, decode: 16, system: 256, prompts: 3},
	} {
		var out strings.Builder
		if err := serveShared(&out, c); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "0 live, 0 blocks in use") || !strings.Contains(out.String(), "% saved") {
			t.Fatalf("unbalanced:\n%s", out.String())
		}
	}
}

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

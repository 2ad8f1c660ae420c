package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// tieredConfig is a chat whose conversations the pool cannot all hold:
// their blocks are evicted between turns and come back from the tiers.
func tieredConfig() config {
	return config{requests: 96, workers: 2, arrivals: 8, blocks: 192, tokensPerBlock: 16, prompt: 32, decode: 16,
		system: 64, prompts: 2, conversations: 16, tiers: true, hostBlocks: 256, diskBlocks: 1024}
}

var tierLine = regexp.MustCompile(`tier (\w+) \((\w+)\): (\d+) hit blocks \((\d+) tokens\), (\d+) loaded; (\d+) blocks stored`)

// tierHits returns the hit blocks and loaded blocks the run printed per tier.
func tierHits(t *testing.T, out string) (hits, loaded map[string]int) {
	t.Helper()
	hits, loaded = map[string]int{}, map[string]int{}
	for _, m := range tierLine.FindAllStringSubmatch(out, -1) {
		hits[m[1]], _ = strconv.Atoi(m[3])
		loaded[m[1]], _ = strconv.Atoi(m[5])
	}
	return hits, loaded
}

// A host tier behind a small pool: turns find their conversation's
// evicted blocks in the tier, and every block is accounted for (serveShared
// checks the pool, the manager and each tier; the report says so).
func TestServeSharedTiers(t *testing.T) {
	c := tieredConfig()
	var out strings.Builder
	require.NoError(t, serveShared(&out, c, &observer{}), out.String())
	hits, loaded := tierHits(t, out.String())
	require.Positive(t, hits["host"], out.String())
	require.Positive(t, loaded["host"], out.String())
	require.Contains(t, out.String(), "0 live, 0 blocks in use")
}

// A disk tier behind a host tier too small for the chat: disk hits; a
// second run on the same directory opens the blocks of the first again.
func TestServeSharedDiskTier(t *testing.T) {
	c := tieredConfig()
	c.hostBlocks, c.disk = 32, t.TempDir()
	var out strings.Builder
	require.NoError(t, serveShared(&out, c, &observer{}), out.String())
	hits, _ := tierHits(t, out.String())
	require.Positive(t, hits["disk"], out.String())
	require.Contains(t, out.String(), "tier disk: opened with 0 blocks recovered")

	out.Reset()
	require.NoError(t, serveShared(&out, c, &observer{}), out.String())
	require.Regexp(t, `tier disk: opened with [1-9]\d* blocks recovered, 0 slots discarded`, out.String())
	hits, _ = tierHits(t, out.String())
	require.Positive(t, hits["disk"], out.String())
}

// With metrics on, each tier has its collector: the last scrape shows the
// hits the run printed, and usage summing to the capacity.
func TestServeTierMetrics(t *testing.T) {
	c := tieredConfig()
	c.disk = t.TempDir()
	reg := prometheus.NewRegistry()
	var out strings.Builder
	require.NoError(t, serveShared(&out, c, &observer{reg: reg}), out.String())
	mfs, err := reg.Gather()
	require.NoError(t, err)
	values := map[string]float64{} // name{tier,label} -> value
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "locus_tier_") {
			continue
		}
		for _, m := range mf.Metric {
			key := mf.GetName()
			for _, l := range m.Label {
				if l.GetName() != "medium" && l.GetName() != "block_size" {
					key += "," + l.GetValue()
				}
			}
			values[key] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	for _, name := range []string{"host", "disk"} {
		capacity := float64(c.hostBlocks)
		if name == "disk" {
			capacity = float64(c.diskBlocks)
		}
		require.Equal(t, 1.0, values["locus_tier_config_info,"+strconv.Itoa(int(capacity))+","+name], "config of %s: %v", name, values)
		sum := 0.0
		for _, state := range []string{"free", "evictable", "store_pending", "load_pinned"} {
			sum += values["locus_tier_blocks,"+state+","+name]
		}
		require.Equal(t, capacity, sum, name)
		require.Zero(t, values["locus_tier_jobs_in_flight,"+name], name)
	}
	// The tiers closed with the run: the scrape reads their final counts.
	// A tier loads what kv served, and loads kv dropped (a sequence
	// preempted before they completed).
	_, loaded := tierHits(t, out.String())
	require.Positive(t, values["locus_tier_lookups_total,hit,disk"])
	require.Positive(t, loaded["disk"])
	for _, name := range []string{"host", "disk"} {
		require.GreaterOrEqual(t, values["locus_tier_loaded_blocks_total,"+name], float64(loaded[name]), name)
		require.Equal(t, values["locus_tier_loaded_blocks_total,"+name]*4096, values["locus_tier_loaded_bytes_total,"+name], name)
	}
	require.Contains(t, values, "locus_tier_discarded_slots_total,corrupt,disk")
}

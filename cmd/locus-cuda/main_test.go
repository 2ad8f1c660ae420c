package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	var m Measurement
	m.summarize([]float64{3, 1, 2, 10})
	if m.Reps != 4 || m.Min != 1 || m.Max != 10 || m.Median != 2.5 {
		t.Errorf("summarize = %+v", m)
	}
	m.summarize([]float64{5, 1, 9})
	if m.Median != 5 {
		t.Errorf("odd median = %v", m.Median)
	}
}

// TestNoGPU runs the command's measuring path where there is no GPU: it
// must record why and render a section, not fail.
func TestNoGPU(t *testing.T) {
	r := measure(time.Second, io.Discard)
	if r.Error == "" {
		t.Skip("a GPU is present")
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gpu.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := reportFile(&b, path); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "no usable GPU") {
		t.Errorf("report:\n%s", b.String())
	}
}

func TestRender(t *testing.T) {
	r := &Results{When: "2026-01-01T00:00:00Z", GPU: "NVIDIA H100", DriverVersion: 12080, BatchCopy: true,
		RoundTrip: &RoundTrip{Bytes: 128 << 20, Registered: true, OK: true, SHA256: "abcdef0123456789abcdef"},
		Measurements: []Measurement{
			{Group: "g", Name: "1000 × 2 MiB to-host, cuMemcpyBatchAsync", Unit: "GB/s", Reps: 5, Median: 45, Min: 40, Max: 46, Note: "1 driver calls"},
			{Group: "g", Name: "broken", Unit: "GB/s", Error: "cuda: x"},
		}}
	var b bytes.Buffer
	if err := render(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NVIDIA H100", "12.8", "checksums equal", "90 % of 50 GB/s", "error: `cuda: x`"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

func TestSizeName(t *testing.T) {
	for n, want := range map[int64]string{64 * kib: "64 KiB", 2 * mib: "2 MiB", gib: "1 GiB", 8 * gib: "8 GiB"} {
		if got := sizeName(n); got != want {
			t.Errorf("sizeName(%d) = %q", n, got)
		}
	}
}

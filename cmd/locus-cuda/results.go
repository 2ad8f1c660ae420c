package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Results is what one run found.
type Results struct {
	When          string        `json:"when"`
	GPU           string        `json:"gpu,omitempty"`
	DriverVersion int           `json:"driver_version,omitempty"` // cuDriverGetVersion
	MemoryMiB     int64         `json:"memory_mib,omitempty"`
	GranularityKi int64         `json:"granularity_kib,omitempty"`
	BatchCopy     bool          `json:"batch_copy"` // cuMemcpyBatchAsync resolved
	Error         string        `json:"error,omitempty"`
	RoundTrip     *RoundTrip    `json:"round_trip,omitempty"`
	Measurements  []Measurement `json:"measurements"`
	Seconds       float64       `json:"seconds"`
}

// RoundTrip is the device → host tier → disk → host → device check.
type RoundTrip struct {
	Bytes      int    `json:"bytes"`
	Registered bool   `json:"registered"`
	SHA256     string `json:"sha256,omitempty"`
	OK         bool   `json:"ok"`
	Error      string `json:"error,omitempty"`
}

// Measurement is one measured quantity over several repetitions.
type Measurement struct {
	Group  string  `json:"group"`
	Name   string  `json:"name"`
	Unit   string  `json:"unit"`
	Reps   int     `json:"reps"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Note   string  `json:"note,omitempty"`
	Error  string  `json:"error,omitempty"`
}

// summarize fills the statistics from the repetitions' values.
func (m *Measurement) summarize(vals []float64) {
	if len(vals) == 0 {
		return
	}
	s := slices.Clone(vals)
	slices.Sort(s)
	m.Reps, m.Min, m.Max = len(s), s[0], s[len(s)-1]
	if n := len(s); n%2 == 1 {
		m.Median = s[n/2]
	} else {
		m.Median = (s[n/2-1] + s[n/2]) / 2
	}
}

// h100Link is the large-block DMA bandwidth per direction vLLM reports on
// H100 (PCIe Gen5), the yardstick of the batched copy.
const h100Link = 50.0

func render(w io.Writer, r *Results) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## GPU: backing/cuda on %s\n\n", or(r.GPU, "no GPU"))
	if r.Error != "" {
		fmt.Fprintf(&b, "The run found no usable GPU: `%s`.\n", r.Error)
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "Run %s; CUDA driver %d.%d (cuDriverGetVersion %d), %d MiB, mapping granularity %d KiB, cuMemcpyBatchAsync %s; %.0f s in all.\n\n",
		r.When, r.DriverVersion/1000, r.DriverVersion%1000/10, r.DriverVersion, r.MemoryMiB, r.GranularityKi, yes(r.BatchCopy, "available", "absent"), r.Seconds)
	if rt := r.RoundTrip; rt != nil {
		fmt.Fprintf(&b, "Round trip device → host tier (%s mmap) → disk → host → device, %d MiB of random bytes: %s",
			yes(rt.Registered, "registered", "unregistered"), rt.Bytes>>20, yes(rt.OK, "checksums equal", "**FAILED**"))
		if rt.SHA256 != "" {
			fmt.Fprintf(&b, " (sha256 %.16s…)", rt.SHA256)
		}
		if rt.Error != "" {
			fmt.Fprintf(&b, ": `%s`", rt.Error)
		}
		b.WriteString(".\n\n")
	}
	group := ""
	for _, m := range r.Measurements {
		if m.Group != group {
			group = m.Group
			fmt.Fprintf(&b, "\n### %s\n\n| measurement | median | min | max | reps | note |\n|---|---:|---:|---:|---:|---|\n", group)
		}
		if m.Error != "" {
			fmt.Fprintf(&b, "| %s | — | — | — | %d | error: `%s` |\n", m.Name, m.Reps, m.Error)
			continue
		}
		note := m.Note
		if m.Unit == "GB/s" && strings.Contains(m.Name, "1000 ×") && strings.Contains(m.Name, "2 MiB") {
			note = strings.TrimPrefix(fmt.Sprintf("%s; %.0f %% of %.0f GB/s (vLLM, H100)", note, 100*m.Median/h100Link, h100Link), "; ")
		}
		fmt.Fprintf(&b, "| %s | %.3g %s | %.3g | %.3g | %d | %s |\n", m.Name, m.Median, m.Unit, m.Min, m.Max, m.Reps, note)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func yes(b bool, t, f string) string {
	if b {
		return t
	}
	return f
}

func now() string { return time.Now().UTC().Format(time.RFC3339) }

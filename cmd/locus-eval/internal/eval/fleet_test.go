package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

// The fixture is a -quick fleet document with remote-tier runs added by
// hand (copies of the local ones with a remote tier's bytes).
const fleetFixture = "testdata/fleet.json"

func TestFleetMarkdown(t *testing.T) {
	d, err := ReadFleet(fleetFixture)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	WriteFleetMarkdown(&b, d)
	md := b.String()
	for _, want := range []string{
		"\n## A fleet: engines behind a router, with and without a shared remote tier\n",
		"| machine | not recorded (this fleet document names none) |",
		"| fleet | 3 engines, each a hot pool of 40 blocks and a host tier of 96 blocks (4.0 KiB blocks of 16 tokens), and a remote tier on a Redis server shared by all (1024 blocks tracked per engine); the chat trace: 12 conversations × 3 turns",
		"| remote tier | Redis at 127.0.0.1:6399 |",
		"| round-robin | no | 7488 | 4128 | 55.1 % | 3696 | 432 | 0 | 4128 | 1.0 MiB / 0.1 MiB | – | 12 (56 %), 12 (57 %), 12 (53 %) | – |",
		"| kv-aware | yes | 7488 | 5952 | 79.5 % | 5920 | 32 | 0 | 5952 | 0.5 MiB / 0.0 MiB | 1.0 MiB / 0.1 MiB | 12 (79 %), 12 (79 %), 12 (79 %) | 33 |",
		"every engine's last scrape equals its own count of hot hits",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the section lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| date |") {
		t.Error("a date without one in the document")
	}
	var txt bytes.Buffer
	if err := WriteFleetText(&txt, d); err != nil || !strings.Contains(txt.String(), "kv-aware") {
		t.Errorf("text: %v\n%s", err, txt.String())
	}
}

// A document with the identity the fleet command does not write yet
// renders it.
func TestFleetMachine(t *testing.T) {
	b, err := os.ReadFile(fleetFixture)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	mach := ThisMachine()
	m["machine"] = mach
	m["created"] = "2026-01-02T03:04:05Z"
	m["revision"] = Revision{Module: "m", VCS: "abc"}
	b, _ = json.Marshal(m)
	d, err := ParseFleet(b)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	WriteFleetMarkdown(&out, d)
	for _, want := range []string{"| machine | " + mach.String() + " |", "| date | 2026-01-02 03:04 UTC |", "| revision | m `abc` |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("lacks %q:\n%s", want, out.String())
		}
	}
}

func TestFleetBadDocuments(t *testing.T) {
	good, err := os.ReadFile(fleetFixture)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(m map[string]any)) []byte { return editJSON(t, good, f) }
	run := func(m map[string]any) map[string]any { return m["runs"].([]any)[0].(map[string]any) }
	for name, b := range map[string][]byte{
		"unknown field": edit(func(m map[string]any) { m["extra"] = 1 }),
		"schema":        edit(func(m map[string]any) { m["schema"] = AdaptersSchema }),
		"no runs":       edit(func(m map[string]any) { m["runs"] = []any{} }),
		"no engines":    edit(func(m map[string]any) { m["config"].(map[string]any)["engines"] = 0 }),
		"hits":          edit(func(m map[string]any) { run(m)["prefix_hit_tokens"] = 1e9 }),
		"tiers":         edit(func(m map[string]any) { run(m)["remote"] = true }),
		"engine count":  edit(func(m map[string]any) { run(m)["engines"] = []any{} }),
	} {
		if _, err := ParseFleet(b); !errors.Is(err, ErrDocument) {
			t.Errorf("%s: %v, want ErrDocument", name, err)
		}
	}
}

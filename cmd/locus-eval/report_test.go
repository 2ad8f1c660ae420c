package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/locus-go/locus/cmd/locus-eval/internal/eval"
)

// What the fleet command writes, report reads: eval.Fleet mirrors the
// fleet command's document field for field (strictly), so a field added
// to one and not the other fails here. Report renders it as a section
// after the many-cores ones, and as text with -text.
func TestReportFleet(t *testing.T) {
	status, out, errOut := runCmd(t, "fleet", "-quick", "-json")
	if status != 0 {
		t.Fatalf("fleet: status %d: %s", status, errOut)
	}
	d, err := eval.ParseFleet([]byte(out))
	if err != nil {
		t.Fatalf("the fleet command's document does not parse as eval.Fleet: %v", err)
	}
	if len(d.Runs) != 2 || d.RemoteSkipped == "" {
		t.Errorf("%d runs, remote skipped %q", len(d.Runs), d.RemoteSkipped)
	}
	path := filepath.Join(t.TempDir(), "fleet.json")
	if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	status, md, errOut := runCmd(t, "report", "internal/eval/testdata/scoreboard.json", "internal/eval/testdata/adapters.json", path)
	if status != 0 {
		t.Fatalf("report: status %d: %s", status, errOut)
	}
	a, f, how := strings.Index(md, "\n## Adapters: "), strings.Index(md, "\n## A fleet: "), strings.Index(md, "\n## How the figures are made")
	if a < 0 || f < a || how < f {
		t.Errorf("sections at %d (adapters), %d (fleet), %d (method); want them in that order", a, f, how)
	}
	if !strings.Contains(md, "go run ./cmd/locus-eval report scoreboard.json adapters.json fleet.json`") {
		t.Error("the command line does not name the documents")
	}
	status, txt, errOut := runCmd(t, "report", "-text", "internal/eval/testdata/scoreboard.json", path)
	if status != 0 || !strings.Contains(txt, "Fleet: 3 engines") {
		t.Errorf("report -text: status %d: %s\n%s", status, errOut, txt)
	}
}

// A scoreboard rendered alone has neither section, and a broken adapters
// or fleet document is refused (status 2) naming its file.
func TestReportAdaptersFleetDocuments(t *testing.T) {
	status, md, _ := runCmd(t, "report", "internal/eval/testdata/scoreboard.json")
	if status != 0 || strings.Contains(md, "## Adapters") || strings.Contains(md, "## A fleet") {
		t.Errorf("status %d; sections without their documents", status)
	}
	dir := t.TempDir()
	for name, doc := range map[string]string{
		"adapters.json": `{"schema": "` + eval.AdaptersSchema + `", "schema_version": 1}`,
		"fleet.json":    `{"schema": "` + eval.FleetSchema + `", "runs": [], "surprise": 1}`,
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		status, _, errOut := runCmd(t, "report", "internal/eval/testdata/scoreboard.json", path)
		if status != 2 || !strings.Contains(errOut, name) {
			t.Errorf("%s: status %d, stderr %q", name, status, errOut)
		}
	}
}

// The chat and tiers commands' documents render as sections of their own,
// what the commands print, and a document with a field they do not write
// is refused.
func TestReportChatTiers(t *testing.T) {
	dir := t.TempDir()
	status, chat, errOut := runCmd(t, "chat", "-traces", "1", "-conversations", "4", "-json")
	if status != 0 {
		t.Fatalf("chat: status %d: %s", status, errOut)
	}
	chatPath := filepath.Join(dir, "chat.json")
	if err := os.WriteFile(chatPath, []byte(chat), 0o600); err != nil {
		t.Fatal(err)
	}
	status, md, errOut := runCmd(t, "report", "internal/eval/testdata/scoreboard.json", "testdata/tiers-before-chat.json", chatPath)
	if status != 0 {
		t.Fatalf("report: status %d: %s", status, errOut)
	}
	ti, ch := strings.Index(md, "\n## Offload tiers: "), strings.Index(md, "\n## The prefix cache: what it saves and what it costs (sha256_cbor; ")
	if ti < 0 || ch < ti || !strings.Contains(md[ch:], "shared prefixes (kv.Manager)") || !strings.Contains(md[ti:], "ADR-006") {
		t.Errorf("sections at %d (tiers), %d (chat):\n%s", ti, ch, md)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(strings.Replace(chat, `"requests"`, `"surprise": 1, "requests"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if status, _, errOut := runCmd(t, "report", "internal/eval/testdata/scoreboard.json", bad); status != 2 || !strings.Contains(errOut, "bad.json") {
		t.Errorf("a chat document with an unknown field: status %d: %s", status, errOut)
	}
}

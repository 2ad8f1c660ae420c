package kv

import (
	"os/exec"
	"regexp"
	"testing"
)

// TestHotPathInlines pins the compiler decisions kv's per-call paths rely
// on: the sequence-id check every call starts with (liveSeq, its slow
// path seqError out of line) and the event log's per-block records, which
// cost a nil check and no call without a subscriber. A worker's Release
// makes two calls, the id's encoding (relayHandle, into which the codec
// inlines) and the push: the relay sender's checks and Send inline into it.
func TestHotPathInlines(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	report, err := exec.Command(gobin, "build", "-o", "/dev/null", "-gcflags=-m", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, report)
	}
	for _, fn := range []string{`\(\*Manager\)\.liveSeq`, `\(\*Groups\)\.liveSeq`, `\(\*eventLog\)\.stored`, `\(\*eventLog\)\.removed`} {
		if !regexp.MustCompile(`: can inline ` + fn + `\b`).Match(report) {
			t.Errorf("%s no longer inlines", fn)
		}
	}
	for _, callee := range []string{`relay\.\(\*Sender\[[^\n]*\]\)\.Stopped`, `relay\.\(\*Sender\[[^\n]*\]\)\.Send`, `SeqID\.handle`, `relay\.ID\.Encode`} {
		if !regexp.MustCompile(`release\.go:\d+:\d+: inlining call to ` + callee).Match(report) {
			t.Errorf("%s no longer inlines into the releaser", callee)
		}
	}
	for _, fn := range []string{`\(\*Manager\)\.seqError`} {
		if regexp.MustCompile(`: can inline ` + fn + `\b`).Match(report) {
			t.Errorf("%s inlines: its callers' hot paths grow by the slow path", fn)
		}
	}
}

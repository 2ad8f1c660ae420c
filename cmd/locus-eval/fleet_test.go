package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/locus-go/locus/cmd/locus-eval/internal/eval"
)

// init runs the engine process of fleet's process mode when the test
// binary is re-executed as one (fleetEngineEnv set): the child path of
// the command, through run, before the tests' flags are parsed.
func init() {
	if os.Getenv(fleetEngineEnv) != "" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
}

// runFleetDoc runs "fleet -quick -json" with extra flags and decodes it.
func runFleetDoc(t *testing.T, extra ...string) eval.Fleet {
	t.Helper()
	var out, errb bytes.Buffer
	args := append([]string{"fleet", "-quick", "-json"}, extra...)
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var d eval.Fleet
	if err := json.Unmarshal(out.Bytes(), &d); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	return d
}

// checkFleetDoc checks what every run must show: every request routed and
// accounted, the engines' metrics scraped over HTTP and equal to their
// accounting at the end, and KV-aware routing hitting more than
// round-robin without the remote tier (and no less with it).
func checkFleetDoc(t *testing.T, d eval.Fleet, runs int) {
	t.Helper()
	if len(d.Runs) != runs {
		t.Fatalf("%d runs, want %d", len(d.Runs), runs)
	}
	want := d.Config.Conversations * d.Config.Turns
	byKey := map[string]eval.FleetRun{}
	for _, r := range d.Runs {
		n := 0
		for _, e := range r.Engines {
			n += e.Requests
		}
		switch {
		case r.Requests != want || n != want:
			t.Errorf("%s remote=%v: %d requests, %d over the engines; want %d", r.Router, r.Remote, r.Requests, n, want)
		case r.HitTokens == 0 || r.HitTokens > r.PromptTokens || r.NotRecomputed > r.HitTokens:
			t.Errorf("%s remote=%v: %d hit and %d not recomputed of %d tokens", r.Router, r.Remote, r.HitTokens, r.NotRecomputed, r.PromptTokens)
		case r.Scrapes < uint64(2*len(r.Engines)) || r.ScrapeErrors != 0 || !r.ScrapeMatches:
			t.Errorf("%s remote=%v: %d scrapes, %d errors, final matches %v", r.Router, r.Remote, r.Scrapes, r.ScrapeErrors, r.ScrapeMatches)
		case r.IndexEvents == 0:
			t.Errorf("%s remote=%v: the index saw no events", r.Router, r.Remote)
		}
		byKey[r.Router+strconv.FormatBool(r.Remote)] = r
	}
	for _, remote := range []string{"false", "true"} {
		rr, ok1 := byKey["round-robin"+remote]
		ka, ok2 := byKey["kv-aware"+remote]
		// Without the shared tier KV-aware routing must hit more; with it,
		// round-robin can reach the same ceiling by loading remotely.
		if ok1 && ok2 && (ka.HitTokens < rr.HitTokens || remote == "false" && ka.HitTokens == rr.HitTokens) {
			t.Errorf("remote=%s: kv-aware hit %d tokens, round-robin %d", remote, ka.HitTokens, rr.HitTokens)
		}
	}
}

// sameCounts fails unless the two documents' runs have the same counts:
// everything but times, scrape counts and URLs.
func sameCounts(t *testing.T, a, b eval.Fleet) {
	t.Helper()
	if len(a.Runs) != len(b.Runs) {
		t.Fatalf("%d runs and %d", len(a.Runs), len(b.Runs))
	}
	for i := range a.Runs {
		ra, rb := a.Runs[i], b.Runs[i]
		for _, r := range []*eval.FleetRun{&ra, &rb} {
			r.Seconds, r.Scrapes = 0, 0
			r.Engines = append([]eval.FleetEngine(nil), r.Engines...)
			for j := range r.Engines {
				e := &r.Engines[j]
				e.MetricsURL, e.ScrapedLoaded = "", 0
			}
		}
		if !reflect.DeepEqual(ra, rb) {
			t.Errorf("%s remote=%v: the counts differ:\n%+v\n%+v", ra.Router, ra.Remote, ra, rb)
		}
	}
}

// TestFleetQuick runs the engines as child processes (the test binary,
// re-executed) and in process, and wants the same counts from both.
func TestFleetQuick(t *testing.T) {
	d := runFleetDoc(t)
	checkFleetDoc(t, d, 2)
	if !strings.Contains(d.Config.Processes, "child processes") || !strings.Contains(d.Config.Events, "fleet.Follow") {
		t.Errorf("the document says engines %q, events %q; want child processes followed over ZMQ", d.Config.Processes, d.Config.Events)
	}
	in := runFleetDoc(t, "-inprocess")
	checkFleetDoc(t, in, 2)
	if !strings.HasPrefix(in.Config.Processes, "in process") || !strings.HasPrefix(in.Config.Events, "in process") {
		t.Errorf("-inprocess: the document says engines %q, events %q", in.Config.Processes, in.Config.Events)
	}
	sameCounts(t, d, in)
	checkNoFleetChildren(t)
	if d.RemoteSkipped == "" {
		t.Error("no -redis, and the document does not say the remote rows were skipped")
	}
	var out, errb bytes.Buffer
	if code := run([]string{"fleet", "-quick"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, s := range []string{"kv-aware", "round-robin", "remote tier: skipped"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, out.String())
		}
	}
}

func TestFleetFlags(t *testing.T) {
	for _, args := range [][]string{
		{"fleet", "-engines", "0"},
		{"fleet", "-hot-blocks", "-1"},
		{"fleet", "-scrape", "0s"},
		{"fleet", "extra"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// TestFleetMiniredis runs the remote-tier rows against an in-process
// miniredis: always, without a redis-server.
func TestFleetMiniredis(t *testing.T) {
	srv, err := miniredis.Run()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	d := runFleetDoc(t, "-redis", srv.Addr())
	checkFleetDoc(t, d, 4)
	checkRemote(t, d)
	in := runFleetDoc(t, "-redis", srv.Addr(), "-inprocess")
	checkFleetDoc(t, in, 4)
	sameCounts(t, d, in)
	checkNoFleetChildren(t)
}

// TestFleetEngineFails: an engine process that dies, or stalls, fails the
// run with an error naming it, within the timeouts, and leaves no child
// behind.
func TestFleetEngineFails(t *testing.T) {
	answer, exit := fleetAnswerTimeout, fleetExitTimeout
	t.Cleanup(func() { fleetAnswerTimeout, fleetExitTimeout, fleetTestSpec = answer, exit, nil })
	fleetAnswerTimeout, fleetExitTimeout = 2*time.Second, time.Second
	three := 3
	for _, tc := range []struct {
		name string
		set  func(*fleetSpec)
		want string
	}{
		{"dies", func(s *fleetSpec) { s.DieAt = &three }, "engine-1: step 3: fleet-engine: dying at step 3"},
		{"stalls", func(s *fleetSpec) { s.StallAt = &three }, "engine-1: step 3: no answer in 2s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fleetTestSpec = func(s *fleetSpec) {
				if s.Name == "engine-1" {
					tc.set(s)
				}
			}
			start := time.Now()
			var out, errb bytes.Buffer
			code := run([]string{"fleet", "-quick"}, &out, &errb)
			took := time.Since(start)
			msg := errb.String()
			if code != 2 || !strings.Contains(msg, "engine-1") || !strings.Contains(msg, tc.want) ||
				!strings.Contains(msg, errFleetEngine.Error()) {
				t.Errorf("exit %d, stderr %q; want 2 and an error naming engine-1 with %q", code, msg, tc.want)
			}
			t.Logf("%v: %s", took, strings.TrimSpace(msg))
			if took > 20*time.Second {
				t.Errorf("the run took %v to fail", took)
			}
			checkNoFleetChildren(t)
		})
	}
}

// checkNoFleetChildren fails if a process this one started is still
// there (Linux: /proc lists the children whose parent is this process).
func checkNoFleetChildren(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		return
	}
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	me := strconv.Itoa(os.Getpid())
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ")".
		i := bytes.LastIndexByte(b, ')')
		if f := strings.Fields(string(b[i+1:])); i >= 0 && len(f) > 1 && f[1] == me {
			t.Errorf("a child process is left: %s", strings.TrimSpace(string(b)))
		}
	}
}

// TestFleetEngineArgs: the hidden subcommand refuses arguments.
func TestFleetEngineArgs(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"fleet-engine", "x"}, &out, &errb); code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	if err := runFleetEngine(nil, strings.NewReader("not json"), &out); err == nil {
		t.Errorf("a bad spec: %v", err)
	}
}

// TestFleetRedisServer runs the remote-tier rows against a real
// redis-server on a loopback port. Outside CI it skips when redis-server is
// not on PATH; in CI (CI set) it fails instead.
func TestFleetRedisServer(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is not on PATH, and CI must run this test (apt-get install redis-server)")
		}
		t.Skip("redis-server is not on PATH (apt-get install redis-server); CI runs this test")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--protected-mode", "no", "--dir", t.TempDir(), "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not start listening in 10 s")
		}
	}
	d := runFleetDoc(t, "-redis", addr)
	checkFleetDoc(t, d, 4)
	checkRemote(t, d)
}

// checkRemote: with the shared tier, round-robin loads from it (the
// engines share what each stored) and hits more than without it.
func checkRemote(t *testing.T, d eval.Fleet) {
	t.Helper()
	var without, with eval.FleetRun
	for _, r := range d.Runs {
		if r.Router == "round-robin" && r.Remote {
			with = r
		} else if r.Router == "round-robin" {
			without = r
		}
	}
	if with.HitRemote == 0 || with.Tiers[1].LoadedBytes == 0 || with.Tiers[1].StoredBytes == 0 {
		t.Errorf("round-robin with the remote tier: %d remote hit tokens, tiers %+v", with.HitRemote, with.Tiers)
	}
	if with.HitTokens <= without.HitTokens {
		t.Errorf("round-robin: %d hit tokens with the remote tier, %d without", with.HitTokens, without.HitTokens)
	}
}

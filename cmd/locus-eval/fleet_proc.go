package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/locus-go/locus/bench"
	"github.com/locus-go/locus/cmd/locus-eval/internal/eval"
	"github.com/locus-go/locus/fleet"
	"github.com/locus-go/locus/kv"
	"github.com/locus-go/locus/kv/events"
	"github.com/locus-go/locus/metrics"
	"github.com/locus-go/locus/tier"
)

// The process mode: each engine runs in a child process, the command
// re-executed (os.Executable: under go run, the binary go run built; under
// go test, the test binary, which runs the child from an init function
// when fleetEngineEnv is set) with the hidden subcommand fleet-engine.
//
// The protocol is JSON values, one a line, on the child's stdin and
// stdout. The parent writes the fleetSpec; the child builds its engine, a
// kv/events Publisher on a loopback port (topic events.Topic(name,
// model), with a replay socket) and its metrics server, and answers a
// fleetHello with their addresses. Then, for each step, the parent writes
// a fleetCommand (the plan's requests to admit, the remote blocks to
// learn) and the child runs one engine step (fleetEngine.step, as the
// in-process mode does), flushes its publisher and answers a fleetAnswer:
// the requests finished, the events it has published so far, the blocks
// it stored in the remote tier. The parent follows every child's
// publisher with fleet.Follow into the router's index and, after each
// child's step, waits until the index has applied that many of its
// events before the next child steps: the index applies the engines'
// events in engine order, as in the in-process mode. A Collect command
// answers the engine's totals. The child exits when its stdin ends, so a
// parent that dies takes its children with it at their next read.

// fleetEngineEnv marks a child started by the process mode: a test
// binary, which cannot take the subcommand as an argument, runs the child
// when it is set.
const fleetEngineEnv = "LOCUS_EVAL_FLEET_ENGINE"

// Timeouts of the process mode (variables for tests).
var (
	// fleetAnswerTimeout bounds the wait for a child's answer (its start
	// included) and for the index to apply a step's events.
	fleetAnswerTimeout = 60 * time.Second
	// fleetExitTimeout is how long a child has to exit once its stdin is
	// closed before it is killed.
	fleetExitTimeout = 5 * time.Second
)

// errFleetEngine is matched by the errors of an engine process that died,
// stalled or failed.
var errFleetEngine = errors.New("engine process failed")

// fleetHello is a child's first answer.
type fleetHello struct {
	Events  string `json:"events"`  // the publisher's endpoint
	Replay  string `json:"replay"`  // its replay socket
	Metrics string `json:"metrics"` // the metrics URL
}

// fleetCommand is one request of the parent: a step, or Collect.
type fleetCommand struct {
	Step    int      `json:"step"` // 0 for the first
	Admit   []int    `json:"admit,omitempty"`
	Learn   [][]byte `json:"learn,omitempty"` // block hashes, group 0
	Collect bool     `json:"collect,omitempty"`
}

// fleetAnswer is a child's answer to a fleetCommand (or its hello).
type fleetAnswer struct {
	Error    string       `json:"error,omitempty"`
	Hello    *fleetHello  `json:"hello,omitempty"`
	Finished int          `json:"finished"`
	Events   uint64       `json:"events"`           // published so far
	Stored   [][]byte     `json:"stored,omitempty"` // block hashes stored in the remote tier
	Totals   *fleetTotals `json:"totals,omitempty"`
}

// runFleetEngine is the child: the hidden fleet-engine subcommand.
func runFleetEngine(args []string, stdin io.Reader, stdout io.Writer) (err error) {
	if len(args) > 0 {
		return fmt.Errorf("%w: fleet-engine takes no arguments (it is started by locus-eval fleet)", eval.ErrConfig)
	}
	dec, enc := json.NewDecoder(stdin), json.NewEncoder(stdout)
	var spec fleetSpec
	if err := dec.Decode(&spec); err != nil {
		return fmt.Errorf("fleet-engine: reading the spec: %w", err)
	}
	// An error after the spec goes to the parent as an answer too.
	defer func() {
		if err != nil {
			_ = enc.Encode(fleetAnswer{Error: err.Error()})
		}
	}()
	plan, err := bench.NewChatPlan(spec.Config.Chat)
	if err != nil {
		return err
	}
	if len(plan.Requests) != spec.Requests {
		return fmt.Errorf("fleet-engine: the plan has %d requests, the parent's %d", len(plan.Requests), spec.Requests)
	}
	pub, err := events.New("tcp://127.0.0.1:0", events.WithTopic(events.Topic(spec.Name, spec.Model)),
		events.WithReplay("tcp://127.0.0.1:0"))
	if err != nil {
		return err
	}
	defer func() {
		if cerr := pub.Close(); cerr != nil && !errors.Is(cerr, events.ErrDropped) {
			err = errors.Join(err, cerr)
		}
	}()
	var published uint64
	record := pub.Subscriber()
	e, err := newFleetEngine(spec, func(ev *kv.Event) { record(ev); published++ }, metrics.NewPublisher("events", pub))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, e.close()) }()
	hello := &fleetHello{Events: "tcp://" + pub.Addr().String(), Replay: "tcp://" + pub.ReplayAddr().String(), Metrics: e.url}
	if err := enc.Encode(fleetAnswer{Hello: hello}); err != nil {
		return err
	}
	var reqs []*bench.ChatRequest
	var learn []tier.Key
	for waited := false; ; {
		var c fleetCommand
		if err := dec.Decode(&c); errors.Is(err, io.EOF) {
			return nil // the parent is done, or gone
		} else if err != nil {
			return fmt.Errorf("fleet-engine: reading a command: %w", err)
		}
		if c.Collect {
			t := e.totals()
			if err := enc.Encode(fleetAnswer{Events: published, Totals: &t}); err != nil {
				return err
			}
			continue
		}
		if spec.DieAt != nil && c.Step == *spec.DieAt {
			return fmt.Errorf("fleet-engine: dying at step %d, as the test asked", c.Step)
		}
		if spec.StallAt != nil && c.Step == *spec.StallAt {
			time.Sleep(time.Hour)
		}
		if !waited { // the router's subscription must see the first batch
			ctx, cancel := context.WithTimeout(context.Background(), fleetAnswerTimeout)
			err := pub.WaitSubscribers(ctx, 1)
			cancel()
			if err != nil {
				return fmt.Errorf("fleet-engine: no router subscribed: %w", err)
			}
			waited = true
		}
		reqs, learn = reqs[:0], learn[:0]
		for _, i := range c.Admit {
			if i < 0 || i >= len(plan.Requests) {
				return fmt.Errorf("fleet-engine: request %d of %d", i, len(plan.Requests))
			}
			reqs = append(reqs, &plan.Requests[i])
		}
		for _, h := range c.Learn {
			learn = append(learn, tier.KeyOf(h, 0))
		}
		n, err := e.step(reqs, learn)
		if err != nil {
			return fmt.Errorf("step %d: %w", c.Step, err)
		}
		pub.Flush()
		a := fleetAnswer{Finished: n, Events: published}
		for _, k := range e.takeStored() {
			a.Stored = append(a.Stored, k.Hash[:])
		}
		if err := enc.Encode(a); err != nil {
			return err
		}
	}
}

// fleetChild is the parent's side of an engine process.
type fleetChild struct {
	name     string
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	enc      *json.Encoder
	answers  chan fleetAnswer // closed when the child's stdout ends
	stderr   *headWriter
	exited   chan struct{} // closed once Wait returned
	waitErr  error
	follower *fleet.Follower
	url      string
	learn    [][]byte // the last command's, reused
}

// startFleetChild starts spec's engine in a child process and follows its
// events into x.
func startFleetChild(spec fleetSpec, x *fleet.Index) (c *fleetChild, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("locating this binary to re-execute it: %w", err)
	}
	c = &fleetChild{name: spec.Name, answers: make(chan fleetAnswer, 1), stderr: &headWriter{max: 16 << 10}, exited: make(chan struct{})}
	c.cmd = exec.Command(exe, "fleet-engine")
	c.cmd.Env = append(os.Environ(), fleetEngineEnv+"=1")
	c.cmd.Stderr = c.stderr
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	c.cmd.Stdout = w
	err = c.cmd.Start()
	w.Close()
	if err != nil {
		out.Close()
		return nil, fmt.Errorf("%w: %s: %w", errFleetEngine, spec.Name, err)
	}
	go func() {
		defer out.Close()
		defer close(c.answers)
		dec := json.NewDecoder(out)
		for {
			var a fleetAnswer
			if dec.Decode(&a) != nil {
				return
			}
			c.answers <- a
		}
	}()
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.exited)
	}()
	defer func() {
		if err != nil {
			err = errors.Join(err, c.close())
			c = nil
		}
	}()
	c.enc = json.NewEncoder(c.stdin)
	if err := c.enc.Encode(spec); err != nil {
		return c, c.fail("sending its spec", err)
	}
	a, err := c.answer("starting")
	if err != nil {
		return c, err
	}
	if a.Hello == nil {
		return c, c.fail("starting", errors.New("no addresses in its first answer"))
	}
	c.url = a.Hello.Metrics
	c.follower, err = fleet.Follow(context.Background(), x, a.Hello.Events, events.WithReplayFrom(a.Hello.Replay))
	if err != nil {
		return c, c.fail("following its events", err)
	}
	return c, nil
}

// answer waits for the child's next answer, up to fleetAnswerTimeout.
func (c *fleetChild) answer(what string) (fleetAnswer, error) {
	t := time.NewTimer(fleetAnswerTimeout)
	defer t.Stop()
	select {
	case a, ok := <-c.answers:
		switch {
		case !ok:
			// Let Wait report the exit, briefly.
			select {
			case <-c.exited:
			case <-time.After(time.Second):
			}
			return a, c.fail(what, errors.New("it exited"))
		case a.Error != "": // the child's own error: its stderr says it again
			return a, fmt.Errorf("%w: %s: %s: %s", errFleetEngine, c.name, what, a.Error)
		}
		return a, nil
	case <-t.C:
		return fleetAnswer{}, c.fail(what, fmt.Errorf("no answer in %v", fleetAnswerTimeout))
	}
}

// fail returns an error naming the engine, with what it wrote on stderr.
func (c *fleetChild) fail(what string, err error) error {
	msg := strings.TrimSpace(c.stderr.String())
	select {
	case <-c.exited:
		if c.waitErr != nil && err != c.waitErr {
			err = fmt.Errorf("%w (%v)", err, c.waitErr)
		}
	default:
	}
	if msg != "" {
		return fmt.Errorf("%w: %s: %s: %w; its stderr: %s", errFleetEngine, c.name, what, err, msg)
	}
	return fmt.Errorf("%w: %s: %s: %w", errFleetEngine, c.name, what, err)
}

func (c *fleetChild) step(step int, admit []int, learn []tier.Key) (int, []tier.Key, error) {
	cmd := fleetCommand{Step: step, Admit: admit, Learn: c.learn[:0]}
	for _, k := range learn {
		cmd.Learn = append(cmd.Learn, k.Hash[:])
	}
	c.learn = cmd.Learn
	what := fmt.Sprintf("step %d", step)
	if err := c.enc.Encode(cmd); err != nil {
		return 0, nil, c.fail(what, err)
	}
	a, err := c.answer(what)
	if err != nil {
		return 0, nil, err
	}
	if err := c.caughtUp(what, a.Events); err != nil {
		return 0, nil, err
	}
	stored := make([]tier.Key, len(a.Stored))
	for i, h := range a.Stored {
		stored[i] = tier.KeyOf(h, 0)
	}
	return a.Finished, stored, nil
}

// caughtUp waits until the index has applied n events of the child.
func (c *fleetChild) caughtUp(what string, n uint64) error {
	deadline := time.Now().Add(fleetAnswerTimeout)
	for wait := 10 * time.Microsecond; ; wait = min(2*wait, time.Millisecond) {
		st := c.follower.Stats()
		if st.Events >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return c.fail(what, fmt.Errorf("the router's index applied %d of its %d events in %v (subscription %+v)",
				st.Events, n, fleetAnswerTimeout, st.Subscription))
		}
		time.Sleep(wait)
	}
}

func (c *fleetChild) totals() (fleetTotals, error) {
	if err := c.enc.Encode(fleetCommand{Collect: true}); err != nil {
		return fleetTotals{}, c.fail("collecting", err)
	}
	a, err := c.answer("collecting")
	if err != nil {
		return fleetTotals{}, err
	}
	if a.Totals == nil {
		return fleetTotals{}, c.fail("collecting", errors.New("no totals in its answer"))
	}
	return *a.Totals, nil
}

func (c *fleetChild) metricsURL() string { return c.url }

// close stops following the child, closes its stdin (it exits), and kills
// it if it has not exited in fleetExitTimeout.
func (c *fleetChild) close() error {
	var errs []error
	if c.follower != nil {
		errs = append(errs, c.follower.Close())
	}
	_ = c.stdin.Close()
	t := time.NewTimer(fleetExitTimeout)
	defer t.Stop()
	select {
	case <-c.exited:
		if c.waitErr != nil {
			errs = append(errs, c.fail("exiting", c.waitErr))
		}
	case <-t.C:
		_ = c.cmd.Process.Kill()
		<-c.exited
		errs = append(errs, fmt.Errorf("%w: %s: killed: it did not exit in %v", errFleetEngine, c.name, fleetExitTimeout))
	}
	for range c.answers { // the reader is done once stdout ends
	}
	return errors.Join(errs...)
}

// headWriter keeps the first max bytes written to it (the first error is
// the one to report), for any goroutine.
type headWriter struct {
	mu  sync.Mutex
	max int
	b   bytes.Buffer
}

func (w *headWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - w.b.Len(); room > 0 {
		w.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (w *headWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Every measurement runs in separate processes, so that memory layout
// (and whatever else a fresh process changes) varies between repetitions:
// the parent re-executes its own binary (os.Executable: under go run, the
// binary go run built) with childEnv set, writes the child's Spec to its
// stdin, reads progress lines from its stderr and the child's
// ProcessData, as JSON, from its stdout. The processes run one after
// another, never together.

// childEnv marks a measuring child process.
const childEnv = "LOCUS_EVAL_CHILD"

// progressPrefix starts a child's progress line on stderr.
const progressPrefix = "locus-eval-progress "

// Spec is the work of one measuring process.
type Spec struct {
	// Process is the process's index; it seeds the shuffles.
	Process int         `json:"process"`
	Groups  []GroupSpec `json:"groups"`
}

// ProcessData is what one process measured.
type ProcessData struct {
	Process int         `json:"process"`
	Groups  []GroupData `json:"groups"`
}

// repeat returns the specs of runs processes that all measure groups.
func repeat(groups []GroupSpec, runs int) []Spec {
	specs := make([]Spec, runs)
	for p := range specs {
		specs[p] = Spec{Process: p, Groups: groups}
	}
	return specs
}

// IsChild reports whether this process was started as a measuring child.
// A command (and a test binary, in TestMain) that runs measurements must
// call ChildMain first thing when it is.
func IsChild() bool { return os.Getenv(childEnv) != "" }

// ChildMain runs the Spec read from stdin, writes the ProcessData to
// stdout and returns the exit status.
func ChildMain() int {
	var spec Spec
	if err := json.NewDecoder(os.Stdin).Decode(&spec); err != nil {
		fmt.Fprintln(os.Stderr, "locus-eval child: reading spec:", err)
		return 2
	}
	out, err := measure(spec, func(n int) { fmt.Fprintf(os.Stderr, "%s%d\n", progressPrefix, n) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "locus-eval child:", err)
		return 2
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "locus-eval child: writing results:", err)
		return 2
	}
	return 0
}

// measure runs spec in this process; progress gets the number of blocks
// done so far, after every round.
func measure(spec Spec, progress func(done int)) (ProcessData, error) {
	rng := rand.New(rand.NewPCG(uint64(spec.Process)+1, 0x5eed))
	out := ProcessData{Process: spec.Process}
	done := 0
	for _, g := range spec.Groups {
		n := 0
		d, err := runGroup(g, rng, func() {
			done++
			if n++; n%len(g.Members) == 0 {
				progress(done)
			}
		})
		if err != nil {
			return out, fmt.Errorf("group %s: %w", g.ID, err)
		}
		out.Groups = append(out.Groups, d)
	}
	return out, nil
}

// runProcesses runs every spec in a child process of its own, one after
// another. progress gets the process index and the blocks it has done.
func runProcesses(specs []Spec, progress func(process, done int)) ([]ProcessData, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("locating this binary to re-execute it: %w", err)
	}
	var out []ProcessData
	for _, spec := range specs {
		d, err := runChild(exe, spec, func(n int) { progress(spec.Process, n) })
		if err != nil {
			return out, fmt.Errorf("process %d: %w", spec.Process+1, err)
		}
		out = append(out, d)
	}
	return out, nil
}

func runChild(exe string, spec Spec, progress func(int)) (ProcessData, error) {
	in, err := json.Marshal(spec)
	if err != nil {
		return ProcessData{}, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stdin = bytes.NewReader(in)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return ProcessData{}, err
	}
	if err := cmd.Start(); err != nil {
		return ProcessData{}, err
	}
	var errText strings.Builder
	readProgress(stderr, progress, &errText)
	if err := cmd.Wait(); err != nil {
		return ProcessData{}, fmt.Errorf("%w: %s", err, strings.TrimSpace(errText.String()))
	}
	var d ProcessData
	if err := json.Unmarshal(stdout.Bytes(), &d); err != nil {
		return ProcessData{}, fmt.Errorf("reading its results: %w", err)
	}
	return d, nil
}

// readProgress passes progress lines to progress and keeps the rest (at
// most 64 KiB of it) in rest.
func readProgress(r io.Reader, progress func(int), rest *strings.Builder) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if s, ok := strings.CutPrefix(line, progressPrefix); ok {
			if n, err := strconv.Atoi(s); err == nil {
				progress(n)
				continue
			}
		}
		if rest.Len() < 64<<10 {
			rest.WriteString(line)
			rest.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, os.ErrClosed) {
		rest.WriteString(err.Error())
	}
}

package eval

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Progress is where a measurement stands. The total is known before any
// work starts and never changes.
type Progress struct {
	// Process counts from 1 to Processes.
	Process, Processes int
	// Done and Total count blocks over all processes.
	Done, Total int
	// Group is the group being measured.
	Group   string
	Elapsed time.Duration
	// ETA is the estimated time left; negative while unknown.
	ETA time.Duration
}

// tracker turns the children's block counts into Progress. Every process
// does the same work, so once the first has finished, its timeline
// (elapsed time at every count) predicts the others; until then the
// estimate is the elapsed time per block so far.
type tracker struct {
	specs    []Spec
	per      int // blocks per process
	report   func(Progress)
	start    time.Time
	pStart   time.Time
	current  int
	timeline []time.Duration // process 0: elapsed at each done count
}

func newTracker(specs []Spec, report func(Progress)) *tracker {
	t := &tracker{specs: specs, report: report, start: time.Now(), pStart: time.Now()}
	if len(specs) > 0 {
		for _, g := range specs[0].Groups {
			t.per += g.blocks()
		}
	}
	return t
}

// update is called with a process's blocks done so far.
func (t *tracker) update(process, done int) {
	if t.report == nil || t.per == 0 {
		return
	}
	now := time.Now()
	if process != t.current {
		t.current, t.pStart = process, now
	}
	inProc := now.Sub(t.pStart)
	if process == 0 {
		for len(t.timeline) <= done {
			t.timeline = append(t.timeline, inProc)
		}
	}
	left := len(t.specs) - process - 1
	eta := time.Duration(-1)
	switch {
	case process > 0 && len(t.timeline) > t.per:
		full := t.timeline[t.per]
		eta = max(full-t.timeline[min(done, t.per)], 0) + time.Duration(left)*full
	case done >= max(1, t.per/25): // before that, one slow block would dominate
		perBlock := inProc / time.Duration(done)
		eta = perBlock*time.Duration(t.per-done) + time.Duration(left)*perBlock*time.Duration(t.per)
	}
	t.report(Progress{Process: process + 1, Processes: len(t.specs), Done: process*t.per + done,
		Total: len(t.specs) * t.per, Group: t.groupAt(done), Elapsed: now.Sub(t.start), ETA: eta})
}

// groupAt names the group that block count done falls in.
func (t *tracker) groupAt(done int) string {
	n, id := 0, ""
	for _, g := range t.specs[0].Groups {
		if id = g.ID; done < n+g.blocks() {
			break
		}
		n += g.blocks()
	}
	return id
}

// NewProgressPrinter returns a Progress sink that writes to w: on a
// terminal one line updated in place (at most ten times a second), else a
// plain line whenever the measured group changes. Call the returned done
// function when the run ends.
func NewProgressPrinter(w io.Writer, terminal bool) (report func(Progress), done func()) {
	var mu sync.Mutex
	var last time.Time
	lastKey := ""
	wrote := false
	report = func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		line := fmt.Sprintf("process %d/%d  %-26s %3d%%  %s elapsed", p.Process, p.Processes, p.Group,
			100*p.Done/max(p.Total, 1), p.Elapsed.Round(time.Second))
		if p.ETA >= 0 {
			line += fmt.Sprintf(", about %s left", p.ETA.Round(time.Second))
		}
		if terminal {
			if time.Since(last) < 100*time.Millisecond && p.Done < p.Total {
				return
			}
			last = time.Now()
			fmt.Fprintf(w, "\r\033[K%s", line)
			wrote = true
			return
		}
		if key := fmt.Sprint(p.Process, p.Group); key != lastKey {
			lastKey = key
			fmt.Fprintln(w, line)
		}
	}
	done = func() {
		mu.Lock()
		defer mu.Unlock()
		if terminal && wrote {
			fmt.Fprint(w, "\r\033[K")
		}
	}
	return report, done
}

package pages

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

// parsePages returns the go command and pages.go parsed; it skips the test
// where there is no go command.
func parsePages(t *testing.T) (gobin string, fset *token.FileSet, f *ast.File) {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	fset = token.NewFileSet()
	f, err = parser.ParseFile(fset, "pages.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	return gobin, fset, f
}

// TestNoBoundsCheckInValid pins that the run check indexes the page
// metadata without a bounds check, on 64- and 32-bit targets: every run
// method calls valid.
func TestNoBoundsCheckInValid(t *testing.T) {
	gobin, fset, f := parsePages(t)
	lo, hi := 0, 0
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "valid" && fd.Recv != nil {
			lo, hi = fset.Position(fd.Pos()).Line, fset.Position(fd.End()).Line
		}
	}
	if lo == 0 {
		t.Fatal("(*Pool).valid not found in pages.go")
	}
	found := regexp.MustCompile(`pages\.go:(\d+):\d+: Found IsInBounds`)
	for _, arch := range []string{"amd64", "386"} {
		cmd := exec.Command(gobin, "build", "-o", "/dev/null", "-gcflags=-d=ssa/check_bce/debug=1", ".")
		cmd.Env = append(cmd.Environ(), "GOARCH="+arch)
		report, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: go build: %v\n%s", arch, err, report)
		}
		for _, m := range found.FindAllStringSubmatch(string(report), -1) {
			if n, _ := strconv.Atoi(m[1]); n >= lo && n <= hi {
				t.Errorf("%s: valid (lines %d-%d) has a bounds check again: write the range test as uint(r.first) < uint(len(p.meta))", arch, lo, hi)
			}
		}
	}
}

// TestStepInlines pins that the per-call check for a waiting Snapshot costs
// one atomic load and no call: (*Pool).step inlines, with the cell's Wanted
// inlined into it, at every call site in pages.go; and that its slow path,
// (*Pool).publish, does not inline, so that Alloc, Free, Pin, Unpin and Evict
// do not carry its Stats (some 500 bytes) in their frames; and that reject,
// which does not publish, still inlines into lookup, which stays a leaf on
// every run method's path.
func TestStepInlines(t *testing.T) {
	gobin, fset, f := parsePages(t)
	stepLo, stepHi := 0, 0
	sites := map[int]bool{} // line of each p.step() call -> inlined
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			if n.Name.Name == "step" && n.Recv != nil {
				stepLo, stepHi = fset.Position(n.Pos()).Line, fset.Position(n.End()).Line
			}
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "step" {
				sites[fset.Position(n.Pos()).Line] = false
			}
		}
		return true
	})
	if stepLo == 0 || len(sites) == 0 {
		t.Fatal("(*Pool).step or its calls not found in pages.go")
	}
	// The decisions pinned are amd64's: on 386 an atomic load is a call,
	// and nothing that holds one inlines there (the 32-bit tests run
	// this test too).
	cmd := exec.Command(gobin, "build", "-o", "/dev/null", "-gcflags=-m", ".")
	cmd.Env = append(cmd.Environ(), "GOARCH=amd64")
	report, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, report)
	}
	if !regexp.MustCompile(`pages\.go:\d+:\d+: can inline \(\*Pool\)\.step\n`).Match(report) {
		t.Error("(*Pool).step no longer inlines: keep it to the Wanted load and a call of publish")
	}
	wanted := false
	for _, m := range regexp.MustCompile(`pages\.go:(\d+):\d+: inlining call to snapshot\.\(\*Cell\[[^\n]*\]\)\.Wanted\n`).FindAllSubmatch(report, -1) {
		if n, _ := strconv.Atoi(string(m[1])); n >= stepLo && n <= stepHi {
			wanted = true
		}
	}
	if !wanted {
		t.Error("snapshot.Cell.Wanted is not inlined into (*Pool).step: the check is a call, not one atomic load")
	}
	for _, m := range regexp.MustCompile(`pages\.go:(\d+):\d+: inlining call to \(\*Pool\)\.step\n`).FindAllSubmatch(report, -1) {
		n, _ := strconv.Atoi(string(m[1]))
		if _, ok := sites[n]; ok {
			sites[n] = true
		}
	}
	if regexp.MustCompile(`inlining call to \(\*Pool\)\.publish\n`).Match(report) {
		t.Error("(*Pool).publish is inlined: keep it //go:noinline, out of the frames of step's callers")
	}
	if !regexp.MustCompile(`pages\.go:\d+:\d+: inlining call to \(\*Pool\)\.reject\n`).Match(report) {
		t.Error("(*Pool).reject no longer inlines into lookup: keep calls (step, publish) out of it")
	}
	for line, inlined := range sites {
		if !inlined {
			t.Errorf("pages.go:%d: the call of (*Pool).step is not inlined", line)
		}
	}
}

package pool_test

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestCompilerDecisions pins what the pool's performance rests on and its
// docs say: the per-block steps (pop a free index, check a generation, push
// it back) compile to direct code inlined into every hot method, and the
// handle check indexes the generations without a bounds check. A refactor
// that pushes one of them over the inlining budget fails here, not in a
// benchmark nobody runs.
//
// The exported methods themselves are not inlinable (a non-inlined call
// costs 57 of the budget of 80, and each has a slow path that drains), so
// a call to Alloc or Bytes is one direct call; except Free, a wrapper that
// inlines into its caller around one call of freeOne, so that a layer over
// the pool (classes) pays one call per free, not two.
func TestCompilerDecisions(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	// go test -c compiles the generic methods' instantiations too (this
	// package's tests instantiate every method).
	cmd := exec.Command(gobin, "test", "-c", "-o", os.DevNull,
		"-gcflags=github.com/locus-go/locus/pool=-m -d=ssa/check_bce/debug=1", ".")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test -c: %v\n%s", err, out)
	}
	report := string(out) + "\n"

	for _, fn := range []string{"(*core).take", "(*core).put", "(*core).valid", "(*core).live",
		"(*core).markHigh", "(*ring).pop", "(*ring).pushBack", "(*ring).len"} {
		if !regexp.MustCompile(`can inline ` + regexp.QuoteMeta(fn) + `(\s|$)`).MatchString(report) {
			t.Errorf("%s is no longer inlinable", fn)
		}
	}

	funcs := funcLines(t, "pool.go")
	calls := compilerLines(report, "pool.go", regexp.MustCompile(`inlining call to (?:pool\.)?\((\*\w+)\)\.(\w+)`))
	for _, c := range []struct{ method, callee string }{
		{"Alloc", "take"}, {"AllocBytes", "take"}, {"AllocChunk", "take"},
		{"freeOne", "put"}, {"FreeChunk", "put"}, {"Bytes", "valid"}, {"release", "put"},
	} {
		if !calls.in(funcs[c.method], c.callee) {
			t.Errorf("%s does not inline %s", c.method, c.callee)
		}
	}

	if !regexp.MustCompile(`can inline pool\.\(\*Pool\[[^\n]*\]\)\.Free(\s|$)`).MatchString(report) {
		t.Error("Pool.Free is no longer inlinable: classes.Free then pays two calls per free")
	}

	checks := compilerLines(report, "pool.go", regexp.MustCompile(`Found (IsInBounds)`))
	if r := funcs["valid"]; checks.in(r, "IsInBounds") {
		t.Errorf("valid (lines %d-%d) has a bounds check again: index gens with a handle checked as uint(h.idx) < uint(len(c.gens))", r[0], r[1])
	}
}

// funcLines returns the first and last line of every function and method of
// a file of this package, by name.
func funcLines(t *testing.T, file string) map[string][2]int {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][2]int{}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok {
			m[fd.Name.Name] = [2]int{fset.Position(fd.Pos()).Line, fset.Position(fd.End()).Line}
		}
	}
	for _, want := range []string{"Alloc", "AllocBytes", "AllocChunk", "freeOne", "FreeChunk", "Bytes", "release", "valid"} {
		if _, ok := m[want]; !ok {
			t.Fatalf("%s has no function %s", file, want)
		}
	}
	return m
}

// compilerReport is the compiler's messages about one file: by line, the
// last submatch of each message that matched.
type compilerReport map[int][]string

func compilerLines(report, file string, re *regexp.Regexp) compilerReport {
	r := compilerReport{}
	sc := bufio.NewScanner(strings.NewReader(report))
	for sc.Scan() {
		// Messages name the file relative to the package or to the
		// module root, depending on where the instantiation was compiled.
		line := strings.TrimPrefix(strings.TrimPrefix(sc.Text(), "./"), "pool/")
		rest, ok := strings.CutPrefix(line, file+":")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(rest[:max(strings.IndexByte(rest, ':'), 0)])
		if err != nil {
			continue
		}
		if m := re.FindStringSubmatch(rest); m != nil {
			r[n] = append(r[n], m[len(m)-1])
		}
	}
	return r
}

// in reports whether a message naming what was reported within lines.
func (r compilerReport) in(lines [2]int, what string) bool {
	for n := lines[0]; n <= lines[1]; n++ {
		for _, w := range r[n] {
			if w == what {
				return true
			}
		}
	}
	return false
}

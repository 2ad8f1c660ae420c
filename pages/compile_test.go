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

// TestNoBoundsCheckInValid pins that the run check indexes the page
// metadata without a bounds check, on 64- and 32-bit targets: every run
// method calls valid.
func TestNoBoundsCheckInValid(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "pages.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
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

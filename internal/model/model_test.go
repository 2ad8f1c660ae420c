package model

import (
	"go/parser"
	"go/token"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestPerm: Perm draws what (*rand.Rand).Perm draws.
func TestPerm(t *testing.T) {
	for n := range 40 {
		a, b := rand.New(rand.NewPCG(uint64(n), 1)), rand.New(rand.NewPCG(uint64(n), 1))
		if got, want := Perm(a, n), b.Perm(n); !slices.Equal(got, want) {
			t.Fatalf("Perm(%d) = %v, rand's %v", n, got, want)
		}
		if a.Uint64() != b.Uint64() {
			t.Fatalf("Perm(%d) took other draws than rand's", n)
		}
	}
}

// TestBelowTheEngine: the models import the standard library only.
func TestBelowTheEngine(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
				t.Errorf("%s imports %s: the models sit below the engine and import the standard library only", name, path)
			}
		}
	}
}

// Package lint holds house rules enforced by go test rather than by review.
package lint

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fences maps an import path to the only directories (relative to the module
// root, slash-separated) whose non-test files may import it.
var fences = map[string][]string{
	"unsafe":                {"backing/mmap"},
	"golang.org/x/sys/unix": {"backing/mmap"},
	"syscall":               {"backing/mmap"},
	"testing":               {"conformance", "bench"},
}

// TestImportFences keeps unsafe memory and raw syscalls inside backing/mmap,
// and test machinery inside the packages whose job is testing.
func TestImportFences(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		dir := filepath.ToSlash(rel)
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			allowed, fenced := fences[p]
			if !fenced {
				continue
			}
			ok := false
			for _, a := range allowed {
				if dir == a || strings.HasPrefix(dir, a+"/") {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s imports %q; only %v may", filepath.ToSlash(strings.TrimPrefix(path, root+"/")), p, allowed)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Fatalf("checked only %d files: is the module root right?", checked)
	}
}

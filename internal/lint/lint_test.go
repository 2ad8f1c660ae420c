// Package lint holds house rules enforced by go test rather than by review.
package lint

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fences maps an import path to the only directories (relative to the module
// root, slash-separated) whose non-test files may import it.
var fences = map[string][]string{
	"unsafe":                {"backing/mmap", "backing/cuda"},
	"golang.org/x/sys/unix": {"backing/mmap", "backing/cuda", "tier/disk"},    // disk: pwritev/preadv (a block and its header in one call) and fallocate
	"syscall":               {"backing/mmap", "internal/sysmem", "tier/disk"}, // sysmem: getrlimit, to refuse sizes past RLIMIT_AS; disk: RawConn
	"testing":               {"conformance", "bench"},

	"github.com/prometheus/client_golang/prometheus":          {"metrics", "examples", "cmd/locus-eval"}, // locus-eval fleet serves and scrapes each engine's metrics
	"github.com/prometheus/client_golang/prometheus/promhttp": {"examples", "cmd/locus-eval"},
	"github.com/go-zeromq/zmq4":                               {"kv/events"},
	"github.com/tinylib/msgp/msgp":                            {"kv/events"},
	"gonum.org/v1/plot":                                       {"cmd"},
	"github.com/libp2p/go-buffer-pool":                        {"bench"},
	"github.com/bytedance/gopkg/lang/mcache":                  {"bench"},
	"github.com/ebitengine/purego":                            {"backing/cuda"},
	"github.com/redis/go-redis/v9":                            {"tier/redis"},
}

// heavy are module path prefixes that users of the engine and the
// allocators must not compile, directly or through anything they import.
var heavy = []string{
	"github.com/prometheus/",
	"github.com/go-zeromq/",
	"github.com/tinylib/",
	"github.com/vmihailenco/",
	"gonum.org/",
	"github.com/libp2p/",
	"github.com/bytedance/",
	"golang.org/x/term",
	"github.com/locus-go/locus/bench",
	"github.com/locus-go/locus/cmd/locus-eval/internal/eval",
	"github.com/locus-go/locus/conformance",
	"github.com/ebitengine/purego",
	"github.com/redis/",
	"github.com/alicebob/",
}

// libraries are the packages a serving engine imports to get blocks.
var libraries = []string{
	"github.com/locus-go/locus",
	"github.com/locus-go/locus/pool/...",
	"github.com/locus-go/locus/backing/heap",
	"github.com/locus-go/locus/backing/mmap",
	"github.com/locus-go/locus/transport/mailbox",
	"github.com/locus-go/locus/transport/sharded",
	"github.com/locus-go/locus/transport/shared",
	"github.com/locus-go/locus/policy/...",
	"github.com/locus-go/locus/kv",
	"github.com/locus-go/locus/classes",
	"github.com/locus-go/locus/pages",
	"github.com/locus-go/locus/tier",
	"github.com/locus-go/locus/tier/host",
	"github.com/locus-go/locus/tier/disk",
	"github.com/locus-go/locus/adapters",
}

// TestLibraryDeps keeps Prometheus, ZMQ, MessagePack, plotting and the test
// machinery out of what an engine compiles when it imports the pool, a
// component, kv, classes or pages: those live in metrics, kv/events, bench,
// cmd/locus-eval/internal/eval and conformance, which an engine imports
// only by choice.
func TestLibraryDeps(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	cmd := exec.Command(gobin, append([]string{"list", "-deps"}, libraries...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 20 {
		t.Fatalf("go list found only %d packages", len(deps))
	}
	for _, d := range deps {
		for _, h := range heavy {
			if strings.HasPrefix(d, h) {
				t.Errorf("the library packages compile %s", d)
			}
		}
	}
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

package conformance_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/locus-go/locus/backing/heap"
	"github.com/locus-go/locus/classes"
	"github.com/locus-go/locus/conformance"
	"github.com/locus-go/locus/pages"
	"github.com/locus-go/locus/policy/lifo"
	"github.com/locus-go/locus/pool"
	"github.com/locus-go/locus/tier"
	"github.com/locus-go/locus/tier/host"
	"github.com/locus-go/locus/transport/mailbox"
)

// beforeFlags holds what the Check drivers returned when TestMain called
// them: before m.Run, so before the test flags are parsed, when
// testing.Short, testing.Verbose and the like panic. A Check driver that
// used them would have crashed the test binary.
var beforeFlags = map[string]error{}

func TestMain(m *testing.M) {
	beforeFlags["CheckBacking"] = conformance.CheckBacking(func() (pool.Backing, error) { return heap.New(64, 64) })
	beforeFlags["CheckTransport"] = conformance.CheckTransport(func() (pool.Transport, error) { return mailbox.New(), nil })
	beforeFlags["CheckPolicy"] = conformance.CheckPolicy(func() (pool.ReusePolicy, error) { return lifo.Policy{}, nil })
	beforeFlags["CheckPool"] = conformance.CheckPool(newPool)
	beforeFlags["CheckClasses"] = conformance.CheckClasses(func() (*classes.DefaultPool, error) {
		return classes.Default([]classes.Class{{Size: 64, Blocks: 16}, {Size: 512, Blocks: 8}})
	})
	beforeFlags["CheckPages"] = conformance.CheckPages(func(cfg conformance.PagesConfig) (*pages.Pool, error) {
		b, err := heap.New(64*64, 1)
		if err != nil {
			return nil, err
		}
		return pages.New(b, 64, cfg.Options()...)
	})
	beforeFlags["CheckTier"] = conformance.CheckTier(func() (*tier.Manager, error) {
		st, err := host.New(256, 16)
		if err != nil {
			return nil, err
		}
		return tier.New(st)
	})
	os.Exit(m.Run())
}

func newPool() (*pool.Pool[*heap.Backing, *mailbox.Transport, lifo.Policy], error) {
	b, err := heap.New(64, 128)
	if err != nil {
		return nil, err
	}
	return pool.New(b, mailbox.New(), lifo.Policy{})
}

// TestCheckOutsideGoTest: the Check drivers work in a program that has not
// set up the testing package.
func TestCheckOutsideGoTest(t *testing.T) {
	if len(beforeFlags) != 7 {
		t.Fatalf("TestMain ran %d Check drivers, want 7", len(beforeFlags))
	}
	for name, err := range beforeFlags {
		if err != nil {
			t.Errorf("%s before the test flags were parsed: %v", name, err)
		}
	}
}

// TestNoTestingGlobals: the package's library code refers to the testing
// package only for *testing.T, so Check drivers depend on no testing
// global (testing.Short, testing.AllocsPerRun, testing.Verbose, ...).
func TestNoTestingGlobals(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "testing" && sel.Sel.Name != "T" {
					t.Errorf("%s: testing.%s: library code may use *testing.T only", fset.Position(sel.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
	if checked < 5 {
		t.Fatalf("checked %d files", checked)
	}
}

// badPolicy returns an order that is neither LIFO nor FIFO.
type badPolicy struct{}

func (badPolicy) Order() pool.Order { return 9 }

// TestViolationSaysWhere: every violation names the line that called the
// suite, and can be matched with errors.Is and taken apart.
func TestViolationSaysWhere(t *testing.T) {
	_, file, line, _ := runtime.Caller(0)
	err := conformance.CheckPolicy(func() (pool.ReusePolicy, error) { return badPolicy{}, nil })
	if !errors.Is(err, conformance.ErrContract) {
		t.Fatalf("CheckPolicy of an invalid policy = %v, want an error matching ErrContract", err)
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("CheckPolicy returned %T, want errors joined with errors.Join", err)
	}
	want := fmt.Sprintf("%s:%d", file, line+1)
	for _, e := range joined.Unwrap() {
		var v *conformance.Violation
		if !errors.As(e, &v) {
			t.Fatalf("%v is not a *conformance.Violation", e)
		}
		if v.Caller != want {
			t.Errorf("violation %s says the suite was called at %q, want %q", v.Case, v.Caller, want)
		}
		if !strings.Contains(v.Error(), want) {
			t.Errorf("violation %q does not print where the suite was called", v.Error())
		}
	}
}

func ExampleCheckTransport() {
	err := conformance.CheckTransport(func() (pool.Transport, error) { return mailbox.New(), nil })
	fmt.Println(err)
	// Output: <nil>
}

func ExampleCheckPolicy() {
	err := conformance.CheckPolicy(func() (pool.ReusePolicy, error) { return badPolicy{}, nil })
	var v *conformance.Violation
	if errors.As(err, &v) {
		fmt.Println(v.Case, errors.Is(v, conformance.ErrContract))
	}
	// Output: ValidOrder true
}

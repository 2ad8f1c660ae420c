package eval

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
)

// Machine describes where a run was measured.
type Machine struct {
	CPUModel   string `json:"cpu_model"`
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GoVersion  string `json:"go_version"`
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	// GOGC is the GOGC environment setting ("" = the default, 100).
	GOGC string `json:"gogc"`
}

// Revision identifies the code that was measured.
type Revision struct {
	Module string `json:"module"`
	// VCS is the version control revision, or the module version of an
	// installed release ("unknown" when neither the build information nor
	// git in this module's own source directory tells it); Modified
	// reports uncommitted changes.
	VCS      string `json:"vcs_revision"`
	Modified bool   `json:"vcs_modified"`
}

// ThisMachine describes the running machine.
func ThisMachine() Machine {
	return Machine{CPUModel: cpuModel(), NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		GoVersion: runtime.Version(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GOGC: os.Getenv("GOGC")}
}

// String is a one-line description, e.g. "AMD EPYC, 2 CPUs, GOMAXPROCS=2,
// go1.26.8 linux/amd64".
func (m Machine) String() string {
	s := m.CPUModel + ", " + plural(m.NumCPU, "CPU") + ", GOMAXPROCS=" + itoa(m.GOMAXPROCS) + ", " +
		m.GoVersion + " " + m.GOOS + "/" + m.GOARCH
	if m.GOGC != "" {
		s += ", GOGC=" + m.GOGC
	}
	return s
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// modulePath is the module whose code a run measures.
const modulePath = "github.com/locus-go/locus"

// ThisRevision identifies the running binary's code: the build's VCS stamp
// (or, for an installed release, its module version) when this module was
// the main one, its module version when it was a dependency, or else (go run and go test build without a stamp when
// -buildvcs is off) what git says about the directory this module was
// compiled from, if that directory is the top of its repository; else
// "unknown". It never asks git about the working directory, which may be
// another repository.
func ThisRevision() Revision {
	bi, _ := debug.ReadBuildInfo()
	return revisionOf(bi, sourceRoot())
}

// sourceRoot returns the directory this module was compiled from, two
// levels above this file, or "" when the build does not tell it (built
// with -trimpath) or it no longer holds a go.mod.
func sourceRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return ""
	}
	root := filepath.Dir(filepath.Dir(filepath.Dir(file)))
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return ""
	}
	return root
}

// revisionOf identifies the code from the build information, else from git
// in root, the directory that holds this module's go.mod ("": none).
func revisionOf(bi *debug.BuildInfo, root string) Revision {
	rev := Revision{Module: modulePath, VCS: "unknown"}
	if bi != nil && bi.Main.Path == modulePath {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev.VCS = s.Value
			case "vcs.modified":
				rev.Modified = s.Value == "true"
			}
		}
		if v := bi.Main.Version; rev.VCS == "unknown" && v != "" && v != "(devel)" {
			rev.VCS = v
		}
	} else if bi != nil {
		// A dependency of another main module: its stamp is that module's.
		for _, d := range bi.Deps {
			if d.Path == modulePath {
				if d.Replace != nil {
					d = d.Replace
				}
				if d.Version != "" && d.Version != "(devel)" {
					rev.VCS = d.Version
				}
			}
		}
	}
	if rev.VCS != "unknown" || root == "" {
		return rev
	}
	git := func(args ...string) (string, bool) {
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
		return strings.TrimSpace(string(out)), err == nil
	}
	// The repository must be this module's own, not one it was copied into
	// (a module cache inside a home directory under git, a vendored copy).
	top, ok := git("rev-parse", "--show-toplevel")
	if !ok || !sameDir(top, root) {
		return rev
	}
	if head, ok := git("rev-parse", "HEAD"); ok && head != "" {
		rev.VCS = head
		if st, ok := git("status", "--porcelain", "--untracked-files=no"); ok {
			rev.Modified = st != ""
		}
	}
	return rev
}

// sameDir reports whether two paths name the same directory.
func sameDir(a, b string) bool {
	ia, errA := os.Stat(a)
	ib, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(ia, ib)
}

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
// the main one, or else (go run and go test build without a stamp when
// -buildvcs is off) what git says about the directory this package was
// compiled from, if it still holds this module's go.mod at the top of its
// repository; else "unknown". It never asks git about the working
// directory, which may be another repository.
func ThisRevision() Revision {
	bi, _ := debug.ReadBuildInfo()
	_, file, _, _ := runtime.Caller(0)
	return revisionOf(bi, moduleRoot(filepath.Dir(file)))
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
	}
	if rev.VCS != "unknown" || root == "" {
		return rev
	}
	git := func(args ...string) (string, bool) {
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
		return strings.TrimSpace(string(out)), err == nil
	}
	// The repository must be this module's own, not one it was copied into.
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

// moduleRoot returns the directory at or above dir whose go.mod declares
// modulePath, or "" when there is none (a binary built with -trimpath, or
// whose sources are gone).
func moduleRoot(dir string) string {
	if !filepath.IsAbs(dir) {
		return ""
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			if modulePathOf(b) == modulePath {
				return dir
			}
			return ""
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
}

// modulePathOf returns the module path a go.mod declares.
func modulePathOf(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		line, _, _ = strings.Cut(line, "//")
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			return strings.Trim(strings.TrimSpace(rest), `"`+"`")
		}
	}
	return ""
}

// sameDir reports whether two paths name the same directory.
func sameDir(a, b string) bool {
	ia, errA := os.Stat(a)
	ib, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(ia, ib)
}

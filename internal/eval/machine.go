package eval

import (
	"bufio"
	"os"
	"os/exec"
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
	// VCS is the version control revision ("unknown" when neither the
	// build information nor git in the working directory tells it);
	// Modified reports uncommitted changes.
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

// ThisRevision identifies the running binary's code: the build's VCS
// stamp, or else (go run and go test build without one when -buildvcs is
// off) what git says about the working directory.
func ThisRevision() Revision {
	rev := Revision{Module: "github.com/locus-go/locus", VCS: "unknown"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Path != "" {
			rev.Module = bi.Main.Path
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev.VCS = s.Value
			case "vcs.modified":
				rev.Modified = s.Value == "true"
			}
		}
	}
	if rev.VCS != "unknown" {
		return rev
	}
	if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		rev.VCS = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil {
			rev.Modified = len(strings.TrimSpace(string(st))) > 0
		}
	}
	return rev
}

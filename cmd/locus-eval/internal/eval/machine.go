package eval

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// Machine describes where a run was measured. The CPU's identity
// (vendor, family, model, stepping) tells two hosts apart that share a
// model name: the same "AMD EPYC" can be a Zen 3 or a Zen 4, and rankings
// can differ between them.
type Machine struct {
	CPUModel   string `json:"cpu_model"`
	NumCPU     int    `json:"num_cpu"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GoVersion  string `json:"go_version"`
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	// GOGC is the GOGC environment setting ("" = the default, 100).
	GOGC string `json:"gogc"`
	// CPU is the processor's identity, where the system tells it.
	CPU CPU `json:"cpu"`
	// Cores is the number of physical cores (0: unknown); NUMANodes the
	// number of memory nodes (0: unknown).
	Cores     int `json:"cores"`
	NUMANodes int `json:"numa_nodes"`
	// Hypervisor names the virtual machine monitor ("" when the system
	// says it runs on bare metal or does not say).
	Hypervisor string `json:"hypervisor"`
	// Kernel is the operating system's release, e.g. "6.1.0-18-amd64".
	Kernel string `json:"kernel"`
}

// CPU identifies a processor by what it reports of itself.
type CPU struct {
	// Vendor is the vendor id, e.g. "AuthenticAMD" or "GenuineIntel".
	Vendor string `json:"vendor"`
	// Family, Model and Stepping are the decimal values the processor
	// reports (a virtual machine may mask them).
	Family   int `json:"family"`
	Model    int `json:"model"`
	Stepping int `json:"stepping"`
	// Microarch is the microarchitecture derived from vendor, family and
	// model, e.g. "Zen 4" ("" where this locus-eval does not know it).
	Microarch string `json:"microarch"`
	// L2KiB and L3KiB are the cache sizes seen by one core, in KiB.
	L2KiB int `json:"l2_kib"`
	L3KiB int `json:"l3_kib"`
}

// String is e.g. "AuthenticAMD family 25 model 17 stepping 1 (Zen 4), L2 1 MiB, L3 32 MiB".
func (c CPU) String() string {
	if c.Vendor == "" {
		return ""
	}
	s := fmt.Sprintf("%s family %d model %d stepping %d", c.Vendor, c.Family, c.Model, c.Stepping)
	if c.Microarch != "" {
		s += " (" + c.Microarch + ")"
	}
	if c.L2KiB > 0 {
		s += ", L2 " + kib(c.L2KiB)
	}
	if c.L3KiB > 0 {
		s += ", L3 " + kib(c.L3KiB)
	}
	return s
}

func kib(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return itoa(n/1024) + " MiB"
	}
	return itoa(n) + " KiB"
}

// SameHost reports whether m and o describe the same kind of host: the
// same CPU identity, CPU count and GOMAXPROCS. Runs on different hosts can
// rank contenders differently, so compare says so before it compares.
func (m Machine) SameHost(o Machine) bool {
	return m.CPUModel == o.CPUModel && m.CPU.Vendor == o.CPU.Vendor && m.CPU.Family == o.CPU.Family &&
		m.CPU.Model == o.CPU.Model && m.NumCPU == o.NumCPU && m.GOMAXPROCS == o.GOMAXPROCS
}

// Details is a multi-part description of the host beyond String: the CPU
// identity, cores, NUMA nodes, hypervisor and kernel ("" when the system
// told none of them).
func (m Machine) Details() string {
	var parts []string
	if c := m.CPU.String(); c != "" {
		parts = append(parts, c)
	}
	if m.Cores > 0 {
		parts = append(parts, plural(m.Cores, "core")+", "+plural(m.NumCPU, "thread"))
	}
	if m.NUMANodes > 0 {
		parts = append(parts, plural(m.NUMANodes, "NUMA node"))
	}
	if m.Hypervisor != "" {
		h := m.Hypervisor
		if h == "yes" {
			h = "unnamed"
		}
		parts = append(parts, "hypervisor "+h)
	}
	if m.Kernel != "" {
		parts = append(parts, "kernel "+m.Kernel)
	}
	return strings.Join(parts, "; ")
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
	m := Machine{CPUModel: runtime.GOARCH, NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		GoVersion: runtime.Version(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, GOGC: os.Getenv("GOGC")}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		parseCPUInfo(&m, string(b))
	}
	m.CPU.L2KiB, m.CPU.L3KiB = cacheSizes("/sys/devices/system/cpu/cpu0/cache")
	if nodes, err := filepath.Glob("/sys/devices/system/node/node[0-9]*"); err == nil {
		m.NUMANodes = len(nodes)
	}
	if m.Hypervisor != "" {
		m.Hypervisor = hypervisorName()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// parseCPUInfo fills m's model name, CPU identity, core count and whether a
// hypervisor is present ("yes", named later) from /proc/cpuinfo's text.
func parseCPUInfo(m *Machine, text string) {
	cores := map[[2]string]bool{} // (physical id, core id)
	var phys string
	first := true
	for line := range strings.Lines(text) {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			if strings.TrimSpace(line) == "" {
				first = false // the next processor
			}
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		n, _ := strconv.Atoi(v)
		switch k {
		case "physical id":
			phys = v
		case "core id":
			cores[[2]string{phys, v}] = true
		}
		if !first {
			continue
		}
		switch k {
		case "model name":
			m.CPUModel = v
		case "vendor_id":
			m.CPU.Vendor = v
		case "cpu family":
			m.CPU.Family = n
		case "model":
			m.CPU.Model = n
		case "stepping":
			m.CPU.Stepping = n
		case "flags":
			if slices.Contains(strings.Fields(v), "hypervisor") {
				m.Hypervisor = "yes"
			}
			m.CPU.Microarch = microarch(m.CPU.Vendor, m.CPU.Family, m.CPU.Model, strings.Fields(v))
		}
	}
	if m.CPU.Microarch == "" { // flags came before vendor, family or model
		m.CPU.Microarch = microarch(m.CPU.Vendor, m.CPU.Family, m.CPU.Model, nil)
	}
	m.Cores = len(cores)
}

// microarch names the microarchitecture of a vendor, family and model
// (decimal, as /proc/cpuinfo gives them), or "" when unknown. A virtual
// machine may report a masked model; for Intel the flags then still tell
// a generation's floor.
func microarch(vendor string, family, model int, flags []string) string {
	switch vendor {
	case "AuthenticAMD":
		switch family {
		case 23:
			switch {
			case model == 1 || model == 17 || model == 24:
				return "Zen"
			case model == 8:
				return "Zen+"
			case model >= 0x30:
				return "Zen 2"
			}
		case 25:
			switch {
			case model <= 0x0f, model >= 0x20 && model <= 0x5f:
				return "Zen 3"
			case model >= 0x10 && model <= 0x1f, model >= 0x60 && model <= 0x7f:
				return "Zen 4"
			case model >= 0xa0 && model <= 0xaf:
				return "Zen 4c"
			}
		case 26:
			return "Zen 5"
		}
	case "GenuineIntel":
		if family == 6 {
			if name, ok := intelModels[model]; ok {
				return name
			}
		}
		switch {
		case slices.Contains(flags, "amx_tile"):
			return "Sapphire Rapids or later, by its flags"
		case slices.Contains(flags, "avx512f"):
			return "Skylake-SP or later, by its flags"
		}
	}
	return ""
}

// intelModels are Intel family 6 server (and common client) models.
var intelModels = map[int]string{
	0x3f: "Haswell", 0x4f: "Broadwell", 0x55: "Skylake-SP / Cascade Lake", 0x6a: "Ice Lake-SP",
	0x6c: "Ice Lake-D", 0x8f: "Sapphire Rapids", 0xcf: "Emerald Rapids", 0xad: "Granite Rapids",
	0xae: "Granite Rapids-D", 0xaf: "Sierra Forest", 0x97: "Alder Lake", 0x9a: "Alder Lake",
	0xb7: "Raptor Lake", 0xba: "Raptor Lake", 0xbf: "Raptor Lake",
}

// cacheSizes returns the L2 and L3 sizes in KiB from a Linux cache
// directory (cpu0's), 0 where not told.
func cacheSizes(dir string) (l2, l3 int) {
	idx, _ := filepath.Glob(filepath.Join(dir, "index[0-9]*"))
	for _, d := range idx {
		level, err1 := os.ReadFile(filepath.Join(d, "level"))
		size, err2 := os.ReadFile(filepath.Join(d, "size"))
		if err1 != nil || err2 != nil {
			continue
		}
		s := strings.TrimSpace(string(size))
		n, err := strconv.Atoi(strings.TrimSuffix(s, "K"))
		if err != nil || !strings.HasSuffix(s, "K") {
			continue
		}
		switch strings.TrimSpace(string(level)) {
		case "2":
			l2 = n
		case "3":
			l3 = n
		}
	}
	return l2, l3
}

// hypervisorName names the hypervisor from what Linux exposes, or "yes"
// when the CPU says there is one but nothing names it.
func hypervisorName() string {
	for _, f := range []string{"/sys/hypervisor/type", "/sys/class/dmi/id/sys_vendor", "/sys/class/dmi/id/product_name"} {
		if b, err := os.ReadFile(f); err == nil {
			if s := strings.TrimSpace(string(b)); s != "" {
				return s
			}
		}
	}
	return "yes"
}

// String is a one-line description, e.g. "AMD EPYC 9B14 (Zen 4), 2 CPUs,
// GOMAXPROCS=2, go1.26.8 linux/amd64".
func (m Machine) String() string {
	s := m.CPUModel
	if m.CPU.Microarch != "" {
		s += " (" + m.CPU.Microarch + ")"
	}
	s += ", " + plural(m.NumCPU, "CPU") + ", GOMAXPROCS=" + itoa(m.GOMAXPROCS) + ", " +
		m.GoVersion + " " + m.GOOS + "/" + m.GOARCH
	if m.GOGC != "" {
		s += ", GOGC=" + m.GOGC
	}
	return s
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

// sourceRoot returns the directory this module was compiled from, four
// levels above this file (cmd/locus-eval/internal/eval), or "" when the
// build does not tell it (built with -trimpath) or it no longer holds a
// go.mod.
func sourceRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return ""
	}
	root := filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
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

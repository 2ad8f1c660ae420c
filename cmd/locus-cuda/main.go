// Command locus-cuda runs backing/cuda's device checks and measurements on a
// machine with a GPU and writes them as JSON; "locus-cuda report" renders
// that JSON as a Markdown section for BENCHMARKS.md.
//
//	locus-cuda [-o gpu.json] [-budget 100s]   measure (needs a GPU and libcuda.so.1)
//	locus-cuda report gpu.json > section.md   render
//
// Every measurement is repeated and reported as median, min and max. A
// measurement that fails is recorded with its error and the rest go on;
// measurements that would start after the time budget are recorded as
// skipped. Without a GPU it writes a JSON that says why and exits 0.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "report" {
		if len(os.Args) != 3 {
			fmt.Fprintln(os.Stderr, "usage: locus-cuda report in.json > section.md")
			os.Exit(2)
		}
		if err := reportFile(os.Stdout, os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "locus-cuda:", err)
			os.Exit(1)
		}
		return
	}
	out := flag.String("o", "", "write the JSON here instead of standard output")
	budget := flag.Duration("budget", 100*time.Second, "start no measurement after this much time")
	flag.Parse()
	res := measure(*budget, os.Stderr)
	w := io.Writer(os.Stdout)
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			fmt.Fprintln(os.Stderr, "locus-cuda:", err)
			os.Exit(1)
		}
		defer f.Close()
		w = f
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		fmt.Fprintln(os.Stderr, "locus-cuda:", err)
		os.Exit(1)
	}
}

func reportFile(w io.Writer, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var r Results
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return render(w, &r)
}

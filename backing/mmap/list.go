package mmap

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// maxListValue bounds the numbers parseList accepts. CPU and node numbers
// stay far below it (NR_CPUS is at most 8192, MAX_NUMNODES at most 1024),
// and the bound caps what a hostile or corrupt list can make parseList
// allocate: a bitmap of 8 KiB and a result of at most 65536 ints.
const maxListValue = 1 << 16

// errList is wrapped by every error of parseList.
var errList = errors.New("malformed list")

// parseList parses the list format in which the kernel prints CPU and node
// masks in sysfs (cpulist, online, possible): comma-separated groups, each a
// decimal number N or an inclusive range N-M with N <= M, as in
// "0-3,8,10-11". Surrounding spaces, tabs and newlines are ignored; an empty
// list is valid and yields nil. The result is ascending and without
// duplicates, even if groups overlap or come out of order (the kernel never
// prints them so, but its own parser accepts them).
//
// It rejects empty groups, signs, spaces inside the list, numbers of
// maxListValue or more, descending ranges and the stride form "N-M:U/G",
// which the kernel accepts on input but never prints.
func parseList(s string) ([]int, error) {
	s = strings.Trim(s, " \t\n")
	if s == "" {
		return nil, nil
	}
	var set []uint // bitmap of the numbers seen, grown as needed
	count := 0
	for group := range strings.SplitSeq(s, ",") {
		lo, hi, err := parseGroup(group)
		if err != nil {
			return nil, fmt.Errorf("%w: group %q: %v", errList, truncate(group), err)
		}
		if need := hi/bits.UintSize + 1; need > len(set) {
			set = append(set, make([]uint, need-len(set))...)
		}
		for v := lo; v <= hi; v++ {
			w, bit := v/bits.UintSize, uint(1)<<(v%bits.UintSize)
			if set[w]&bit == 0 {
				set[w] |= bit
				count++
			}
		}
	}
	out := make([]int, 0, count)
	for w, word := range set {
		for word != 0 {
			b := bits.TrailingZeros(word)
			out = append(out, w*bits.UintSize+b)
			word &^= 1 << b
		}
	}
	return out, nil
}

// parseGroup parses "N" or "N-M".
func parseGroup(g string) (lo, hi int, err error) {
	if strings.Contains(g, ":") {
		return 0, 0, errors.New("stride groups are not supported")
	}
	first, last, isRange := strings.Cut(g, "-")
	if lo, err = parseNumber(first); err != nil {
		return 0, 0, err
	}
	if !isRange {
		return lo, lo, nil
	}
	if hi, err = parseNumber(last); err != nil {
		return 0, 0, err
	}
	if hi < lo {
		return 0, 0, errors.New("descending range")
	}
	return lo, hi, nil
}

// parseNumber parses a decimal number in [0, maxListValue): digits only, no
// sign, no spaces.
func parseNumber(s string) (int, error) {
	if s == "" {
		return 0, errors.New("missing number")
	}
	v := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("unexpected character %q", c)
		}
		v = v*10 + int(c-'0')
		if v >= maxListValue {
			return 0, errors.New("number too large (limit " + strconv.Itoa(maxListValue-1) + ")")
		}
	}
	return v, nil
}

// truncate shortens s for an error message.
func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}

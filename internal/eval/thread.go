package eval

import "github.com/locus-go/locus/bench"

var cycleConfigs = map[string]bench.CycleConfig{}
var reuseConfigs = map[string]bench.ReuseConfig{}

package bench

// TheoreticalPeak returns the quality denominator of a workload (design
// thread): the most blocks live at once when every finished request is
// freed the instant it finishes, replayed on the same schedule with the same
// removal rule, without threads. For churn-touch it is the live window,
// 256 × 16 = 4096, by definition.
func TheoreticalPeak(w *Workload) int {
	if w.Churn {
		return ChurnLiveChunks * ChurnChunkBlocks
	}
	type req struct{ blocks, left int }
	var live []req
	arrived, liveBlocks, peak := 0, 0, 0
	requests := w.requests()
	for arrived < requests || len(live) > 0 {
		for k := min(w.ArrivalsPerStep, requests-arrived); k > 0; k-- {
			live = append(live, req{Prefill, w.Decode(arrived)})
			liveBlocks += Prefill
			arrived++
		}
		peak = max(peak, liveBlocks)
		for i := 0; i < len(live); {
			if live[i].left == 0 {
				liveBlocks -= live[i].blocks
				last := len(live) - 1
				live[i] = live[last]
				live = live[:last]
				continue
			}
			live[i].blocks++
			live[i].left--
			liveBlocks++
			peak = max(peak, liveBlocks)
			i++
		}
	}
	return peak
}

package pinglist

// Step is one batch of a change of targets: start probing Add, then stop probing Remove.
// Starting before stopping keeps every pair probed through a change, at the cost of at
// most one batch more targets than the budget for a moment.
type Step[T comparable] struct {
	Add, Remove []T
}

// Steps is how to go from the targets old to the targets new in batches of at most
// batch additions and batch removals (batch < 1: all in one step). Targets in both are
// left alone; additions come in new's order, removals in old's; no step is empty, and
// nothing to change is no step.
func Steps[T comparable](old, new []T, batch int) []Step[T] {
	in := func(s []T) map[T]bool {
		m := make(map[T]bool, len(s))
		for _, t := range s {
			m[t] = true
		}
		return m
	}
	inOld, inNew := in(old), in(new)
	var add, remove []T
	for _, t := range new {
		if !inOld[t] {
			add = append(add, t)
			inOld[t] = true // once, however often new lists it
		}
	}
	for _, t := range old {
		if !inNew[t] {
			remove = append(remove, t)
			inNew[t] = true
		}
	}
	if batch < 1 {
		batch = max(len(add), len(remove))
	}
	var steps []Step[T]
	for len(add) > 0 || len(remove) > 0 {
		a, r := min(batch, len(add)), min(batch, len(remove))
		steps = append(steps, Step[T]{Add: add[:a:a], Remove: remove[:r:r]})
		add, remove = add[a:], remove[r:]
	}
	return steps
}

package campaign

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Goals (issue 41): precision, recall, localisation, detection and clearing times.
const (
	GoalPrecision    = 0.99
	GoalRecall       = 0.99
	GoalLocalisation = 0.97
	GoalDetectHard   = 2 * time.Minute
	GoalDetectGray   = 5 * time.Minute
	GoalClear        = 5 * time.Minute
)

// Row is one kind's figures.
type Row struct {
	Kind                string
	Class               string
	Faults, Detected    int
	Localised           int
	Episodes, TrueEps   int           // alert episodes (an alert's firing stretch) during the kind's faults, and those naming one
	DetectMax, ClearMax time.Duration // over the detected faults
	Held                int           // detected faults whose alerts had no gap to the repair
	NotCleared          int           // faults with an alert still firing GoalClear after the repair
	Missing             []string
	Alerts              []string // per fault: the alerts that named it, by name and count
}

// episode is one alert's firing stretch.
type episode struct {
	key        alertKey
	a          firingAlert
	start, end time.Time // end: the first tick it no longer fired (or the run's end)
}

func (r *Result) episodes() []episode {
	var out []episode
	open := map[alertKey]*episode{}
	var last time.Time
	for _, t := range r.Ticks {
		for k, a := range t.firing {
			if open[k] == nil {
				open[k] = &episode{key: k, a: a, start: t.at}
			}
		}
		for k, e := range open {
			if _, ok := t.firing[k]; !ok {
				e.end = t.at
				out = append(out, *e)
				delete(open, k)
			}
		}
		last = t.at
	}
	for _, e := range open {
		e.end = last.Add(scrapeEvery)
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start.Before(out[j].start) })
	return out
}

// Report scores the campaign: a row per kind, the alert episodes outside any fault
// (false ones, by the window they fell in) and the overall figures.
type Report struct {
	Rows                   []Row
	FalseEpisodes          []string // alert episodes naming no fault
	QuietFalse             int      // of which in the fault-free time
	Precision, Recall, Loc float64
}

func (r *Result) Score() Report {
	fab := NewFabric(r.Cfg.Shape, 0, HashUDPSport, HashDestQP) // for names only
	eps := r.episodes()
	rows := map[string]*Row{}
	var rep Report
	for _, k := range r.Cfg.Kinds {
		rows[k] = &Row{Kind: k, Class: kindClass(k)}
	}
	parsed := make([]named, len(eps))
	for i, e := range eps {
		parsed[i] = fab.parseAlert(e.a)
	}
	// Precision: an episode is true if it starts while a fault it names lasts (or before
	// that fault's clear bound ran out, for one that started at the repair's tick).
	attributed := make([]bool, len(eps))
	for i, e := range eps {
		var window *Fault
		for fi := range r.Faults {
			f := &r.Faults[fi]
			// An alert that starts within the clear bound after the repair still names a
			// real fault (its windows and for: lag); it counts for precision, not recall.
			if m, _ := fab.judge(*f, parsed[i]); m && !e.start.Before(f.Start) && !e.start.After(f.End.Add(GoalClear)) {
				attributed[i] = true
				rows[f.Kind].TrueEps++
				rows[f.Kind].Episodes++
				break
			}
			if !e.start.Before(f.Start) && e.start.Before(f.End.Add(r.Cfg.Gap)) {
				window = f
			}
		}
		if attributed[i] {
			continue
		}
		what := fmt.Sprintf("%s %s from %s to %s", e.a.name, e.a.labels, e.start.Sub(r.Ticks[0].at), e.end.Sub(r.Ticks[0].at))
		if window != nil {
			rows[window.Kind].Episodes++
			what += " (during " + window.String() + ")"
		} else {
			rep.QuietFalse++
		}
		rep.FalseEpisodes = append(rep.FalseEpisodes, what)
	}
	// Recall, localisation, times, gaps: per fault.
	for _, f := range r.Faults {
		row := rows[f.Kind]
		row.Faults++
		var first, lastEnd time.Time
		exact := false
		byName := map[string]int{}
		for i, e := range eps {
			m, x := fab.judge(f, parsed[i])
			if !m || e.end.Before(f.Start) || e.start.After(f.End) {
				continue
			}
			if x {
				byName[e.a.name+" (names the culprit)"]++
			} else {
				byName[e.a.name]++
			}
			if first.IsZero() || e.start.Before(first) {
				first = e.start
			}
			if e.end.After(lastEnd) {
				lastEnd = e.end
			}
			exact = exact || x
		}
		var names []string
		for k, v := range byName {
			names = append(names, fmt.Sprintf("%s ×%d", k, v))
		}
		sort.Strings(names)
		row.Alerts = append(row.Alerts, fmt.Sprintf("%s: %s", f, strings.Join(names, ", ")))
		if first.IsZero() {
			row.Missing = append(row.Missing, f.String())
			continue
		}
		row.Detected++
		if exact {
			row.Localised++
		}
		row.DetectMax = max(row.DetectMax, first.Sub(f.Start))
		if c := lastEnd.Sub(f.End); c > row.ClearMax {
			row.ClearMax = c
		}
		if lastEnd.Sub(f.End) > GoalClear {
			row.NotCleared++
		}
		// No gap: at every tick from the first detection to the repair, some alert naming
		// the fault fires.
		held := true
		for _, t := range r.Ticks {
			if t.at.Before(first) || !t.at.Before(f.End) {
				continue
			}
			any := false
			for _, a := range t.firing {
				if m, _ := fab.judge(f, fab.parseAlert(a)); m {
					any = true
					break
				}
			}
			if !any {
				held = false
				break
			}
		}
		if held {
			row.Held++
		}
	}
	var tp, all, det, faults, loc int
	for _, k := range r.Cfg.Kinds {
		row := rows[k]
		rep.Rows = append(rep.Rows, *row)
		tp += row.TrueEps
		all += row.Episodes
		if row.Class != "quiet" {
			det += row.Detected
			faults += row.Faults
			loc += row.Localised
		}
	}
	all += rep.QuietFalse
	rep.Precision = ratio(tp, all)
	rep.Recall = ratio(det, faults)
	rep.Loc = ratio(loc, det)
	return rep
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 1
	}
	return float64(a) / float64(b)
}

func pct(a, b int) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", 100*float64(a)/float64(b))
}

// Write prints the table, the false episodes, the campaign's size and time, and last
// the overall line.
func (rep Report) Write(w io.Writer, r *Result, wall time.Duration) {
	fmt.Fprintf(w, "| kind | class | faults | precision %% | recall %% | localisation %% | detect (max) | clear (max) | held |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|\n")
	for _, row := range rep.Rows {
		recall, loc := pct(row.Detected, row.Faults), pct(row.Localised, row.Detected)
		if row.Class == "quiet" {
			recall, loc = "n/a", "n/a"
		}
		detect, clear := "—", "—"
		if row.Detected > 0 {
			detect, clear = row.DetectMax.String(), row.ClearMax.String()
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s | %s | %d of %d |\n", row.Kind, row.Class, row.Faults,
			pct(row.TrueEps, row.Episodes), recall, loc, detect, clear, row.Held, row.Detected)
	}
	for _, row := range rep.Rows {
		for _, m := range row.Missing {
			if row.Class != "quiet" {
				fmt.Fprintf(w, "missed: %s\n", m)
			}
		}
	}
	for _, row := range rep.Rows {
		for _, a := range row.Alerts {
			fmt.Fprintf(w, "alerts during %s\n", a)
		}
	}
	for _, f := range rep.FalseEpisodes {
		fmt.Fprintf(w, "false alert: %s\n", f)
	}
	c := r.Cfg
	fmt.Fprintf(w, "campaign: %d hosts × %d rails, groups of %d, %d spines per rail, --paths %d, --max-peers %d, --interval %s; seed %d; %d faults; fabric time %s, wall time %s\n",
		c.Hosts, c.Rails, c.GroupSize, c.Spines, c.Paths, c.MaxPeers, c.Interval, c.Seed, len(r.Faults), r.Elapsed, wall.Round(time.Second))
	var fs []string
	for _, f := range r.Faults {
		fs = append(fs, fmt.Sprintf("  %s at +%s for %s", f, f.Start.Sub(r.Ticks[0].at), f.End.Sub(f.Start)))
	}
	fmt.Fprintf(w, "faults:\n%s\n", strings.Join(fs, "\n"))
	fmt.Fprintf(w, "overall: precision %.1f %%, recall %.1f %%, localisation %.1f %%\n", 100*rep.Precision, 100*rep.Recall, 100*rep.Loc)
}

// Failures are the figures under their goals, one line each.
func (rep Report) Failures() []string {
	var out []string
	for _, row := range rep.Rows {
		if row.Episodes > 0 && ratio(row.TrueEps, row.Episodes) < GoalPrecision {
			out = append(out, fmt.Sprintf("%s: precision %s %% < %.0f %%", row.Kind, pct(row.TrueEps, row.Episodes), 100*GoalPrecision))
		}
		if row.Class == "quiet" {
			continue
		}
		if ratio(row.Detected, row.Faults) < GoalRecall {
			out = append(out, fmt.Sprintf("%s: recall %s %% < %.0f %%", row.Kind, pct(row.Detected, row.Faults), 100*GoalRecall))
		}
		if row.Detected > 0 && ratio(row.Localised, row.Detected) < GoalLocalisation {
			out = append(out, fmt.Sprintf("%s: localisation %s %% < %.0f %%", row.Kind, pct(row.Localised, row.Detected), 100*GoalLocalisation))
		}
		goal := GoalDetectHard
		if row.Class == "gray" {
			goal = GoalDetectGray
		}
		if row.DetectMax > goal {
			out = append(out, fmt.Sprintf("%s: detected after %s > %s", row.Kind, row.DetectMax, goal))
		}
		if row.NotCleared > 0 {
			out = append(out, fmt.Sprintf("%s: %d alerts still firing %s after the repair", row.Kind, row.NotCleared, GoalClear))
		}
		if row.Held < row.Detected {
			out = append(out, fmt.Sprintf("%s: %d of %d faults' alerts had a gap", row.Kind, row.Detected-row.Held, row.Detected))
		}
	}
	if rep.QuietFalse > 0 {
		out = append(out, fmt.Sprintf("%d alerts outside any fault", rep.QuietFalse))
	}
	return out
}

// Package grafanatest reads a Grafana dashboard's JSON (deploy/grafana) and gives every
// panel's queries with the dashboard's template variables substituted, so that a test
// can run each against a real Prometheus and require data:
//
//	qs, err := grafanatest.Load(path, map[string]string{"rail": "rxe0", "agent": "h1", ...})
//	for _, q := range qs {
//		prom.WaitFor(t, time.Minute, q.Expr, promtest.NonEmpty)
//	}
//
// Variables a query uses and the caller does not give are an error, so a query never
// reaches Prometheus with a `$name` left in it. Grafana's own interval variables
// ($__rate_interval, $__interval, $__range) default to BuiltinDefaults.
package grafanatest

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
)

// Query is one panel target.
type Query struct {
	Panel   string // the panel's title (variables substituted)
	RefID   string
	Expr    string // PromQL with the variables substituted
	Instant bool
}

// Variable is one query variable of the dashboard, with PromQL that gives its values.
type Variable struct {
	Name  string
	Query string // as written: label_values(SELECTOR, LABEL)
	// Expr is Query as PromQL (variables substituted): `group by (LABEL) (SELECTOR)`.
	Expr  string
	Label string
}

// BuiltinDefaults are Grafana's interval variables as a test runs them: a short rate
// window for a test Prometheus that scrapes every second.
var BuiltinDefaults = map[string]string{"__rate_interval": "30s", "__interval": "15s", "__range": "1h"}

type panel struct {
	Type    string  `json:"type"`
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"` // a collapsed row's panels
	Targets []struct {
		RefID   string `json:"refId"`
		Expr    string `json:"expr"`
		Instant bool   `json:"instant"`
		Hide    bool   `json:"hide"`
	} `json:"targets"`
}

type board struct {
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// Load reads the dashboard at path and returns its queries (Queries).
func Load(path string, vars map[string]string) ([]Query, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Queries(b, vars)
}

// Queries returns every query of every panel (rows' collapsed panels included), in the
// dashboard's order. A panel other than a row or text without a query is an error: a
// test that requires data from every panel must not pass one by.
func Queries(dashboardJSON []byte, vars map[string]string) ([]Query, error) {
	var d board
	if err := json.Unmarshal(dashboardJSON, &d); err != nil {
		return nil, fmt.Errorf("dashboard JSON: %w", err)
	}
	var out []Query
	var walk func([]panel) error
	walk = func(ps []panel) error {
		for _, p := range ps {
			if p.Type == "row" {
				if err := walk(p.Panels); err != nil {
					return err
				}
				continue
			}
			if p.Type == "text" {
				continue
			}
			title, err := Substitute(p.Title, vars)
			if err != nil {
				return fmt.Errorf("panel %q: title: %w", p.Title, err)
			}
			n := 0
			for _, tg := range p.Targets {
				if tg.Hide {
					continue
				}
				expr, err := Substitute(tg.Expr, vars)
				if err != nil {
					return fmt.Errorf("panel %q, query %s: %w", p.Title, tg.RefID, err)
				}
				if strings.TrimSpace(expr) == "" {
					return fmt.Errorf("panel %q, query %s: empty expression", p.Title, tg.RefID)
				}
				out = append(out, Query{Panel: title, RefID: tg.RefID, Expr: expr, Instant: tg.Instant})
				n++
			}
			if n == 0 {
				return fmt.Errorf("panel %q (%s) has no query", p.Title, p.Type)
			}
		}
		return nil
	}
	if err := walk(d.Panels); err != nil {
		return nil, err
	}
	return out, nil
}

var labelValues = regexp.MustCompile(`^\s*label_values\(\s*(.*?)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)

// Variables returns the dashboard's query variables with PromQL for their values
// (label_values(SELECTOR, LABEL) only: the form this project's dashboards use).
func Variables(dashboardJSON []byte, vars map[string]string) ([]Variable, error) {
	var d board
	if err := json.Unmarshal(dashboardJSON, &d); err != nil {
		return nil, fmt.Errorf("dashboard JSON: %w", err)
	}
	var out []Variable
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			return nil, fmt.Errorf("variable %s: query %q is not label_values(SELECTOR, LABEL)", v.Name, q)
		}
		sel, err := Substitute(m[1], vars)
		if err != nil {
			return nil, fmt.Errorf("variable %s: %w", v.Name, err)
		}
		out = append(out, Variable{Name: v.Name, Query: q, Label: m[2], Expr: fmt.Sprintf("group by (%s) (%s)", m[2], sel)})
	}
	return out, nil
}

// Grafana's variable syntaxes: ${name}, ${name:format}, $name, [[name]].
var variableRef = regexp.MustCompile(`\$\{([a-zA-Z_][a-zA-Z0-9_]*)(?::[a-z]+)?\}|\$([a-zA-Z_][a-zA-Z0-9_]*)|\[\[([a-zA-Z_][a-zA-Z0-9_]*)\]\]`)

// Substitute replaces the variables in s with their values; built-in interval variables
// not in vars take BuiltinDefaults. Every variable left without a value is named in the
// error.
func Substitute(s string, vars map[string]string) (string, error) {
	missing := map[string]bool{}
	out := variableRef.ReplaceAllStringFunc(s, func(ref string) string {
		m := variableRef.FindStringSubmatch(ref)
		name := m[1] + m[2] + m[3]
		if v, ok := vars[name]; ok {
			return v
		}
		if v, ok := BuiltinDefaults[name]; ok {
			return v
		}
		missing[name] = true
		return ref
	})
	if len(missing) > 0 {
		names := make([]string, 0, len(missing))
		for n := range missing {
			names = append(names, "$"+n)
		}
		sort.Strings(names)
		return out, fmt.Errorf("no value for %s in %q", strings.Join(names, ", "), s)
	}
	return out, nil
}

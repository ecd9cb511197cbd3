package campaign

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
)

// job is the agents' scrape job, as the shipped scrape config names it.
const job = "gorping-mesh"

// prom is the Prometheus side: a TSDB the scrapes append into, the PromQL engine and
// the shipped rule groups, evaluated at explicit (virtual) times.
type prom struct {
	eng    *promql.Engine
	db     *tsdb.DB
	dir    string
	groups []*rules.Group
	// last are each instance's series of its last scrape, for staleness markers.
	last map[string]map[string]labels.Labels
	// lbls caches the label sets by series key.
	lbls map[string]labels.Labels
}

func newProm(ruleFiles []string, interval time.Duration) (*prom, error) {
	dir, err := os.MkdirTemp("", "gorping-campaign-tsdb")
	if err != nil {
		return nil, err
	}
	opts := tsdb.DefaultOptions()
	opts.WALSegmentSize = -1 // no WAL: the campaign's data lives as long as the run
	opts.MinBlockDuration = int64(24 * time.Hour / time.Millisecond)
	opts.MaxBlockDuration = opts.MinBlockDuration
	db, err := tsdb.Open(dir, nil, nil, opts, tsdb.NewDBStats())
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("tsdb: %w", err)
	}
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 100_000_000, Timeout: time.Hour, LookbackDelta: 5 * time.Minute})
	m := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:    rules.EngineQueryFunc(eng, db),
		AppendableV2: db,
		Queryable:    db,
		Context:      context.Background(),
		NotifyFunc:   func(context.Context, string, ...*rules.Alert) {},
		Logger:       promslog.NewNopLogger(),
		Registerer:   prometheus.NewRegistry(),
	})
	gm, errs := m.LoadGroups(interval, labels.EmptyLabels(), "", nil, false, ruleFiles...)
	if errs != nil {
		db.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("rules: %v", errs)
	}
	p := &prom{eng: eng, db: db, dir: dir, last: map[string]map[string]labels.Labels{}, lbls: map[string]labels.Labels{}}
	// Groups in file order: the localisation group reads the first one's series.
	var keys []string
	for k := range gm {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return gm[keys[i]].Name() < gm[keys[j]].Name() })
	for _, k := range keys {
		if gm[k].Name() == "gorping-mesh" {
			p.groups = append([]*rules.Group{gm[k]}, p.groups...)
		} else {
			p.groups = append(p.groups, gm[k])
		}
	}
	return p, nil
}

func (p *prom) close() {
	p.db.Close()
	os.RemoveAll(p.dir)
}

// scrape appends one scrape of instance at ts: up, and every sample of g (nil: the
// scrape failed), with staleness markers for the series that went away, as Prometheus'
// scrape loop writes them.
func (p *prom) scrape(instance string, g prometheus.Gatherer, ts time.Time) error {
	t := ts.UnixMilli()
	app := p.db.Appender(context.Background())
	cur := map[string]labels.Labels{}
	add := func(name string, v float64, pairs ...string) error {
		var b strings.Builder
		b.WriteString(name)
		for _, s := range pairs {
			b.WriteByte(0)
			b.WriteString(s)
		}
		b.WriteByte(0)
		b.WriteString(instance)
		key := b.String()
		ls, ok := p.lbls[key]
		if !ok {
			all := append([]string{labels.MetricName, name, "job", job, "instance", instance}, pairs...)
			ls = labels.FromStrings(all...)
			p.lbls[key] = ls
		}
		cur[key] = ls
		_, err := app.Append(0, ls, t, v)
		return err
	}
	up := 0.0
	var mfs []*dto.MetricFamily
	if g != nil {
		var err error
		if mfs, err = g.Gather(); err == nil {
			up = 1
		}
	}
	if err := add("up", up); err != nil {
		return err
	}
	for _, mf := range mfs {
		name := mf.GetName()
		for _, m := range mf.GetMetric() {
			var pairs []string
			for _, l := range m.GetLabel() {
				pairs = append(pairs, l.GetName(), l.GetValue())
			}
			var err error
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				err = add(name, m.GetCounter().GetValue(), pairs...)
			case dto.MetricType_GAUGE:
				err = add(name, m.GetGauge().GetValue(), pairs...)
			case dto.MetricType_UNTYPED:
				err = add(name, m.GetUntyped().GetValue(), pairs...)
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, bk := range h.GetBucket() {
					le := fmt.Sprint(bk.GetUpperBound())
					if err = add(name+"_bucket", float64(bk.GetCumulativeCount()), append(pairs, "le", le)...); err != nil {
						break
					}
				}
				if err == nil {
					err = add(name+"_bucket", float64(h.GetSampleCount()), append(pairs, "le", "+Inf")...)
				}
				if err == nil {
					err = add(name+"_sum", h.GetSampleSum(), pairs...)
				}
				if err == nil {
					err = add(name+"_count", float64(h.GetSampleCount()), pairs...)
				}
			}
			if err != nil {
				app.Rollback()
				return fmt.Errorf("append %s: %w", name, err)
			}
		}
	}
	for key, ls := range p.last[instance] {
		if _, ok := cur[key]; !ok {
			if _, err := app.Append(0, ls, t, math.Float64frombits(value.StaleNaN)); err != nil {
				app.Rollback()
				return err
			}
		}
	}
	p.last[instance] = cur
	return app.Commit()
}

// eval evaluates every rule group at ts, in order.
func (p *prom) eval(ts time.Time) {
	for _, g := range p.groups {
		g.Eval(context.Background(), ts)
	}
}

// firing are the alerts firing now: name and labels (the rule's and the series').
type alertKey string

type firingAlert struct {
	name   string
	labels labels.Labels
}

func (p *prom) firing() map[alertKey]firingAlert {
	out := map[alertKey]firingAlert{}
	for _, g := range p.groups {
		for _, r := range g.AlertingRules() {
			for _, a := range r.ActiveAlerts() {
				if a.State != rules.StateFiring {
					continue
				}
				out[alertKey(a.Labels.String())] = firingAlert{name: r.Name(), labels: a.Labels}
			}
		}
	}
	return out
}

var _ storage.Appendable = (*tsdb.DB)(nil)

// query evaluates expr at ts, for the campaign's debugging output.
func (p *prom) query(expr string, ts time.Time) string {
	q, err := p.eng.NewInstantQuery(context.Background(), p.db, nil, expr, ts)
	if err != nil {
		return err.Error()
	}
	defer q.Close()
	r := q.Exec(context.Background())
	if r.Err != nil {
		return r.Err.Error()
	}
	return r.Value.String()
}

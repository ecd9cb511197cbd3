// Command dashboard writes deploy/grafana/gorping-mesh.json, the Grafana dashboard of the
// gorping mesh, from Go with the Grafana Foundation SDK. A module of its own (like
// tools/release): the SDK stays out of gorping's go.mod.
//
//	cd tools/dashboard && go run . -out ../../deploy/grafana/gorping-mesh.json
//
// The dashboard reads the localisation rules of deploy/prometheus/gorping-rules.yml
// (group gorping-localisation) and the metric contract of docs/mesh.md; its test checks
// that the committed JSON is what this program writes.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// localisationAlerts are the alerts that name a culprit.
var localisationAlerts = []string{"GorpingPathBlackhole", "GorpingFlowBlackhole", "GorpingTargetRailDown", "GorpingGroupRailDown",
	"GorpingTargetRailLoss", "GorpingSourceRailDown",
	"GorpingGroupPairLoss", "GorpingGroupPairLatency"}

var ds = common.DataSourceRef{Type: ptr("prometheus"), Uid: ptr("${datasource}")}

func ptr[T any](v T) *T { return &v }

func query(expr string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Datasource(ds).Expr(expr)
}

func instant(expr string) *prometheus.DataqueryBuilder {
	return query(expr).Instant().Format(prometheus.PromQueryFormatTable).RefId("A")
}

func thresholds(steps ...any) *dashboard.ThresholdsConfigBuilder {
	var ts []dashboard.Threshold
	for i := 0; i < len(steps); i += 2 {
		var v *float64
		if f, ok := steps[i].(float64); ok {
			v = &f
		}
		ts = append(ts, dashboard.Threshold{Value: v, Color: steps[i+1].(string)})
	}
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(ts)
}

var colouredCells = common.TableCellOptions{TableColoredBackgroundCellOptions: &common.TableColoredBackgroundCellOptions{
	Type: common.TableCellDisplayModeColorBackground}}

// matrix is a table of rows × columns: an instant query's samples by two labels (the
// groupingToMatrix transformation), each cell coloured by its value.
func matrix(title, description, expr, rows, columns, unit string, th *dashboard.ThresholdsConfigBuilder) *table.PanelBuilder {
	return table.NewPanelBuilder().
		Title(title).Description(description).Datasource(ds).
		WithTarget(instant(expr)).
		WithTransformation(dashboard.DataTransformerConfig{Id: "groupingToMatrix", Options: map[string]any{
			"rowField": rows, "columnField": columns, "valueField": "Value", "emptyValue": "null"}}).
		Unit(unit).Thresholds(th).CellOptions(colouredCells).
		Span(12).Height(10)
}

var (
	lossThresholds = thresholds(nil, "green", 0.001, "yellow", 0.01, "orange", 0.05, "red")
	rttThresholds  = thresholds(nil, "green", 50e-6, "yellow", 200e-6, "orange", 1e-3, "red")
)

func build() (dashboard.Dashboard, error) {
	alerts := strings.Join(localisationAlerts, "|")
	pair := `instance="$instance", device="$rail", target="$target"`
	return dashboard.NewDashboardBuilder("gorping mesh: where is the fault").
		Uid("gorping-mesh-fault").
		Description("The gorping mesh's localisation rules (deploy/prometheus/gorping-rules.yml) per rail: the culprits the alerts name, loss and RTT between groups and between hosts, and the paths of one pair. docs/mesh.md, Localisation.").
		Tags([]string{"gorping", "rdma"}).
		Refresh("30s").Time("now-1h", "now").Timezone("utc").
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Prometheus").Type("prometheus")).
		WithVariable(dashboard.NewQueryVariableBuilder("rail").Label("rail (local device)").Datasource(ds).
			Query(dashboard.StringOrMap{String: ptr("label_values(gorping:pair_up, device)")}).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc)).
		WithVariable(dashboard.NewQueryVariableBuilder("agent").Label("agent (source)").Datasource(ds).
			Query(dashboard.StringOrMap{String: ptr("label_values(gorping_agent_info, agent)")}).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc)).
		WithVariable(dashboard.NewQueryVariableBuilder("instance").Label("its instance").Datasource(ds).
			Query(dashboard.StringOrMap{String: ptr(`label_values(gorping_agent_info{agent="$agent"}, instance)`)}).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Hide(dashboard.VariableHideHideVariable)).
		WithVariable(dashboard.NewQueryVariableBuilder("target").Label("target (on the rail)").Datasource(ds).
			Query(dashboard.StringOrMap{String: ptr(`label_values(gorping_target_up{instance="$instance", device="$rail"}, target)`)}).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc)).
		WithRow(dashboard.NewRowBuilder("Culprits now")).
		WithPanel(table.NewPanelBuilder().
			Title("Culprits named by the localisation alerts").
			Description("Pending and firing localisation alerts: each names its culprit in its labels (peer and target: a host's rail; agent and device: a source's rail; group and peer_group: the links between two groups' switches; path: one ECMP flow).").
			Datasource(ds).
			WithTarget(instant(`ALERTS{alertname=~"` + alerts + `"}`)).
			WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
				"excludeByName": map[string]any{"Time": true, "Value": true, "__name__": true}}}).
			Span(24).Height(8)).
		WithRow(dashboard.NewRowBuilder("Groups on rail $rail")).
		WithPanel(matrix("Loss between groups (rows: from, columns: to)",
			"gorping:group_pair_loss:ratio_5m: the share of failed probes over 5 minutes between two groups, over the pairs no dead host, dead NIC or black-holed path explains. The diagonal is the loss inside a group.",
			`gorping:group_pair_loss:ratio_5m{device="$rail"}`, "group", "peer_group", "percentunit", lossThresholds)).
		WithPanel(matrix("Median RTT between groups (network part where split)",
			"gorping:group_pair_rtt_seconds:p50_5m: the median over the pairs of two groups of each pair's median RTT, the network's part where the NIC stamps completions (ts_source=nic), else the software RTT.",
			`gorping:group_pair_rtt_seconds:p50_5m{device="$rail"}`, "group", "peer_group", "s", rttThresholds)).
		WithRow(dashboard.NewRowBuilder("Hosts on rail $rail")).
		WithPanel(matrix("Loss between hosts (rows: agent, columns: peer)",
			"gorping:pair_loss:ratio_5m: every pair's share of failed probes over 5 minutes.",
			`gorping:pair_loss:ratio_5m{device="$rail"}`, "agent", "peer", "percentunit", lossThresholds)).
		WithPanel(matrix("Median RTT between hosts",
			"gorping:pair_rtt_seconds:p50_5m: every pair's median RTT over 5 minutes (network part where split).",
			`gorping:pair_rtt_seconds:p50_5m{device="$rail"}`, "agent", "peer", "s", rttThresholds)).
		WithRow(dashboard.NewRowBuilder("One pair: $agent -> $target on $rail")).
		WithPanel(table.NewPanelBuilder().
			Title("Its paths now").
			Description("gorping_path_up with the flow of each path's current connection (gorping_path_info: QP numbers, RoCEv2 UDP source port): the paths a black-holed ECMP member fails share a member.").
			Datasource(ds).
			WithTarget(instant(`gorping_path_up{` + pair + `} * on (instance, job, device, port, target, peer, path) group_left (local_qpn, remote_qpn, udp_sport) gorping_path_info`)).
			WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
				"excludeByName": map[string]any{"Time": true, "__name__": true, "job": true},
				"renameByName":  map[string]any{"Value": "up"}}}).
			Span(8).Height(9)).
		WithPanel(timeseries.NewPanelBuilder().
			Title("Loss per path").
			Description("gorping:path_loss:ratio_2m: each path's share of failed probes over 2 minutes.").
			Datasource(ds).
			WithTarget(query(`gorping:path_loss:ratio_2m{` + pair + `}`).LegendFormat("path {{path}}").RefId("A")).
			Unit("percentunit").Min(0).Max(1).
			Span(8).Height(9)).
		WithPanel(timeseries.NewPanelBuilder().
			Title("RTT").
			Description("The pair's median: the software RTT (both hosts' processing included) and, where the NIC stamps completions, the network's part.").
			Datasource(ds).
			WithTarget(query(`histogram_quantile(0.5, sum(rate(gorping_probe_rtt_seconds{` + pair + `}[$__rate_interval]))) or histogram_quantile(0.5, sum by (le) (rate(gorping_probe_rtt_seconds_bucket{` + pair + `}[$__rate_interval])))`).
				LegendFormat("software RTT p50").RefId("A")).
			WithTarget(query(`gorping:pair_rtt_seconds:p50_5m{` + pair + `}`).LegendFormat("localisation RTT p50 (network part where split)").RefId("B")).
			Unit("s").Min(0).
			Span(8).Height(9)).
		Build()
}

// render is the dashboard as committed: indented JSON with a final newline, every
// panel and row with its own id (Grafana keys panel links and state by it).
func render() ([]byte, error) {
	d, err := build()
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	for i := range d.Panels {
		id := uint32(i + 1)
		switch p := d.Panels[i]; {
		case p.Panel != nil:
			p.Panel.Id = &id
		case p.RowPanel != nil:
			p.RowPanel.Id = id
		}
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("dashboard JSON: %w", err)
	}
	return append(b, '\n'), nil
}

func main() {
	out := flag.String("out", "../../deploy/grafana/gorping-mesh.json", "where to write the dashboard")
	flag.Parse()
	b, err := render()
	if err == nil {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
}

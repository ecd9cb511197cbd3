package campaign

import (
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

// TestJudgeGroupAlerts: the group-level alerts name what their labels say, and only
// that: a pair of groups on a rail (GorpingFlowBlackhole, the pair rules) an uplink
// fault of either group, one group on a rail (GorpingGroupRailDown) its ToR, and a
// host's lossy rail (GorpingTargetRailLoss) that host and rail.
func TestJudgeGroupAlerts(t *testing.T) {
	fab := NewFabric(Shape{Hosts: 20, GroupSize: 5, Rails: 2, Spines: 4}, 0, HashUDPSport, HashDestQP)
	alert := func(name string, kv ...string) named {
		return fab.parseAlert(firingAlert{name: name, labels: labels.FromStrings(kv...)})
	}
	flow := alert("GorpingFlowBlackhole", "group", GroupName(1), "peer_group", GroupName(3), "device", Device(0), "port", "1")
	torDown := alert("GorpingGroupRailDown", "group", GroupName(1), "device", Device(1), "port", "1")
	flap := alert("GorpingTargetRailLoss", "peer", HostName(7), "peer_group", GroupName(1),
		"target", "10.0.0.1:7174", "device", Device(1), "port", "1")
	for _, c := range []struct {
		what         string
		f            Fault
		n            named
		match, exact bool
	}{
		{"flow alert, black hole above group 1 on rail 0", Fault{Kind: KindBlackSport, Group: 1, Rail: 0}, flow, true, true},
		{"flow alert, black hole above group 3 on rail 0", Fault{Kind: KindBlackQP, Group: 3, Rail: 0}, flow, true, true},
		{"flow alert, black hole above group 2", Fault{Kind: KindBlackSport, Group: 2, Rail: 0}, flow, false, false},
		{"flow alert, black hole on the other rail", Fault{Kind: KindBlackSport, Group: 1, Rail: 1}, flow, false, false},
		{"group rail down, its ToR", Fault{Kind: KindToRDown, Group: 1, Rail: 1}, torDown, true, true},
		{"group rail down, another ToR", Fault{Kind: KindToRDown, Group: 2, Rail: 1}, torDown, false, false},
		{"group rail down, its ToR's other rail", Fault{Kind: KindToRDown, Group: 1, Rail: 0}, torDown, false, false},
		{"group rail down is no uplink fault", Fault{Kind: KindUplinkLoss, Group: 1, Rail: 1}, torDown, false, false},
		{"flapping, its host and rail", Fault{Kind: KindNICFlap, Host: 7, Rail: 1}, flap, true, true},
		{"flapping, another host", Fault{Kind: KindNICFlap, Host: 8, Rail: 1}, flap, false, false},
	} {
		if match, exact := fab.judge(c.f, c.n); match != c.match || exact != c.exact {
			t.Errorf("%s: judge = (match %v, exact %v), want (%v, %v)", c.what, match, exact, c.match, c.exact)
		}
	}
}

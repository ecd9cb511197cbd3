package pinglist_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gorping/gorping/mesh/pinglist"
)

// The members file of four racks of three: the plan of node12 in epoch 2 as `gorping
// mesh plan --self node12 --max-peers 4 --epoch 2` prints it (docs/mesh.md shows this run).
func ExamplePlan_Targets() {
	dir, _ := os.MkdirTemp("", "plan")
	defer os.RemoveAll(dir)
	members := filepath.Join(dir, "members.txt")
	os.WriteFile(members, []byte("# HOST GROUP\n"+
		"node00 rack0\nnode01 rack0\nnode02 rack0\nnode10 rack1\nnode11 rack1\nnode12 rack1\n"+
		"node20 rack2\nnode21 rack2\nnode22 rack2\nnode30 rack3\nnode31 rack3\nnode32 rack3\n"), 0o644)
	data, err := os.ReadFile(members)
	ms, _ := pinglist.ParseMembers(data)
	p, err := pinglist.New(ms, 4)
	fmt.Printf("plan: epoch 2: %v\n", p.Summary())
	ts, _ := p.Targets("node12", 2)
	for _, t := range ts {
		fmt.Println("node12", t.Host)
	}
	fmt.Println(err)
	// Output:
	// plan: epoch 2: 12 members in 4 groups, at most 4 targets each; every ordered pair of groups probed in every epoch; every pair of hosts in different groups within 9 epochs
	// node12 node10
	// node12 node11
	// node12 node22
	// node12 node31
	// <nil>
}

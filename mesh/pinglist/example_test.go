package pinglist_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gorping/gorping/mesh/pinglist"
)

// The members file of four racks of three (docs/mesh.md shows this run).
func ExampleRunPlan() {
	dir, _ := os.MkdirTemp("", "plan")
	defer os.RemoveAll(dir)
	members := filepath.Join(dir, "members.txt")
	os.WriteFile(members, []byte("# HOST GROUP\n"+
		"node00 rack0\nnode01 rack0\nnode02 rack0\nnode10 rack1\nnode11 rack1\nnode12 rack1\n"+
		"node20 rack2\nnode21 rack2\nnode22 rack2\nnode30 rack3\nnode31 rack3\nnode32 rack3\n"), 0o644)
	err := pinglist.RunPlan(pinglist.PlanOptions{Members: members, Self: "node12", MaxPeers: 4, Epoch: 2}, os.Stdout, os.Stdout)
	fmt.Println(err)
	// Output:
	// plan: epoch 2: 12 members in 4 groups, at most 4 targets each; every ordered pair of groups probed in every epoch; every pair of hosts in different groups within 9 epochs
	// node12 node10
	// node12 node11
	// node12 node22
	// node12 node31
	// <nil>
}

package mesh

import (
	"strings"
	"testing"

	"github.com/gorping/gorping/internal/meshenv"
)

// TestNewInNeedsEverySeam: an agent in a simulated world given half of it would reach
// this host (its interfaces, its RDMA devices) for the rest; NewIn refuses. The campaign
// (test/campaign) runs agents with every seam.
func TestNewInNeedsEverySeam(t *testing.T) {
	_, err := NewIn(DefaultConfig(), meshenv.Env{})
	if err == nil || !strings.Contains(err.Error(), "every seam") {
		t.Fatalf("NewIn with no seams: %v, want an error naming the seams", err)
	}
}

package mesh

import (
	"bytes"
	"net/http"
	"sync"
	"time"

	"github.com/gorping/gorping/internal/meshtest"
)

// maxSeriesPerTarget is the cardinality budget of one target (docs/mesh.md): the RTT
// histogram (one native histogram), probes, up, connections, path, and the failure
// reasons the target has seen.
const maxSeriesPerTarget = 10

// seriesPerTarget counts each target's series in a scrape, a histogram as the one
// native histogram series Prometheus stores for it.
func seriesPerTarget(m meshtest.Metrics) map[string]int {
	n := map[string]int{}
	for _, mf := range m {
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "target" {
					n[l.GetValue()]++
				}
			}
		}
	}
	return n
}

// lockedWriter collects log output written from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func defaultClient() *http.Client { return &http.Client{Timeout: 10 * time.Second} }

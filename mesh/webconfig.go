package mesh

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v2"

	"github.com/gorping/gorping/mesh/source"
)

// webConfigPoll is how often the agent checks its web configuration for changes.
const webConfigPoll = 5 * time.Second

// maxWebConfigBytes bounds the web configuration read by the check (a few keys, a few
// certificates inline at most).
const maxWebConfigBytes = 1 << 20

// watchWebConfig tells the operator what exporter-toolkit does silently with the web
// configuration it reads at every request: a file broken at run time answers every
// request 500 (until fixed; the agent keeps probing), and an empty basic_auth_users asks
// for no credentials. Each is logged once per change of the file, until ctx ends.
func (a *Agent) watchWebConfig(ctx context.Context, every time.Duration) {
	path := a.cfg.WebConfigFile
	log := a.log.With("file", path)
	var last []byte
	read := false
	broken := false
	users := -1 // unknown
	check := func() {
		data, err := source.ReadRegularFile(path, maxWebConfigBytes)
		if read && err == nil && bytes.Equal(data, last) {
			return
		}
		read, last = true, data
		if err == nil {
			err = web.Validate(path)
		}
		if err != nil {
			if !broken {
				log.Error("the web configuration is broken: every request is answered 500 until it is fixed (exporter-toolkit reads it at each request); probing goes on", "err", err)
			}
			broken = true
			return
		}
		if broken {
			log.Info("the web configuration is valid again")
			broken = false
		}
		n, present := basicAuthUsers(data)
		if n == 0 && (present || users > 0) {
			log.Warn("the web configuration has no basic_auth_users: exporter-toolkit then asks for no credentials, every endpoint is open")
		}
		users = n
	}
	check()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			check()
		}
	}
}

// basicAuthUsers counts the web configuration's basic_auth_users and says whether the
// key is there at all.
func basicAuthUsers(data []byte) (n int, present bool) {
	var c map[string]any
	if yaml.Unmarshal(data, &c) != nil {
		return 0, false
	}
	u, present := c["basic_auth_users"]
	m, _ := u.(map[any]any)
	return len(m), present
}

// dedupHandler drops a record equal to the one before it (same level, message and
// attributes): exporter-toolkit logs "Unable to parse configuration" at every request
// while its file is broken, which watchWebConfig reports once.
type dedupHandler struct {
	slog.Handler
	mu   *sync.Mutex
	last *string
}

func newDedupHandler(h slog.Handler) *dedupHandler {
	return &dedupHandler{Handler: h, mu: &sync.Mutex{}, last: new(string)}
}

func (h *dedupHandler) Handle(ctx context.Context, r slog.Record) error {
	var b bytes.Buffer
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	key := b.String()
	h.mu.Lock()
	dup := key == *h.last
	*h.last = key
	h.mu.Unlock()
	if dup {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h *dedupHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &dedupHandler{Handler: h.Handler.WithAttrs(slices.Clone(as)), mu: h.mu, last: h.last}
}

func (h *dedupHandler) WithGroup(name string) slog.Handler {
	return &dedupHandler{Handler: h.Handler.WithGroup(name), mu: h.mu, last: h.last}
}

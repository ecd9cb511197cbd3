package target

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
)

// ParseProbeQuery parses /probe's query: target=HOST[:PORT] (once) and count=N
// (1..maxCount, default 1); other parameters are ignored, as blackbox_exporter
// ignores what it does not know. Errors quote the input briefly.
func ParseProbeQuery(raw string, defaultPort uint16, maxCount int) (Target, int, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return Target{}, 0, fmt.Errorf("bad query: %s", Quote(err.Error()))
	}
	if len(q["target"]) > 1 {
		return Target{}, 0, errors.New("target: given more than once")
	}
	t, err := Parse(q.Get("target"), defaultPort)
	if err != nil {
		return Target{}, 0, err
	}
	count := 1
	if c := q["count"]; len(c) > 1 {
		return Target{}, 0, errors.New("count: given more than once")
	} else if len(c) == 1 {
		count, err = strconv.Atoi(c[0])
		if err != nil || count < 1 || count > maxCount {
			return Target{}, 0, fmt.Errorf("count %s: want 1..%d", Quote(c[0]), maxCount)
		}
	}
	return t, count, nil
}

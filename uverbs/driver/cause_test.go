package driver

import (
	"strings"
	"testing"
)

func TestWCStatusCause(t *testing.T) {
	t.Parallel()
	for s, words := range map[WCStatus][]string{
		WCRetryExcErr:    {"RETRY_EXC_ERR (12)", "route", "RoCE v1 vs v2", "MTU", "PFC"},
		WCRemAccessErr:   {"REM_ACCESS_ERR (10)", "rkey", "length"},
		WCLocLenErr:      {"LOC_LEN_ERR (1)", "buffer sizes"},
		WCRNRRetryExcErr: {"RNR_RETRY_EXC_ERR (13)", "no receive posted"},
		WCWRFlushErr:     {"WR_FLUSH_ERR (5)", "first completion"},
		WCStatus(99):     {"WCStatus(99) (99)", "unknown"},
	} {
		c := s.Cause()
		for _, w := range words {
			if !strings.Contains(c, w) {
				t.Errorf("%d.Cause() = %q, lacks %q", s, c, w)
			}
		}
	}
	// Every status uverbs names has its own sentence: one line, no copy-paste.
	seen := map[string]WCStatus{}
	for s := WCSuccess; s <= WCGeneralErr; s++ {
		c := s.Cause()
		if strings.Contains(c, "\n") || strings.Contains(c, "unknown completion status") {
			t.Errorf("%s: %q", s, c)
		}
		_, text, _ := strings.Cut(c, ": ")
		if o, dup := seen[text]; dup {
			t.Errorf("%s and %s share the text %q", s, o, text)
		}
		seen[text] = s
	}
}

// Package trace is gorping's --trace: one Tracer per run receives a record for every
// rdma_cm command and event, every uverbs command, QP transition, mmap and data-path
// step, and writes each as one line (text or JSON) with a timestamp, under a lock (the
// rdma_cm reader goroutine and -P sessions trace concurrently).
//
// A nil *Tracer is valid and does nothing; callers on the data path test for nil
// first so that tracing off costs a pointer comparison and builds no fields.
package trace

import (
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
)

// Field is one decoded value of a record. Val is a string, bool, integer or float;
// anything else is printed with %v.
type Field struct {
	Key string
	Val any
}

// F makes a Field.
func F(key string, val any) Field { return Field{key, val} }

// Counter names a per-ping count.
type Counter int

// The per-ping counts.
const (
	Syscall    Counter = iota // system calls gorping made itself (write, read, mmap)
	PostSend                  // send work requests posted (SEND, RDMA READ/WRITE)
	PostRecv                  // receive work requests posted
	Doorbell                  // send doorbells that are commands (rxe's POST_SEND write; mlx5's MMIO stores are not seen)
	Arm                       // completion-queue arms that are commands (REQ_NOTIFY_CQ)
	Completion                // work completions polled
	Wakeup                    // completion events read from the completion channel
	numCounters
)

var counterNames = [numCounters]string{"syscalls", "wrs_send", "wrs_recv", "doorbells", "arms", "completions", "wakeups"}

// Tracer writes trace records to one writer.
type Tracer struct {
	mu    sync.Mutex
	w     io.Writer
	json  bool
	start time.Time
	buf   []byte
	count [numCounters]atomic.Uint64
}

// New returns a tracer writing human-readable lines (json false) or JSON lines with
// "type":"trace" (json true) to w, one Write per record.
func New(w io.Writer, json bool) *Tracer {
	return &Tracer{w: w, json: json, start: time.Now()}
}

// Count adds 1 to a per-ping counter.
func (t *Tracer) Count(c Counter) {
	if t != nil {
		t.count[c].Add(1)
	}
}

// CountN adds n to a per-ping counter.
func (t *Tracer) CountN(c Counter, n int) {
	if t != nil && n > 0 {
		t.count[c].Add(uint64(n))
	}
}

// Ping writes the counts since the previous Ping (or the start) as a "ping" record
// for the ping seq of role ("client" or "server") and resets them. With several
// connections tracing at once (-P) the counts are the sum of all of them.
func (t *Tracer) Ping(role string, seq int) {
	if t == nil {
		return
	}
	fs := make([]Field, 0, 2+numCounters)
	fs = append(fs, F("role", role), F("seq", seq))
	for i := range t.count {
		fs = append(fs, F(counterNames[i], t.count[i].Swap(0)))
	}
	t.Emit("ping", "done", fs, nil, nil)
}

// ResetCounts zeroes the per-ping counts (at the start of the ping loop, so the
// first ping's counts do not include connection setup).
func (t *Tracer) ResetCounts() {
	if t == nil {
		return
	}
	for i := range t.count {
		t.count[i].Store(0)
	}
}

// Emit writes one record: kind ("uverbs", "rdmacm", "cm_event", "qp", "mmap", "post",
// "poll", "wakeup", "ping", "diag"), name (command, event, ...), the request's and the
// response's fields, and the error if the step failed.
func (t *Tracer) Emit(kind, name string, req, resp []Field, err error) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	el := time.Since(t.start)
	b := t.buf[:0]
	if t.json {
		b = append(b, `{"type":"trace","t_us":`...)
		b = strconv.AppendFloat(b, float64(el.Nanoseconds())/1e3, 'f', 1, 64)
		b = append(b, `,"kind":`...)
		b = appendJSON(b, kind)
		b = append(b, `,"name":`...)
		b = appendJSON(b, name)
		if req != nil {
			b = append(b, `,"req":`...)
			b = appendJSONObject(b, req)
		}
		if resp != nil {
			b = append(b, `,"resp":`...)
			b = appendJSONObject(b, resp)
		}
		if err != nil {
			b = append(b, `,"error":`...)
			b = appendJSON(b, err.Error())
		}
		b = append(b, "}\n"...)
	} else {
		b = append(b, "trace "...)
		b = append(b, fmt.Sprintf("%10.6f ", el.Seconds())...)
		b = append(b, fmt.Sprintf("%-8s ", kind)...)
		b = append(b, name...)
		for _, f := range req {
			b = appendText(append(b, ' '), f)
		}
		if resp != nil || err != nil {
			b = append(b, " =>"...)
		}
		for _, f := range resp {
			b = appendText(append(b, ' '), f)
		}
		if err != nil {
			b = append(b, " error: "...)
			b = append(b, err.Error()...)
		}
		b = append(b, '\n')
	}
	t.w.Write(b)
	t.buf = b
}

func appendText(b []byte, f Field) []byte {
	b = append(b, f.Key...)
	b = append(b, '=')
	s := valueString(f.Val)
	if s == "" || strings.ContainsAny(s, " \t\"=") {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

func valueString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(v)
}

func appendJSON(b []byte, v any) []byte {
	if s, ok := v.(fmt.Stringer); ok {
		v = s.String()
	}
	j, err := json.Marshal(v)
	if err != nil {
		j, _ = json.Marshal(fmt.Sprint(v))
	}
	return append(b, j...)
}

func appendJSONObject(b []byte, fs []Field) []byte {
	b = append(b, '{')
	for i, f := range fs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSON(b, f.Key)
		b = append(b, ':')
		b = appendJSON(b, f.Val)
	}
	return append(b, '}')
}

// Formatter renders a struct field Struct cannot (e.g. a sockaddr); ok false leaves it
// to the default rules.
type Formatter func(name string, v reflect.Value) (val any, ok bool)

// Struct decodes an ABI struct (or a pointer to one) into fields, in declaration order,
// named by their `abi` tag or else in snake_case. It leaves out the `response` pointer,
// reserved and padding fields, and zero values, except handles, QP numbers and keys (0
// is a valid handle). Byte arrays print as hex, 16-byte ones as a GID; nested structs
// flatten with a "parent." prefix. f may take over any field first.
func Struct(v any, f Formatter) []Field {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return nil
	}
	fs := []Field{}
	return appendStruct(fs, "", rv, f)
}

func appendStruct(fs []Field, prefix string, rv reflect.Value, f Formatter) []Field {
	rt := rv.Type()
	for i := 0; i < rt.NumField(); i++ {
		sf := rt.Field(i)
		if !sf.IsExported() || skipped(sf.Name) {
			continue
		}
		name := sf.Tag.Get("abi")
		if name == "" {
			name = snake(sf.Name)
		}
		name = prefix + name
		fv := rv.Field(i)
		if f != nil {
			if val, ok := f(name, fv); ok {
				if val != nil {
					fs = append(fs, F(name, val))
				}
				continue
			}
		}
		if fv.IsZero() && !keepZero(sf.Name) {
			continue
		}
		switch fv.Kind() {
		case reflect.Struct:
			fs = appendStruct(fs, name+".", fv, f)
		case reflect.Array:
			if fv.Type().Elem().Kind() != reflect.Uint8 {
				fs = append(fs, F(name, fmt.Sprint(fv.Interface())))
				break
			}
			bs := make([]byte, fv.Len())
			reflect.Copy(reflect.ValueOf(bs), fv)
			if len(bs) == 16 {
				fs = append(fs, F(name, netip.AddrFrom16([16]byte(bs)).String()))
			} else {
				fs = append(fs, F(name, fmt.Sprintf("%x", bs)))
			}
		default:
			if isAddr(name) && fv.CanUint() {
				fs = append(fs, F(name, fmt.Sprintf("%#x", fv.Uint())))
			} else {
				fs = append(fs, F(name, fv.Interface()))
			}
		}
	}
	return fs
}

func skipped(name string) bool {
	return name == "Response" || strings.HasPrefix(name, "Reserved") || strings.HasPrefix(name, "Pad") ||
		name == "DriverData"
}

// isAddr: virtual addresses read better in hex.
func isAddr(name string) bool {
	return strings.HasSuffix(name, "start") || strings.HasSuffix(name, "hca_va") || strings.HasSuffix(name, "addr")
}

func keepZero(name string) bool {
	n := strings.ToLower(name)
	return strings.HasSuffix(n, "handle") || n == "qpn" || n == "id" || strings.HasSuffix(n, "key") ||
		strings.HasPrefix(n, "max")
}

// snake turns a Go field name into snake_case: PdHandle → pd_handle, MaxQPWR → max_qpwr.
func snake(s string) string {
	var b strings.Builder
	r := []rune(s)
	for i, c := range r {
		if unicode.IsUpper(c) {
			if i > 0 && (unicode.IsLower(r[i-1]) || (i+1 < len(r) && unicode.IsLower(r[i+1]) && unicode.IsUpper(r[i-1]))) {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(c))
		} else {
			b.WriteRune(c)
		}
	}
	return b.String()
}

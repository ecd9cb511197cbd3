package rdmacm

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/gorping/gorping/internal/trace"
	"github.com/gorping/gorping/uverbs"
)

// Option configures Open.
type Option func(*Channel)

// WithTracer traces every rdma_cm command and event of the channel (--trace), including
// the steps librdmacm hides (QP transitions, the RTU), which run on the reader goroutine.
func WithTracer(t *trace.Tracer) Option { return func(ch *Channel) { ch.tr = t } }

// WithHost opens h's rdma_cm node and makes ID.Device look for the verbs device on h
// (tests: a host they describe). Without it the channel is this machine's.
func WithHost(h uverbs.Host) Option { return func(ch *Channel) { ch.host = h } }

// cmdTrace says how to decode one command for the trace: its name and the ABI structs of
// its body and response (nil: none).
type cmdTrace struct {
	name       string
	body, resp reflect.Type
}

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

var cmdTraces = map[uint32]cmdTrace{
	cmdCreateID:     {"CREATE_ID", typeOf[createID](), typeOf[createIDResp]()},
	cmdDestroyID:    {"DESTROY_ID", typeOf[destroyID](), typeOf[destroyIDResp]()},
	cmdResolveRoute: {"RESOLVE_ROUTE", typeOf[resolveRoute](), nil},
	cmdConnect:      {"CONNECT", typeOf[connectCmd](), nil},
	cmdListen:       {"LISTEN", typeOf[listenCmd](), nil},
	cmdAccept:       {"ACCEPT", typeOf[acceptCmd](), nil},
	cmdReject:       {"REJECT", typeOf[rejectCmd](), nil},
	cmdDisconnect:   {"DISCONNECT", typeOf[disconnectCmd](), nil},
	cmdInitQPAttr:   {"INIT_QP_ATTR", typeOf[initQPAttr](), nil}, // the answer is ib_uverbs_qp_attr
	cmdQuery:        {"QUERY", typeOf[query](), nil},             // the answer depends on the option
	cmdBind:         {"BIND", typeOf[bindCmd](), nil},
	cmdResolveAddr:  {"RESOLVE_ADDR", typeOf[resolveAddr](), nil},
}

// tracedDevice decorates the channel's device: one record per command, decoded with the
// ABI structs. The tracer's lock and timestamps order the reader goroutine's records
// (hidden steps, events) among the application's.
type tracedDevice struct {
	cmdDevice
	tr *trace.Tracer
}

func (d tracedDevice) exec(cmd uint32, body []byte, respOff int, resp []byte) error {
	err := d.cmdDevice.exec(cmd, body, respOff, resp)
	d.tr.Count(trace.Syscall)
	ct, ok := cmdTraces[cmd]
	if !ok {
		d.tr.Emit("rdmacm", fmt.Sprintf("command %d", cmd), []trace.Field{trace.F("bytes", len(body))}, nil, err)
		return err
	}
	req := decodeAs(ct.body, body)
	var out []trace.Field
	if err == nil && resp != nil {
		switch {
		case cmd == cmdInitQPAttr:
			var a uverbs.QPAttr
			a.UnmarshalBinary(resp)
			out = a.TraceFields()
		case cmd == cmdQuery && len(body) >= int(unsafe.Sizeof(query{})) && binary.NativeEndian.Uint32(body[12:]) == queryAddr:
			out = decodeAs(typeOf[queryAddrResp](), resp)
		case ct.resp != nil:
			out = decodeAs(ct.resp, resp)
		default:
			out = []trace.Field{trace.F("bytes", len(resp))}
		}
	}
	d.tr.Emit("rdmacm", ct.name, req, out, err)
	return err
}

func (d tracedDevice) getEvent(resp []byte) error {
	err := d.cmdDevice.getEvent(resp)
	d.tr.Count(trace.Syscall)
	return err
}

// decodeAs decodes b as the ABI struct t (zero-extended) into trace fields.
func decodeAs(t reflect.Type, b []byte) []trace.Field {
	v := reflect.New(t)
	copy(unsafe.Slice((*byte)(v.UnsafePointer()), t.Size()), b)
	return trace.Struct(v.Interface(), formatField(v.Elem()))
}

// formatField renders what the generic rules cannot: socket addresses (with the size
// field next to them) and private data (its length only).
func formatField(s reflect.Value) trace.Formatter {
	return func(name string, v reflect.Value) (any, bool) {
		if v.Kind() != reflect.Array || v.Type().Elem().Kind() != reflect.Uint8 {
			return nil, false
		}
		switch v.Len() {
		case sockaddrSize:
			b := make([]byte, sockaddrSize)
			reflect.Copy(reflect.ValueOf(b), v)
			ap := parseSockaddr(b, sockaddrSize)
			if !ap.IsValid() {
				return nil, true
			}
			return ap.String(), true
		case maxPrivateData:
			return nil, true
		}
		return nil, false
	}
}

// traceEvent records an event as the reader fetched it, before dispatch.
func (ch *Channel) traceEvent(r rawEvent) {
	fs := []trace.Field{trace.F("uid", r.uid), trace.F("id", r.handle), trace.F("status", r.status)}
	p := r.param
	if r.typ == EventConnectRequest || r.typ == EventConnectResponse {
		fs = append(fs, trace.F("peer_qpn", p.QPNum), trace.F("responder_resources", p.ResponderResources),
			trace.F("initiator_depth", p.InitiatorDepth), trace.F("retry_count", p.RetryCount),
			trace.F("rnr_retry_count", p.RNRRetryCount), trace.F("private_data_len", len(p.PrivateData)))
	}
	ch.tr.Emit("cm_event", r.typ.String(), fs, nil, nil)
}

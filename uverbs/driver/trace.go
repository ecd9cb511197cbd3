package driver

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/gorping/gorping/internal/trace"
)

// How QP attributes read in a trace (--trace): uverbs' MODIFY_QP records, rdmacm's
// INIT_QP_ATTR answer.

// TraceFields are the attributes a.AttrMask selects (rdma_cm's INIT_QP_ATTR answer) as
// the fields of a trace record.
func (a *QPAttr) TraceFields() []trace.Field {
	fs := []trace.Field{trace.F("attr_mask", a.AttrMask.Names())}
	if a.AttrMask&QPAttrState != 0 {
		fs = append(fs, trace.F("state", a.State.String()))
	}
	return append(fs, a.MaskedTraceFields(a.AttrMask)...)
}

// MaskedTraceFields are the attributes of a that mask selects and that matter for a
// connection, as the fields of a trace record (uverbs traces MODIFY_QP with them).
func (a *QPAttr) MaskedTraceFields(mask QPAttrMask) []trace.Field {
	var fs []trace.Field
	add := func(bit QPAttrMask, k string, v any) {
		if mask&bit != 0 {
			fs = append(fs, trace.F(k, v))
		}
	}
	add(QPAttrPort, "port", a.PortNum)
	add(QPAttrPKeyIndex, "pkey_index", a.PKeyIndex)
	add(QPAttrAccessFlags, "access", a.AccessFlags.Names())
	add(QPAttrQKey, "qkey", a.QKey)
	if mask&QPAttrAV != 0 {
		ah := &a.AH
		fs = append(fs, trace.F("ah.port", ah.PortNum), trace.F("ah.dlid", ah.DLID), trace.F("ah.sl", ah.SL),
			trace.F("ah.is_global", ah.IsGlobal))
		if ah.IsGlobal != 0 {
			fs = append(fs, trace.F("ah.sgid_index", ah.GRH.SGIDIndex), trace.F("ah.dgid", gidString(ah.GRH.DGID)),
				trace.F("ah.hop_limit", ah.GRH.HopLimit), trace.F("ah.traffic_class", ah.GRH.TrafficClass),
				trace.F("ah.flow_label", ah.GRH.FlowLabel))
		}
	}
	add(QPAttrPathMTU, "path_mtu", a.PathMTU.Bytes())
	add(QPAttrDestQPN, "dest_qpn", a.DestQPNum)
	add(QPAttrRQPSN, "rq_psn", a.RQPSN)
	add(QPAttrMaxDestRdAtomic, "max_dest_rd_atomic", a.MaxDestRdAtomic)
	add(QPAttrMinRNRTimer, "min_rnr_timer", a.MinRNRTimer)
	add(QPAttrSQPSN, "sq_psn", a.SQPSN)
	add(QPAttrTimeout, "timeout", a.Timeout)
	add(QPAttrRetryCnt, "retry_cnt", a.RetryCnt)
	add(QPAttrRNRRetry, "rnr_retry", a.RNRRetry)
	add(QPAttrMaxQPRdAtomic, "max_rd_atomic", a.MaxRdAtomic)
	return fs
}

var maskBitNames = [...]string{"STATE", "CUR_STATE", "EN_SQD_ASYNC_NOTIFY", "ACCESS_FLAGS", "PKEY_INDEX", "PORT",
	"QKEY", "AV", "PATH_MTU", "TIMEOUT", "RETRY_CNT", "RNR_RETRY", "RQ_PSN", "MAX_QP_RD_ATOMIC", "ALT_PATH",
	"MIN_RNR_TIMER", "SQ_PSN", "MAX_DEST_RD_ATOMIC", "PATH_MIG_STATE", "CAP", "DEST_QPN"}

// Names lists the bits of m: "STATE|DEST_QPN", unknown bits in hex, "0" for none. (Not
// String: fmt would then print masks formatted with %x as names.)
func (m QPAttrMask) Names() string {
	var s []string
	for i, n := range maskBitNames {
		if m&(1<<i) != 0 {
			s = append(s, n)
		}
	}
	if rest := m &^ (1<<len(maskBitNames) - 1); rest != 0 {
		s = append(s, fmt.Sprintf("%#x", uint32(rest)))
	}
	if len(s) == 0 {
		return "0"
	}
	return strings.Join(s, "|")
}

var accessBitNames = [...]string{"LOCAL_WRITE", "REMOTE_WRITE", "REMOTE_READ", "REMOTE_ATOMIC", "MW_BIND", "ZERO_BASED", "ON_DEMAND"}

// Names lists the rights in a: "LOCAL_WRITE|REMOTE_READ", unknown bits in hex, "none" for
// none.
func (a AccessFlags) Names() string {
	var s []string
	for i, n := range accessBitNames {
		if a&(1<<i) != 0 {
			s = append(s, n)
		}
	}
	if rest := a &^ (1<<len(accessBitNames) - 1); rest != 0 {
		s = append(s, fmt.Sprintf("%#x", uint32(rest)))
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, "|")
}

func gidString(g [16]byte) string { return netip.AddrFrom16(g).String() }

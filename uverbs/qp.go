package uverbs

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gorping/gorping/internal/wire"
)

// QP is a queue pair.
type QP struct {
	ctx    *Context
	pd     *PD
	handle uint32
	qpn    uint32
	cookie uint64
	typ    QPType
	cap    QPCap
	prov   ProviderQP

	mu         sync.Mutex // Modify, Destroy
	state      QPState    // last state MODIFY_QP set (for --trace)
	dead       bool
	provClosed bool
}

// CreateQP creates a queue pair in RESET (CREATE_QP).
func (pd *PD) CreateQP(attr QPInitAttr) (*QP, error) {
	c := pd.ctx
	if attr.SendCQ == nil || attr.RecvCQ == nil {
		return nil, errors.New("uverbs: CreateQP: SendCQ and RecvCQ are required")
	}
	if attr.SendCQ.ctx != c || attr.RecvCQ.ctx != c {
		return nil, errors.New("uverbs: CreateQP: CQ of another context")
	}
	if attr.Type == 0 {
		attr.Type = QPTypeRC
	}
	if c.isClosed() {
		return nil, ErrClosed
	}
	qreq := QPRequest{Type: attr.Type, Cap: attr.Cap, SigAll: attr.SigAll, SendCQ: attr.SendCQ.prov, RecvCQ: attr.RecvCQ.prov}
	pending, err := c.prov.PrepareQP(&qreq)
	if err != nil {
		return nil, fmt.Errorf("uverbs: %s: %s provider: %w", c.dev.Name, c.info.Driver, err)
	}
	in, outLen := pending.Udata()
	qp := &QP{ctx: c, pd: pd, cookie: c.cookie(), typ: attr.Type}
	req := createQPReq{
		UserHandle:    qp.cookie,
		PdHandle:      pd.handle,
		SendCqHandle:  attr.SendCQ.handle,
		RecvCqHandle:  attr.RecvCQ.handle,
		MaxSendWr:     qreq.Cap.MaxSendWR,
		MaxRecvWr:     qreq.Cap.MaxRecvWR,
		MaxSendSge:    qreq.Cap.MaxSendSGE,
		MaxRecvSge:    qreq.Cap.MaxRecvSGE,
		MaxInlineData: qreq.Cap.MaxInlineData,
		QpType:        uint8(attr.Type),
	}
	if attr.SigAll {
		req.SqSigAll = 1
	}
	var resp createQPResp
	drv, err := call(c.cmd, cmdCreateQP, &req, &resp, in, outLen)
	if err != nil {
		pending.Abort()
		return nil, fmt.Errorf("uverbs: %s: %w", c.dev.Name, err)
	}
	qp.handle, qp.qpn = resp.QpHandle, resp.Qpn
	core := QPCore{
		Handle: qp.handle, QPN: qp.qpn, Type: attr.Type, SigAll: attr.SigAll,
		Cap: QPCap{
			MaxSendWR:     resp.MaxSendWr,
			MaxRecvWR:     resp.MaxRecvWr,
			MaxSendSGE:    resp.MaxSendSge,
			MaxRecvSGE:    resp.MaxRecvSge,
			MaxInlineData: resp.MaxInlineData,
		},
		SendCQ: attr.SendCQ.prov, RecvCQ: attr.RecvCQ.prov,
	}
	qp.prov, err = pending.Commit(c.cmd, &core, drv)
	if err != nil {
		c.destroyQPCmd(qp.handle) // best effort: unusable without its provider
		return nil, fmt.Errorf("uverbs: %s: %s provider: %w", c.dev.Name, c.info.Driver, err)
	}
	qp.cap = core.Cap
	if err := track(c, func() map[uint64]*QP { return c.qps }, qp.cookie, qp, qp.prov.Close); err != nil {
		return nil, err
	}
	return qp, nil
}

func (c *Context) destroyQPCmd(handle uint32) (destroyQPResp, error) {
	req := destroyQPReq{QpHandle: handle}
	var resp destroyQPResp
	_, err := call(c.cmd, cmdDestroyQP, &req, &resp, nil, 0)
	return resp, err
}

// Num returns the QP number.
func (qp *QP) Num() uint32 { return qp.qpn }

// Cap returns the capabilities the driver granted (may exceed those requested).
func (qp *QP) Cap() QPCap { return qp.cap }

// Describe returns the provider's one-line view of the QP ("" if it has none).
func (qp *QP) Describe() string {
	if d, ok := qp.prov.(Describer); ok {
		return d.Describe()
	}
	return ""
}

// Type returns the QP's transport type.
func (qp *QP) Type() QPType { return qp.typ }

// PostSend posts one send work request. It does not allocate.
func (qp *QP) PostSend(wr *SendWR) error {
	if qp.ctx.cmd.tr != nil {
		qp.tracePostSend(wr) // before the provider's doorbell, which it traces itself
		return qp.ctx.cmd.traceErr("post", "send WR failed", qp.prov.PostSend(wr))
	}
	return qp.prov.PostSend(wr)
}

// PostRecv posts one receive work request. It does not allocate.
func (qp *QP) PostRecv(wr *RecvWR) error {
	if qp.ctx.cmd.tr != nil {
		qp.tracePostRecv(wr)
		return qp.ctx.cmd.traceErr("post", "recv WR failed", qp.prov.PostRecv(wr))
	}
	return qp.prov.PostRecv(wr)
}

func destFromAH(ah *AHAttr) qpDest {
	return qpDest{
		Dgid:         ah.GRH.DGID,
		FlowLabel:    ah.GRH.FlowLabel,
		Dlid:         ah.DLID,
		SgidIndex:    ah.GRH.SGIDIndex,
		HopLimit:     ah.GRH.HopLimit,
		TrafficClass: ah.GRH.TrafficClass,
		Sl:           ah.SL,
		SrcPathBits:  ah.SrcPathBits,
		StaticRate:   ah.StaticRate,
		IsGlobal:     ah.IsGlobal,
		PortNum:      ah.PortNum,
	}
}

func ahFromDest(d *qpDest) AHAttr {
	return AHAttr{
		GRH: GlobalRoute{
			DGID: d.Dgid, FlowLabel: d.FlowLabel, SGIDIndex: d.SgidIndex,
			HopLimit: d.HopLimit, TrafficClass: d.TrafficClass,
		},
		DLID: d.Dlid, SL: d.Sl, SrcPathBits: d.SrcPathBits, StaticRate: d.StaticRate,
		IsGlobal: d.IsGlobal, PortNum: d.PortNum,
	}
}

// modifyReq converts attr to the MODIFY_QP body. Like libibverbs it copies every field and
// lets mask tell the kernel which ones count.
func modifyReq(handle uint32, attr *QPAttr, mask QPAttrMask) modifyQPReq {
	return modifyQPReq{
		Dest:             destFromAH(&attr.AH),
		AltDest:          destFromAH(&attr.AltAH),
		QpHandle:         handle,
		AttrMask:         uint32(mask),
		Qkey:             attr.QKey,
		RqPsn:            attr.RQPSN,
		SqPsn:            attr.SQPSN,
		DestQpNum:        attr.DestQPNum,
		QpAccessFlags:    uint32(attr.AccessFlags),
		PkeyIndex:        attr.PKeyIndex,
		AltPkeyIndex:     attr.AltPKeyIndex,
		QpState:          uint8(attr.State),
		CurQpState:       uint8(attr.CurState),
		PathMtu:          uint8(attr.PathMTU),
		PathMigState:     uint8(attr.PathMigState),
		EnSqdAsyncNotify: attr.EnSQDAsyncNotify,
		MaxRdAtomic:      attr.MaxRdAtomic,
		MaxDestRdAtomic:  attr.MaxDestRdAtomic,
		MinRnrTimer:      attr.MinRNRTimer,
		PortNum:          attr.PortNum,
		Timeout:          attr.Timeout,
		RetryCnt:         attr.RetryCnt,
		RnrRetry:         attr.RNRRetry,
		AltPortNum:       attr.AltPortNum,
		AltTimeout:       attr.AltTimeout,
	}
}

// Modify changes QP attributes (MODIFY_QP); mask selects the fields of attr that apply.
func (qp *QP) Modify(attr *QPAttr, mask QPAttrMask) error {
	if mask&^qpAttrWriteMaskSupported != 0 {
		return fmt.Errorf("uverbs MODIFY_QP: attribute mask %#x has bits beyond DEST_QPN, which the write interface rejects", uint32(mask))
	}
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.dead {
		return ErrClosed
	}
	c := qp.ctx
	req := modifyReq(qp.handle, attr, mask)
	_, err := call(c.cmd, cmdModifyQP, &req, &noResp{}, nil, 0)
	if c.cmd.tr != nil {
		qp.traceModify(qp.state, attr, mask, err)
	}
	if err != nil {
		return fmt.Errorf("uverbs: %s QP %d to %v (mask %#x): %w", c.dev.Name, qp.qpn, attr.State, uint32(mask), err)
	}
	if mask&QPAttrState != 0 {
		qp.state = attr.State
		if o, ok := qp.prov.(QPStateObserver); ok {
			if err := o.SetState(attr.State); err != nil {
				return fmt.Errorf("uverbs: %s QP %d now %v: %s provider: %w", c.dev.Name, qp.qpn, attr.State, c.info.Driver, err)
			}
		}
	}
	return nil
}

// Query returns the QP's attributes (QUERY_QP); mask selects what the kernel fills in.
func (qp *QP) Query(mask QPAttrMask) (*QPAttr, error) {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.dead {
		return nil, ErrClosed
	}
	c := qp.ctx
	req := queryQPReq{QpHandle: qp.handle, AttrMask: uint32(mask)}
	var r queryQPResp
	if _, err := call(c.cmd, cmdQueryQP, &req, &r, nil, 0); err != nil {
		return nil, fmt.Errorf("uverbs: %s QP %d: %w", c.dev.Name, qp.qpn, err)
	}
	return qpAttrFromQuery(&r), nil
}

func qpAttrFromQuery(r *queryQPResp) *QPAttr {
	return &QPAttr{
		State:           QPState(r.QpState),
		CurState:        QPState(r.CurQpState),
		PathMTU:         MTU(r.PathMtu),
		PathMigState:    uint32(r.PathMigState),
		QKey:            r.Qkey,
		RQPSN:           r.RqPsn,
		SQPSN:           r.SqPsn,
		DestQPNum:       r.DestQpNum,
		AccessFlags:     AccessFlags(r.QpAccessFlags),
		AH:              ahFromDest(&r.Dest),
		AltAH:           ahFromDest(&r.AltDest),
		MaxSendWR:       r.MaxSendWr,
		MaxRecvWR:       r.MaxRecvWr,
		MaxSendSGE:      r.MaxSendSge,
		MaxRecvSGE:      r.MaxRecvSge,
		MaxInlineData:   r.MaxInlineData,
		PKeyIndex:       r.PkeyIndex,
		AltPKeyIndex:    r.AltPkeyIndex,
		SQDraining:      r.SqDraining,
		MaxRdAtomic:     r.MaxRdAtomic,
		MaxDestRdAtomic: r.MaxDestRdAtomic,
		MinRNRTimer:     r.MinRnrTimer,
		PortNum:         r.PortNum,
		Timeout:         r.Timeout,
		RetryCnt:        r.RetryCnt,
		RNRRetry:        r.RnrRetry,
		AltPortNum:      r.AltPortNum,
		AltTimeout:      r.AltTimeout,
	}
}

// Destroy destroys the QP (DESTROY_QP). Async events are acknowledged when read, so there is
// nothing to wait for.
func (qp *QP) Destroy() error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	c := qp.ctx
	if qp.dead || c.isClosed() {
		return nil
	}
	if _, err := c.destroyQPCmd(qp.handle); err != nil {
		return fmt.Errorf("uverbs: %s QP %d: %w", c.dev.Name, qp.qpn, err)
	}
	qp.dead = true
	c.mu.Lock()
	delete(c.qps, qp.cookie)
	c.mu.Unlock()
	return qp.closeProvLocked()
}

func (qp *QP) closeProvLocked() error {
	if qp.provClosed {
		return nil
	}
	qp.provClosed = true
	return qp.prov.Close()
}

// release frees the provider side after the context closed.
func (qp *QP) release() error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	qp.dead = true
	return qp.closeProvLocked()
}

// QPAttrWireSize is the size of struct ib_uverbs_qp_attr, rdma_cm's INIT_QP_ATTR answer.
const QPAttrWireSize = sizeofQPAttr

// DecodeQPAttr decodes struct ib_uverbs_qp_attr (rdma_cm's INIT_QP_ATTR answer). A short b
// reads as zero-extended, as the kernel extends shorter structs.
func DecodeQPAttr(b []byte) QPAttr {
	var w qpAttr
	wire.Decode(&w, b)
	return QPAttr{
		AttrMask:         QPAttrMask(w.AttrMask),
		State:            QPState(w.State),
		CurState:         QPState(w.CurState),
		PathMTU:          MTU(w.PathMTU),
		PathMigState:     w.PathMigState,
		QKey:             w.QKey,
		RQPSN:            w.RQPSN,
		SQPSN:            w.SQPSN,
		DestQPNum:        w.DestQPNum,
		AccessFlags:      AccessFlags(w.AccessFlags),
		AH:               ahFromWire(&w.AH),
		AltAH:            ahFromWire(&w.AltAH),
		MaxSendWR:        w.MaxSendWR,
		MaxRecvWR:        w.MaxRecvWR,
		MaxSendSGE:       w.MaxSendSGE,
		MaxRecvSGE:       w.MaxRecvSGE,
		MaxInlineData:    w.MaxInlineData,
		PKeyIndex:        w.PKeyIndex,
		AltPKeyIndex:     w.AltPKeyIndex,
		EnSQDAsyncNotify: w.EnSQDAsyncNotify,
		SQDraining:       w.SQDraining,
		MaxRdAtomic:      w.MaxRdAtomic,
		MaxDestRdAtomic:  w.MaxDestRdAtomic,
		MinRNRTimer:      w.MinRNRTimer,
		PortNum:          w.PortNum,
		Timeout:          w.Timeout,
		RetryCnt:         w.RetryCnt,
		RNRRetry:         w.RNRRetry,
		AltPortNum:       w.AltPortNum,
		AltTimeout:       w.AltTimeout,
	}
}

// EncodeQPAttr is the inverse of DecodeQPAttr: a as struct ib_uverbs_qp_attr (what a fake
// rdma_cm answers INIT_QP_ATTR with).
func EncodeQPAttr(a *QPAttr) []byte {
	w := qpAttr{
		AttrMask:         uint32(a.AttrMask),
		State:            uint32(a.State),
		CurState:         uint32(a.CurState),
		PathMTU:          uint32(a.PathMTU),
		PathMigState:     a.PathMigState,
		QKey:             a.QKey,
		RQPSN:            a.RQPSN,
		SQPSN:            a.SQPSN,
		DestQPNum:        a.DestQPNum,
		AccessFlags:      uint32(a.AccessFlags),
		AH:               ahToWire(&a.AH),
		AltAH:            ahToWire(&a.AltAH),
		MaxSendWR:        a.MaxSendWR,
		MaxRecvWR:        a.MaxRecvWR,
		MaxSendSGE:       a.MaxSendSGE,
		MaxRecvSGE:       a.MaxRecvSGE,
		MaxInlineData:    a.MaxInlineData,
		PKeyIndex:        a.PKeyIndex,
		AltPKeyIndex:     a.AltPKeyIndex,
		EnSQDAsyncNotify: a.EnSQDAsyncNotify,
		SQDraining:       a.SQDraining,
		MaxRdAtomic:      a.MaxRdAtomic,
		MaxDestRdAtomic:  a.MaxDestRdAtomic,
		MinRNRTimer:      a.MinRNRTimer,
		PortNum:          a.PortNum,
		Timeout:          a.Timeout,
		RetryCnt:         a.RetryCnt,
		RNRRetry:         a.RNRRetry,
		AltPortNum:       a.AltPortNum,
		AltTimeout:       a.AltTimeout,
	}
	return append([]byte(nil), wire.Bytes(&w)...)
}

func ahFromWire(w *ahAttr) AHAttr {
	return AHAttr{
		GRH: GlobalRoute{
			DGID: w.GRH.DGID, FlowLabel: w.GRH.FlowLabel, SGIDIndex: w.GRH.SGIDIndex,
			HopLimit: w.GRH.HopLimit, TrafficClass: w.GRH.TrafficClass,
		},
		DLID: w.DLID, SL: w.SL, SrcPathBits: w.SrcPathBits, StaticRate: w.StaticRate,
		IsGlobal: w.IsGlobal, PortNum: w.PortNum,
	}
}

func ahToWire(a *AHAttr) ahAttr {
	return ahAttr{
		GRH: globalRoute{
			DGID: a.GRH.DGID, FlowLabel: a.GRH.FlowLabel, SGIDIndex: a.GRH.SGIDIndex,
			HopLimit: a.GRH.HopLimit, TrafficClass: a.GRH.TrafficClass,
		},
		DLID: a.DLID, SL: a.SL, SrcPathBits: a.SrcPathBits, StaticRate: a.StaticRate,
		IsGlobal: a.IsGlobal, PortNum: a.PortNum,
	}
}

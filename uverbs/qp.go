package uverbs

import (
	"errors"
	"fmt"
	"github.com/gorping/gorping/uverbs/driver"
	"sync"
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
	prov   driver.QP

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
	qreq := driver.QPRequest{Type: attr.Type, Cap: attr.Cap, SigAll: attr.SigAll, SendCQ: attr.SendCQ.prov, RecvCQ: attr.RecvCQ.prov, PD: pd.handle}
	pending, err := c.prov.PrepareQP(&qreq)
	if err != nil {
		return nil, fmt.Errorf("uverbs: %s: %s provider: %w", c.dev.Name, c.info.Driver, err)
	}
	in, outLen := pending.Udata()
	qp := &QP{ctx: c, pd: pd, cookie: c.cookie(), typ: attr.Type}
	req := createQPReq{
		UserHandle:    qp.cookie,
		PDHandle:      pd.handle,
		SendCQHandle:  attr.SendCQ.handle,
		RecvCQHandle:  attr.RecvCQ.handle,
		MaxSendWR:     qreq.Cap.MaxSendWR,
		MaxRecvWR:     qreq.Cap.MaxRecvWR,
		MaxSendSGE:    qreq.Cap.MaxSendSGE,
		MaxRecvSGE:    qreq.Cap.MaxRecvSGE,
		MaxInlineData: qreq.Cap.MaxInlineData,
		QPType:        uint8(attr.Type),
	}
	if attr.SigAll {
		req.SQSigAll = 1
	}
	var resp createQPResp
	drv, err := call(c.cmd, cmdCreateQP, &req, &resp, in, outLen)
	if err != nil {
		pending.Abort()
		return nil, fmt.Errorf("uverbs: %s: %w", c.dev.Name, err)
	}
	qp.handle, qp.qpn = resp.QPHandle, resp.QPN
	core := driver.QPCore{
		Handle: qp.handle, QPN: qp.qpn, Type: attr.Type, SigAll: attr.SigAll,
		Cap: QPCap{
			MaxSendWR:     resp.MaxSendWR,
			MaxRecvWR:     resp.MaxRecvWR,
			MaxSendSGE:    resp.MaxSendSGE,
			MaxRecvSGE:    resp.MaxRecvSGE,
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
	req := destroyQPReq{QPHandle: handle}
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
	if d, ok := qp.prov.(driver.Describer); ok {
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

// destFromAH and ahFromDest convert between the public address vector and MODIFY_QP's
// and QUERY_QP's flat form of it (the generated conversions use them).
func destFromAH(ah AHAttr) qpDest {
	return qpDest{
		DGID:         ah.GRH.DGID,
		FlowLabel:    ah.GRH.FlowLabel,
		DLID:         ah.DLID,
		SGIDIndex:    ah.GRH.SGIDIndex,
		HopLimit:     ah.GRH.HopLimit,
		TrafficClass: ah.GRH.TrafficClass,
		SL:           ah.SL,
		SrcPathBits:  ah.SrcPathBits,
		StaticRate:   ah.StaticRate,
		IsGlobal:     ah.IsGlobal,
		PortNum:      ah.PortNum,
	}
}

func ahFromDest(d qpDest) AHAttr {
	return AHAttr{
		GRH: GlobalRoute{
			DGID: d.DGID, FlowLabel: d.FlowLabel, SGIDIndex: d.SGIDIndex,
			HopLimit: d.HopLimit, TrafficClass: d.TrafficClass,
		},
		DLID: d.DLID, SL: d.SL, SrcPathBits: d.SrcPathBits, StaticRate: d.StaticRate,
		IsGlobal: d.IsGlobal, PortNum: d.PortNum,
	}
}

// modifyReq converts attr to the MODIFY_QP body. Like libibverbs it copies every field and
// lets mask tell the kernel which ones count.
func modifyReq(handle uint32, attr *QPAttr, mask QPAttrMask) modifyQPReq {
	r := modifyFromAttr(attr)
	r.QPHandle, r.AttrMask = handle, uint32(mask)
	return r
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
		if o, ok := qp.prov.(driver.QPStateObserver); ok {
			if err := o.SetState(attr.State); err != nil {
				return fmt.Errorf("uverbs: %s QP %d now %v: %s provider: %w", c.dev.Name, qp.qpn, attr.State, c.info.Driver, err)
			}
		}
	}
	if o, ok := qp.prov.(driver.QPAttrObserver); ok {
		if err := o.Modified(attr, mask); err != nil {
			return fmt.Errorf("uverbs: %s QP %d modified (mask %#x): %s provider: %w", c.dev.Name, qp.qpn, uint32(mask), c.info.Driver, err)
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
	req := queryQPReq{QPHandle: qp.handle, AttrMask: uint32(mask)}
	var r queryQPResp
	if _, err := call(c.cmd, cmdQueryQP, &req, &r, nil, 0); err != nil {
		return nil, fmt.Errorf("uverbs: %s QP %d: %w", c.dev.Name, qp.qpn, err)
	}
	a := qpAttrFromQuery(&r)
	return &a, nil
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

package mlx5model

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/gorping/gorping/test/providertest"
	"github.com/gorping/gorping/uverbs"
)

// WQE and CQE codes of the device (mlx5 WQE opcodes, CQE opcodes and syndromes).
const (
	opRDMAWrite    = 0x08
	opRDMAWriteImm = 0x09
	opSend         = 0x0a
	opSendImm      = 0x0b
	opRDMARead     = 0x10

	cqeReq         = 0
	cqeRespWRImm   = 1
	cqeRespSend    = 2
	cqeRespSendImm = 3
	cqeReqErr      = 13
	cqeRespErr     = 14

	invalidLKey = 0x100
)

var wrOpcodes = map[byte]uverbs.WROpcode{opRDMAWrite: uverbs.WRRDMAWrite, opRDMAWriteImm: uverbs.WRRDMAWriteWithImm,
	opSend: uverbs.WRSend, opSendImm: uverbs.WRSendWithImm, opRDMARead: uverbs.WRRDMARead}

var wqeOpcodes = map[uverbs.WROpcode]byte{uverbs.WRRDMAWrite: opRDMAWrite, uverbs.WRRDMAWriteWithImm: opRDMAWriteImm,
	uverbs.WRSend: opSend, uverbs.WRSendWithImm: opSendImm, uverbs.WRRDMARead: opRDMARead}

// syndromes are the error CQE syndromes of the completion statuses.
var syndromes = map[uverbs.WCStatus]byte{uverbs.WCLocLenErr: 0x01, uverbs.WCLocQPOpErr: 0x02, uverbs.WCLocProtErr: 0x04,
	uverbs.WCWRFlushErr: 0x05, uverbs.WCMWBindErr: 0x06, uverbs.WCBadRespErr: 0x10, uverbs.WCLocAccessErr: 0x11,
	uverbs.WCRemInvReqErr: 0x12, uverbs.WCRemAccessErr: 0x13, uverbs.WCRemOpErr: 0x14, uverbs.WCRetryExcErr: 0x15,
	uverbs.WCRNRRetryExcErr: 0x16, uverbs.WCRemAbortErr: 0x22}

// rqPI is the producer counter the provider published for q's RQ: receives need no
// doorbell, the device reads the record when a message arrives.
func (q *mqp) rqPI() uint32 { return dbrec(&q.db[0]) }

// block is the offset of send WQE block i (masked) of q.
func (q *mqp) block(i uint32) int { return q.sqOff + int(i&(q.sqCnt-1))*64 }

// sqAt maps an offset from a WQE start to the SQ buffer, wrapping at the SQ end.
func (q *mqp) sqAt(start, off int) int {
	sqLen := int(q.sqCnt) * 64
	return q.sqOff + (start-q.sqOff+off)%sqLen
}

// NextSend takes the next rung send WQE of the QP. In RTS it checks the control segment
// as a device would (a bad one moves the QP to ERR); in ERR it only steps over the rung
// blocks, for their flush completions.
func (d *driver) NextSend(p *providertest.QP) (providertest.SendWR, bool) {
	q := p.Driver.(*mqp)
	if q.sqCI&0xffff == q.rung {
		return providertest.SendWR{}, false // nothing rung beyond what ran
	}
	start := q.block(q.sqCI)
	ctrl := q.buf[start : start+16]
	w0, w1 := be32(ctrl[0:]), be32(ctrl[4:])
	opcode, idx := byte(w0), uint16(w0>>8)
	ds, qpn := int(w1&0x3f), w1>>8
	blocks := uint32((ds*16 + 63) / 64)
	wqeIdx := uint16(q.sqCI)
	if p.State == uverbs.QPSErr {
		// A WQE that does not end by the rung index is garbage: flush up to there only.
		q.sqCI += min(max(blocks, 1), (q.rung-q.sqCI)&0xffff)
		return providertest.SendWR{SendWR: uverbs.SendWR{Opcode: wrOpcodes[opcode]}, Slot: uint32(wqeIdx)}, true
	}
	if idx != wqeIdx || qpn != q.qpn || ds < 1 || blocks > (q.rung-q.sqCI)&0xffff {
		d.k.Fail("QP %#x: WQE at block %d has index %d, qpn %#x, ds %d", q.qpn, q.sqCI, idx, qpn, ds)
		p.State = uverbs.QPSErr
		return providertest.SendWR{}, false
	}
	op, ok := wrOpcodes[opcode]
	if !ok {
		d.k.Fail("QP %#x: unsupported WQE opcode %#x", q.qpn, opcode)
		op = 0xff
	}
	wr := providertest.SendWR{SendWR: uverbs.SendWR{Opcode: op, Imm: be32(ctrl[12:])}, Slot: uint32(wqeIdx),
		Signaled: ctrl[11]&0x08 != 0 || p.SigAll}
	off := 16
	if opcode == opRDMAWrite || opcode == opRDMAWriteImm || opcode == opRDMARead {
		s := q.sqAt(start, off)
		wr.RemoteAddr, wr.RKey = binary.BigEndian.Uint64(q.buf[s:]), be32(q.buf[s+8:])
		off += 16
	}
	// Gather list or inline data.
	for off < ds*16 {
		s := q.sqAt(start, off)
		w := be32(q.buf[s:])
		if w&0x80000000 != 0 {
			l := int(w &^ 0x80000000)
			wr.Inline = make([]byte, l)
			for i := range wr.Inline {
				wr.Inline[i] = q.buf[q.sqAt(start, off+4+i)]
			}
			off += alignUp(4+l, 16)
			continue
		}
		wr.SGE = append(wr.SGE, uverbs.SGE{Addr: binary.BigEndian.Uint64(q.buf[s+8:]), Length: w, LKey: be32(q.buf[s+4:])})
		off += 16
	}
	if (q.sqCI&(q.sqCnt-1))+blocks >= q.sqCnt {
		d.k.Count().SQLaps++
	}
	q.sqCI += blocks
	return wr, true
}

// NextRecv takes the next posted receive WQE: data segments up to the one with the
// invalid lkey.
func (d *driver) NextRecv(p *providertest.QP) (providertest.RecvWR, bool) {
	q := p.Driver.(*mqp)
	if q.rqCI&0xffff == q.rqPI() || q.rqCnt == 0 {
		return providertest.RecvWR{}, false
	}
	slot := int(q.rqCI&(q.rqCnt-1)) << q.rqShift
	var wr providertest.RecvWR
	for i := 0; i < 1<<q.rqShift/16; i++ {
		s := q.buf[slot+i*16:]
		if be32(s[4:]) == invalidLKey {
			break
		}
		wr.SGE = append(wr.SGE, uverbs.SGE{Addr: binary.BigEndian.Uint64(s[8:]), Length: be32(s[0:]), LKey: be32(s[4:])})
	}
	if q.rqCI&(q.rqCnt-1) == q.rqCnt-1 {
		d.k.Count().RQLaps++
	}
	wr.Slot = q.rqCI
	q.rqCI++
	return wr, true
}

// Complete writes one 64-byte CQE: body first, then the last word with opcode and owner
// bit. The provider finds the QP by the user index (CQE version 1) and the send WR by
// the WQE counter.
func (d *driver) Complete(c *providertest.CQ, e providertest.Completion) bool {
	m := c.Driver.(*mcq)
	q := e.QP.Driver.(*mqp)
	ci := dbrec(&m.db[0]) & 0xffffff
	if (m.pi-ci)&0xffffff >= m.ncqe {
		return false // overrun: the kernel reports it
	}
	slot := m.pi & (m.ncqe - 1)
	cqe := m.buf[slot*64 : slot*64+64]
	clear(cqe[:60])
	binary.BigEndian.PutUint32(cqe[32:], q.uidx)
	var opcode byte
	switch {
	case !e.Recv && e.Status == uverbs.WCSuccess:
		opcode = cqeReq
		binary.BigEndian.PutUint32(cqe[44:], e.ByteLen)
		binary.BigEndian.PutUint32(cqe[56:], uint32(wqeOpcodes[e.WROpcode])<<24|q.qpn)
		binary.BigEndian.PutUint16(cqe[60:], uint16(e.Slot))
	case !e.Recv:
		opcode = cqeReqErr
		if e.Status != uverbs.WCWRFlushErr {
			cqe[54] = 0x42 // vendor syndrome
		}
		cqe[55] = syndrome(e.Status)
		binary.BigEndian.PutUint32(cqe[56:], uint32(wqeOpcodes[e.WROpcode])<<24|q.qpn)
		binary.BigEndian.PutUint16(cqe[60:], uint16(e.Slot))
	case e.Status != uverbs.WCSuccess:
		opcode = cqeRespErr
		cqe[55] = syndrome(e.Status)
	default:
		opcode = cqeRespSend
		switch {
		case e.Opcode == uverbs.WCRecvRDMAWithImm:
			opcode = cqeRespWRImm
		case e.Flags&uverbs.WCFlagWithImm != 0:
			opcode = cqeRespSendImm
		}
		binary.BigEndian.PutUint32(cqe[24:], e.SrcQP)
		binary.BigEndian.PutUint32(cqe[36:], e.Imm)
		binary.BigEndian.PutUint32(cqe[44:], e.ByteLen)
		binary.BigEndian.PutUint32(cqe[56:], q.qpn)
	}
	// An error CQE has its syndromes where a good one has the timestamp (mlx5_err_cqe):
	// the device stamps only completions that succeeded.
	if m.ts && opcode != cqeReqErr && opcode != cqeRespErr {
		d.clock.stamp(cqe)
		if d.cfg.KeepStamps {
			m.stamps = append(m.stamps, Stamp{Opcode: opcode, TS: binary.BigEndian.Uint64(cqe[48:])})
		}
	}
	var last [4]byte
	copy(last[:3], cqe[60:63])
	owner := byte(0)
	if m.pi&m.ncqe != 0 {
		owner = 1
	}
	last[3] = opcode<<4 | owner
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&cqe[60])), binary.LittleEndian.Uint32(last[:]))
	if slot == m.ncqe-1 {
		d.k.Count().CQLaps++
	}
	m.pi++
	return true
}

func syndrome(s uverbs.WCStatus) byte {
	if v, ok := syndromes[s]; ok {
		return v
	}
	return 0xff
}

// Armed: the arm doorbell arms the CQ (Kernel.ArmCQ).
func (d *driver) Armed(*providertest.CQ) bool { return false }

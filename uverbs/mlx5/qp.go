package mlx5

import (
	"github.com/gorping/gorping/internal/umem"
	"github.com/gorping/gorping/uverbs/driver"
)

// qp is the data path of one RC/UC queue pair: its queues in the QP buffer, its doorbell
// record and the bfreg the kernel assigned to it.
type qp struct {
	qpn  uint32
	uidx uint32
	sq   *sendQueue // nil without a send queue
	rq   *recvQueue // nil without a receive queue

	c   *context
	mem *umem.Mem // the QP buffer
	db  dbrec
	bf  *bfreg
	g   qpGeometry

	sendCQ, recvCQ *cq // cleaned of the QP's CQEs when it is destroyed
}

func (q *qp) PostSend(wr *driver.SendWR) error {
	if q.sq == nil {
		return errNoSQ
	}
	return q.sq.post(wr)
}

func (q *qp) PostRecv(wr *driver.RecvWR) error {
	if q.rq == nil {
		return errNoRQ
	}
	return q.rq.post(wr)
}

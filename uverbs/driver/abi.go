package driver

import "github.com/gorping/gorping/internal/wire"

// The two uverbs write() commands a provider may send on its data path; its Info's
// RawCommands may list them (abi_layout_test.go checks the numbers against the header).
const (
	CmdPostSend    uint32 = 28 // IB_USER_VERBS_CMD_POST_SEND
	CmdReqNotifyCQ uint32 = 23 // IB_USER_VERBS_CMD_REQ_NOTIFY_CQ
)

// A Doorbell is a POST_SEND without work requests: how a provider whose kernel driver
// reads the send queue itself (rxe, siw) tells it new WQEs are there. Keep one per QP:
// Ring does not allocate.
type Doorbell struct {
	req  postSendReq
	resp postSendResp
}

// NewDoorbell is the doorbell of the kernel QP qpHandle; wqeSize is what the driver wants
// in wqe_size (at least sizeof(struct ib_uverbs_send_wr), 56).
func NewDoorbell(qpHandle, wqeSize uint32) Doorbell {
	return Doorbell{req: postSendReq{QPHandle: qpHandle, WQESize: wqeSize}}
}

// Ring sends the doorbell through cmd.
func (d *Doorbell) Ring(cmd Commander) error {
	return cmd.Write(CmdPostSend, wire.Bytes(&d.req), wire.Bytes(&d.resp))
}

// A CQArm asks the kernel for one completion event of a CQ (REQ_NOTIFY_CQ), for a provider
// whose kernel driver arms its CQs (rxe and siw do). Keep one per CQ: Arm does not allocate.
type CQArm struct {
	req [2]reqNotifyCQ // [0] any completion, [1] solicited only
}

// NewCQArm is the arm of the kernel CQ cqHandle.
func NewCQArm(cqHandle uint32) CQArm {
	return CQArm{req: [2]reqNotifyCQ{{CQHandle: cqHandle}, {CQHandle: cqHandle, SolicitedOnly: 1}}}
}

// Arm sends REQ_NOTIFY_CQ through cmd.
func (a *CQArm) Arm(cmd Commander, solicitedOnly bool) error {
	i := 0
	if solicitedOnly {
		i = 1
	}
	return cmd.Write(CmdReqNotifyCQ, wire.Bytes(&a.req[i]), nil)
}

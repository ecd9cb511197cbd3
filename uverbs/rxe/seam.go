package rxe

import (
	"github.com/gorping/gorping/uverbs/driver"
)

// rxe allocates nothing for its create commands (the kernel allocates the rings), so its
// pending creates only carry the response sizes and map the rings on Commit.

type pendingCQ struct{ c *rxeContext }

func (c *rxeContext) PrepareCQ(req *driver.CQRequest) (driver.PendingCQ, error) {
	return pendingCQ{c}, nil
}

func (p pendingCQ) Udata() ([]byte, int) { return p.c.CQUdata(0) }
func (p pendingCQ) Abort()               {}
func (p pendingCQ) Commit(cmd driver.Commander, core driver.CQCore, resp []byte) (driver.CQ, error) {
	return p.c.NewCQ(cmd, core, resp)
}

type pendingQP struct{ c *rxeContext }

func (c *rxeContext) PrepareQP(req *driver.QPRequest) (driver.PendingQP, error) {
	return pendingQP{c}, nil
}

func (p pendingQP) Udata() ([]byte, int) { return p.c.QPUdata() }
func (p pendingQP) Abort()               {}
func (p pendingQP) Commit(cmd driver.Commander, core *driver.QPCore, resp []byte) (driver.QP, error) {
	return p.c.NewQP(cmd, *core, resp)
}

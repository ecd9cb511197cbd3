package rxe

import "github.com/gorping/gorping/uverbs"

// rxe allocates nothing for its create commands (the kernel allocates the rings), so its
// pending creates only carry the response sizes and map the rings on Commit.

type pendingCQ struct{ c *rxeContext }

func (c *rxeContext) PrepareCQ(req *uverbs.CQRequest) (uverbs.PendingCQ, error) {
	return pendingCQ{c}, nil
}

func (p pendingCQ) Udata() ([]byte, int) { return p.c.CQUdata(0) }
func (p pendingCQ) Abort()               {}
func (p pendingCQ) Commit(cmd uverbs.Commander, core uverbs.CQCore, resp []byte) (uverbs.ProviderCQ, error) {
	return p.c.NewCQ(cmd, core, resp)
}

type pendingQP struct{ c *rxeContext }

func (c *rxeContext) PrepareQP(req *uverbs.QPRequest) (uverbs.PendingQP, error) {
	return pendingQP{c}, nil
}

func (p pendingQP) Udata() ([]byte, int) { return p.c.QPUdata(nil) }
func (p pendingQP) Abort()               {}
func (p pendingQP) Commit(cmd uverbs.Commander, core *uverbs.QPCore, resp []byte) (uverbs.ProviderQP, error) {
	return p.c.NewQP(cmd, *core, resp)
}

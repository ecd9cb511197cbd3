package providerkit

import (
	"fmt"
	"syscall"
)

// The posting path's errors, made once per provider (package-level variables):
// posting must not allocate. driver prefixes the text ("hns: ..."); where libibverbs'
// providers disagree on the errno, the provider passes its library's.

// ErrBadOpcode: a work request opcode gorping does not post.
func ErrBadOpcode(driver string) error {
	return fmt.Errorf("%s: work request opcode not supported by gorping (SEND, RDMA WRITE, RDMA READ and their IMM forms only): %w", driver, syscall.EINVAL)
}

// ErrTooManySGE: more SGEs than the QP was created with.
func ErrTooManySGE(driver string, errno syscall.Errno) error {
	return fmt.Errorf("%s: more SGEs than the QP allows: %w", driver, errno)
}

// ErrInlineLen: inline data beyond the QP's max_inline_data.
func ErrInlineLen(driver string, errno syscall.Errno) error {
	return fmt.Errorf("%s: inline data longer than the QP's max_inline_data: %w", driver, errno)
}

// ErrFull: no room in the work queue.
func ErrFull(driver string) error {
	return fmt.Errorf("%s: the work queue is full: %w", driver, syscall.ENOMEM)
}

// ErrNoRQ: a receive posted to a QP without a receive queue.
func ErrNoRQ(driver string) error {
	return fmt.Errorf("%s: QP has no receive queue: %w", driver, syscall.EINVAL)
}

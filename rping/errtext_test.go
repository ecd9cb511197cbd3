package rping

import (
	"bytes"
	"errors"
	"fmt"
	"syscall"
	"testing"
)

func TestStrerror(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{syscall.ENODEV, "No such device"},
		{syscall.EADDRINUSE, "Address already in use"},
		{syscall.EACCES, "Permission denied"},
		{syscall.EAGAIN, "Resource temporarily unavailable"},
		{syscall.ENODATA, "No data available"},
		{syscall.Errno(133), "Memory page has hardware error"},
		{fmt.Errorf("open /dev/infiniband/rdma_cm: %w", syscall.ENOENT), "No such file or directory"},
		{syscall.Errno(41), "Unknown error 41"},
		{syscall.Errno(200), "Unknown error 200"},
		{errors.New("plain"), "plain"},
		{nil, "Success"},
	} {
		if got := strerror(tc.err); got != tc.want {
			t.Errorf("strerror(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestPerror(t *testing.T) {
	var b bytes.Buffer
	perror(&b, "rdma_bind_addr", fmt.Errorf("bind: %w", syscall.EADDRINUSE))
	if got := b.String(); got != "rdma_bind_addr: Address already in use\n" {
		t.Errorf("perror wrote %q", got)
	}
	if errnoOf(fmt.Errorf("x: %w", syscall.EINVAL)) != 22 || errnoOf(errors.New("x")) != -1 {
		t.Errorf("errnoOf")
	}
}

// Test-only oracle harness: runs Debian's libibverbs and one of its providers (libmlx5,
// libbnxt_re, libirdma, libhns) over a fake kernel.
//
// The program interposes the few libc entry points the libraries use to reach the
// kernel (open/openat/stat/socket/ioctl/write/mmap) by defining them in the executable
// (linked with -rdynamic, so the dlopen'ed provider binds to them too). The uverbs
// device node is /dev/null underneath; every write() on it is a uverbs command, which is
// forwarded to the Go side as a "Q" line on stdout and answered by an "A" line on stdin;
// every mmap of it is an "M" line, answered with the name of the device page it is (or
// "-": plain memory) and what the page holds. Device pages are anonymous pages kept
// read-only; each store to them faults, is single-stepped with the x86 trap flag, and
// is recorded with its offset, width and bytes. Nothing here knows a driver: the Go side
// (test/oracle and the driver's part) writes the fake sysfs, answers the commands and
// the mmaps, and places what a "cqe" step writes.
//
// stdin:  the scenario script (one step per line, "end" last), then answers.
// stdout: "Q <cmd> <in_words> <out_words> <hex>", "M <off> <len> <prot> <flags>" and
//         "P <step>" queries, and "E <json>" events.
// The line formats are documented in ../doc.go.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#ifdef ORACLE_MLX5
#include <infiniband/mlx5dv.h>
#endif
#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <ucontext.h>
#include <unistd.h>

#define DEVNODE "/dev/infiniband/uverbs0"

// The page size the libraries see (sysconf), from $ORACLE_PAGE_SIZE: a 16 or 64 KiB-page
// kernel's view on this 4 KiB-page host. mmap offsets of the uverbs fd are in these pages.
static long page_size = 4096;

static int uverbs_fd = -1;
static FILE *in;

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "harness: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	fflush(stdout);
	_exit(3);
}

/* ---------- interposed libc entry points ---------- */

static const char *redirect(const char *path)
{
	if (path && strcmp(path, DEVNODE) == 0)
		return "/dev/null";
	return path;
}

int open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	if (flags & (O_CREAT | O_TMPFILE)) {
		va_list ap;
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	int fd = syscall(SYS_openat, AT_FDCWD, redirect(path), flags, mode);
	if (fd >= 0 && strcmp(path, DEVNODE) == 0)
		uverbs_fd = fd;
	return fd;
}
int open64(const char *path, int flags, ...) __attribute__((alias("open")));

int openat(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	if (flags & (O_CREAT | O_TMPFILE)) {
		va_list ap;
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	int fd = syscall(SYS_openat, dirfd, redirect(path), flags, mode);
	if (fd >= 0 && strcmp(path, DEVNODE) == 0)
		uverbs_fd = fd;
	return fd;
}

int stat(const char *path, struct stat *st)
{
	return syscall(SYS_newfstatat, AT_FDCWD, redirect(path), st, 0);
}

int socket(int domain, int type, int protocol)
{
	// No RDMA netlink: libibverbs falls back to sysfs discovery.
	if (domain == AF_NETLINK) {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	return syscall(SYS_socket, domain, type, protocol);
}

static int n_ioctl;

int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	if (fd == uverbs_fd && fd >= 0) {
		// Every ioctl fails: libibverbs switches to the legacy write() path.
		n_ioctl++;
		errno = ENOTTY;
		return -1;
	}
	return syscall(SYS_ioctl, fd, req, arg);
}

long sysconf(int name)
{
	static long (*real)(int);
	if (name == _SC_PAGESIZE)
		return page_size;
	if (!real)
		real = (long (*)(int))dlsym(RTLD_NEXT, "sysconf");
	return real(name);
}

int getpagesize(void)
{
	return page_size;
}

/* ---------- event output ---------- */

static void hexout(const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		printf("%02x", b[i]);
}

static int hexin(const char *s, uint8_t *out, size_t max)
{
	size_t n = 0;
	while (s[0] && s[1] && s[0] != '\n' && s[0] != ' ') {
		unsigned v;
		if (sscanf(s, "%2x", &v) != 1)
			die("bad hex");
		if (n >= max)
			die("hex too long");
		out[n++] = v;
		s += 2;
	}
	return n;
}

/* ---------- watched memory regions (learned from the Go fake) ---------- */

struct region {
	char name[32];
	uint8_t *addr;
	size_t len;
	uint8_t *last; // last emitted content, NULL before the first emission
};
static struct region regions[64];
static int n_regions;

static struct region *region_by_name(const char *name)
{
	for (int i = 0; i < n_regions; i++)
		if (strcmp(regions[i].name, name) == 0)
			return &regions[i];
	die("no region %s", name);
	return NULL;
}

// forget drops the watched regions of a destroyed object (its memory may be gone):
// "qp0" and every "qp0.<part>".
static void forget(const char *kind, int id)
{
	char a[32];
	int n = snprintf(a, sizeof(a), "%s%d", kind, id);
	for (int i = 0; i < n_regions; i++)
		if (!strncmp(regions[i].name, a, n) && (regions[i].name[n] == 0 || regions[i].name[n] == '.'))
			regions[i].len = 0;
}

// region_at returns the index of the watched region holding address a, or -1.
static int region_at(uintptr_t a)
{
	for (int i = 0; i < n_regions; i++)
		if (regions[i].len && a >= (uintptr_t)regions[i].addr && a < (uintptr_t)regions[i].addr + regions[i].len)
			return i;
	return -1;
}

static void emit_mem(void)
{
	for (int i = 0; i < n_regions; i++) {
		struct region *r = &regions[i];
		if (r->len == 0)
			continue;
		if (r->last && memcmp(r->last, r->addr, r->len) == 0)
			continue;
		if (!r->last)
			r->last = malloc(r->len);
		memcpy(r->last, r->addr, r->len);
		printf("E {\"ev\":\"mem\",\"name\":\"%s\",\"hex\":\"", r->name);
		hexout(r->addr, r->len);
		printf("\"}\n");
	}
}

/* ---------- device pages, doorbell records and store capture ---------- */

// A device page: an mmap of the uverbs fd the Go side named (mlx5: "uar3", bnxt_re:
// "db"), whose stores are the doorbells.
struct uar {
	uint8_t *addr;
	size_t len;
	char name[32];
};
static struct uar uars[64];
static int n_uars;

// Host pages holding doorbell records (learned from the "W <name>.db" lines): kept
// read-only like the UAR pages, so every store to a record is captured in order too.
static uint8_t *dbpages[64];
static int n_dbpages;
#define HOST_PAGE 4096

// One entry of a step's device-visible sequence: a store to a UAR page or a doorbell
// record (target = "uar<i>" or the record's region name), or a fence instruction
// executed while a data-path verb was traced.
struct seqev {
	int uar;	 // store to uars[uar], or -1
	int region;	 // store to regions[region] (a doorbell record), or -1
	uintptr_t addr;	 // the store's address
	unsigned width;
	uint8_t bytes[32];
	const char *fence; // non-NULL: a fence, no store
};
static struct seqev seq[8192];
static volatile int n_seq;
static volatile int pending = -1; // protected range of the store being single-stepped
static volatile int pending_db;	  // ... which is a doorbell-record page
static volatile int pending_tf;	  // the trap flag was set for it (not by tracing)
static volatile uintptr_t pending_addr;
static volatile unsigned pending_width;
static volatile int tracing; // a data-path verb runs single-stepped: record its fences

static int uar_of(uintptr_t a)
{
	for (int i = 0; i < n_uars; i++)
		if (a >= (uintptr_t)uars[i].addr && a < (uintptr_t)uars[i].addr + uars[i].len)
			return i;
	return -1;
}

static int dbpage_of(uintptr_t a)
{
	for (int i = 0; i < n_dbpages; i++)
		if (a >= (uintptr_t)dbpages[i] && a < (uintptr_t)dbpages[i] + HOST_PAGE)
			return i;
	return -1;
}

static struct seqev *seq_next(void)
{
	if (n_seq >= (int)(sizeof(seq) / sizeof(seq[0])))
		return NULL;
	struct seqev *e = &seq[n_seq++];
	memset(e, 0, sizeof(*e));
	e->uar = e->region = -1;
	return e;
}

#if defined(__x86_64__) && !defined(ORACLE_NO_STEP)
// Width of the memory operand of the store at ip (the x86 forms compilers emit for
// plain and vector stores); 0 if unknown.
static unsigned store_width(const uint8_t *ip)
{
	int opsize16 = 0, rexw = 0;
	for (;;) {
		if (*ip == 0x66) {
			opsize16 = 1;
			ip++;
		} else if (*ip == 0xf2 || *ip == 0xf3 || *ip == 0x2e || *ip == 0x3e || *ip == 0x26 ||
			   *ip == 0x64 || *ip == 0x65 || *ip == 0x36 || *ip == 0xf0) {
			ip++;
		} else
			break;
	}
	if ((*ip & 0xf0) == 0x40) {
		rexw = (*ip & 8) != 0;
		ip++;
	}
	if (*ip == 0xc5)
		return (ip[1] & 4) ? 32 : 16;
	if (*ip == 0xc4)
		return (ip[2] & 4) ? 32 : 16;
	switch (*ip) {
	case 0x88:
	case 0xc6:
		return 1;
	case 0x89:
	case 0xc7:
		return rexw ? 8 : opsize16 ? 2 : 4;
	case 0x0f:
		switch (ip[1]) {
		case 0x11:
		case 0x29:
		case 0x2b:
		case 0x7f:
		case 0xe7:
			return 16;
		case 0xc3:
			return rexw ? 8 : 4;
		case 0xd6:
			return 8;
		}
	}
	return 0;
}

// fence_kind classifies the instruction at ip as an ordering instruction: sfence,
// lfence, mfence, or "locked" (a LOCK-prefixed instruction or an XCHG with memory,
// which x86 executes as a full barrier); NULL for anything else.
static const char *fence_kind(const uint8_t *ip)
{
	int lock = 0;
	for (;;) {
		if (*ip == 0xf0) {
			lock = 1;
			ip++;
		} else if (*ip == 0x66 || *ip == 0xf2 || *ip == 0xf3 || *ip == 0x2e || *ip == 0x3e ||
			   *ip == 0x26 || *ip == 0x64 || *ip == 0x65 || *ip == 0x36) {
			ip++;
		} else
			break;
	}
	if ((*ip & 0xf0) == 0x40)
		ip++;
	if (lock)
		return "locked";
	if (ip[0] == 0x0f && ip[1] == 0xae) {
		if (ip[2] == 0xf8)
			return "sfence";
		if (ip[2] == 0xe8)
			return "lfence";
		if (ip[2] == 0xf0)
			return "mfence";
	}
	if ((ip[0] == 0x86 || ip[0] == 0x87) && (ip[1] >> 6) != 3)
		return "locked";
	return NULL;
}

static void on_segv(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;
	uintptr_t a = (uintptr_t)si->si_addr;
	int u = uar_of(a), d = u < 0 ? dbpage_of(a) : -1;
	(void)sig;
	if ((u < 0 && d < 0) || pending >= 0) {
		signal(SIGSEGV, SIG_DFL);
		return;
	}
	pending = u >= 0 ? u : d;
	pending_db = u < 0;
	pending_addr = a;
	pending_width = store_width((const uint8_t *)uc->uc_mcontext.gregs[REG_RIP]);
	if (pending_db)
		mprotect(dbpages[d], HOST_PAGE, PROT_READ | PROT_WRITE);
	else
		mprotect(uars[u].addr, uars[u].len, PROT_READ | PROT_WRITE);
	pending_tf = !(uc->uc_mcontext.gregs[REG_EFL] & 0x100);
	uc->uc_mcontext.gregs[REG_EFL] |= 0x100; // trap after this one instruction
}

static int region_at(uintptr_t a);

static void on_trap(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;
	(void)sig;
	(void)si;
	if (pending >= 0) {
		int u = pending;
		struct seqev *e = seq_next();
		if (e) {
			if (pending_db)
				e->region = region_at(pending_addr);
			else
				e->uar = u;
			e->addr = pending_addr;
			e->width = pending_width;
			unsigned w = pending_width ? pending_width : 8;
			if (w > sizeof(e->bytes))
				w = sizeof(e->bytes);
			memcpy(e->bytes, (const void *)pending_addr, w);
		}
		if (pending_db)
			mprotect(dbpages[u], HOST_PAGE, PROT_READ);
		else
			mprotect(uars[u].addr, uars[u].len, PROT_READ);
		if (pending_tf)
			uc->uc_mcontext.gregs[REG_EFL] &= ~0x100UL;
		pending = -1;
	}
	if (tracing) {
		const char *f = fence_kind((const uint8_t *)uc->uc_mcontext.gregs[REG_RIP]);
		struct seqev *e = f ? seq_next() : NULL;
		if (e)
			e->fence = f;
	}
}

// trace_on/trace_off run the code between them single-stepped (the trap flag), so that
// on_trap sees every instruction and records the fences among them.
static inline void trace_on(void)
{
	tracing = 1;
	__asm__ volatile("pushfq; orq $0x100, (%%rsp); popfq" ::: "memory", "cc");
}
static inline void trace_off(void)
{
	__asm__ volatile("pushfq; andq $-257, (%%rsp); popfq" ::: "memory", "cc");
	tracing = 0;
}
// trace_pause/trace_resume leave the harness's own fake-kernel code (a command written
// from inside a traced verb, as libhns's poller moves a QP to ERR) unstepped: it is not
// the library's, and stepping its stdio round trip cost seconds per command.
static inline int trace_pause(void)
{
	if (!tracing)
		return 0;
	trace_off();
	return 1;
}
static inline void trace_resume(int was)
{
	if (was)
		trace_on();
}
#define UAR_PROT PROT_READ
#define HAVE_STEP 1
#else
#define UAR_PROT (PROT_READ | PROT_WRITE)
#define HAVE_STEP 0
static inline void trace_on(void) {}
static inline void trace_off(void) {}
static inline int trace_pause(void) { return 0; }
static inline void trace_resume(int was) { (void)was; }
#endif

// protect_dbrec makes the host page of a newly learned doorbell record read-only, so its
// stores are captured like those to UAR pages.
static void protect_dbrec(uint8_t *addr)
{
#if HAVE_STEP
	uint8_t *page = (uint8_t *)((uintptr_t)addr & ~(uintptr_t)(HOST_PAGE - 1));
	if (dbpage_of((uintptr_t)page) >= 0 || n_dbpages >= 64)
		return;
	dbpages[n_dbpages++] = page;
	mprotect(page, HOST_PAGE, PROT_READ);
#else
	(void)addr;
#endif
}

static void emit_stores(void)
{
	for (int i = 0; i < n_seq; i++) {
		struct seqev *s = &seq[i];
		if (s->fence) {
			printf("E {\"ev\":\"fence\",\"kind\":\"%s\"}\n", s->fence);
			continue;
		}
		unsigned w = s->width ? s->width : 8;
		if (s->uar >= 0)
			printf("E {\"ev\":\"store\",\"page\":\"%s\",\"off\":%lu,\"width\":%u,\"hex\":\"",
			       uars[s->uar].name, (unsigned long)(s->addr - (uintptr_t)uars[s->uar].addr),
			       s->width);
		else if (s->region >= 0)
			printf("E {\"ev\":\"store\",\"page\":\"%s\",\"off\":%lu,\"width\":%u,\"hex\":\"",
			       regions[s->region].name,
			       (unsigned long)(s->addr - (uintptr_t)regions[s->region].addr), s->width);
		else
			printf("E {\"ev\":\"store\",\"page\":\"dbpage\",\"off\":%lu,\"width\":%u,\"hex\":\"",
			       (unsigned long)(s->addr & (HOST_PAGE - 1)), s->width);
		hexout(s->bytes, w > sizeof(s->bytes) ? sizeof(s->bytes) : w);
		printf("\"}\n");
	}
	n_seq = 0;
#if !HAVE_STEP
	// Without single-stepping, the final content of each device page stands in.
	for (int i = 0; i < n_uars; i++) {
		printf("E {\"ev\":\"devpage\",\"page\":\"%s\",\"hex\":\"", uars[i].name);
		hexout(uars[i].addr, uars[i].len);
		printf("\"}\n");
	}
#endif
}

static char line_buf[1 << 17];

// answer reads the Go side's answer to a query: "W" lines (new watched regions) first,
// then the "A" line, whose text after the errno is returned.
static int answer(char **rest);

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (fd >= 0 && fd == uverbs_fd) {
		void *p = (void *)syscall(SYS_mmap, NULL, len, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		printf("E {\"ev\":\"mmap\",\"off\":%lu,\"len\":%zu,\"prot\":%d,\"flags\":%d}\n",
		       (unsigned long)off, len, prot, flags);
		printf("M %lu %zu %d %d\n", (unsigned long)off, len, prot, flags);
		fflush(stdout);
		char *rest;
		int err = answer(&rest);
		if (err) {
			syscall(SYS_munmap, p, len);
			errno = err;
			return MAP_FAILED;
		}
		// rest: "<name>|- <hex fill>|-"
		char name[32];
		char *sp = strchr(rest, ' ');
		size_t nl = sp ? (size_t)(sp - rest) : strcspn(rest, "\n");
		if (nl == 0 || nl >= sizeof(name))
			die("bad mmap answer %s", rest);
		memcpy(name, rest, nl);
		name[nl] = 0;
		if (sp && sp[1] != '-' && sp[1] != '\n')
			hexin(sp + 1, p, len);
		if (p != MAP_FAILED && strcmp(name, "-") != 0 && n_uars < 64) {
			uars[n_uars] = (struct uar){ p, len, "" };
			memcpy(uars[n_uars].name, name, nl + 1);
			n_uars++;
			mprotect(p, len, UAR_PROT);
		}
		return p;
	}
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}
void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
	__attribute__((alias("mmap")));

/* ---------- the fake kernel: write() on the uverbs fd ---------- */

struct cqinfo {
	uint64_t user_handle;
};
static struct cqinfo cqs[64];
static int n_cqs;
static int chan_wr[16];
static int n_chans;
static int async_pipe[2] = { -1, -1 };

static int answer(char **rest)
{
	while (fgets(line_buf, sizeof(line_buf), in)) {
		if (line_buf[0] == 'W') {
			if (n_regions >= 64)
				die("too many regions");
			struct region *r = &regions[n_regions++];
			unsigned long long a, l;
			if (sscanf(line_buf, "W %31s %llx %llu", r->name, &a, &l) != 3)
				die("bad W line: %s", line_buf);
			r->addr = (uint8_t *)(uintptr_t)a;
			r->len = l;
			r->last = NULL;
			size_t nl = strlen(r->name);
			if (nl > 3 && !strcmp(r->name + nl - 3, ".db"))
				protect_dbrec(r->addr);
			continue;
		}
		if (line_buf[0] == 'A') {
			char *p = line_buf + 2;
			int err = strtol(p, &p, 10);
			if (*p == ' ')
				p++;
			*rest = p;
			return err;
		}
		die("unexpected answer line: %s", line_buf);
	}
	die("no answer");
	return -1;
}

static ssize_t fake_write(const void *buf, size_t len)
{
	static uint8_t out[1 << 14];
	const uint8_t *b = buf;
	uint32_t cmd;
	uint16_t in_words, out_words;
	memcpy(&cmd, b, 4);
	memcpy(&in_words, b + 4, 2);
	memcpy(&out_words, b + 6, 2);
	printf("Q %u %u %u ", cmd, in_words, out_words);
	hexout(b + 8, len - 8);
	printf("\n");
	fflush(stdout);

	char *rest;
	int err = answer(&rest), n = 0;
	if (!err)
		n = hexin(rest, out, sizeof(out));
	if (err) {
		errno = err;
		return -1;
	}
	uint64_t resp = 0;
	int ex = (cmd & 0x80000000u) != 0;
	uint32_t num = cmd & 0xffff;
	if (ex)
		memcpy(&resp, b + 8, 8);
	else if (len >= 16)
		memcpy(&resp, b + 8, 8);
	// Process-local values the Go fake cannot know: file descriptors.
	if (!ex && num == IB_USER_VERBS_CMD_GET_CONTEXT && n >= 4) {
		if (async_pipe[0] < 0 && pipe(async_pipe) != 0)
			die("pipe");
		uint32_t fd = async_pipe[0];
		memcpy(out, &fd, 4);
	}
	if (!ex && num == IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL && n >= 4) {
		int p[2];
		if (pipe(p) != 0 || n_chans >= 16)
			die("pipe");
		chan_wr[n_chans++] = p[1];
		uint32_t fd = p[0];
		memcpy(out, &fd, 4);
	}
	if (!ex && num == IB_USER_VERBS_CMD_CREATE_CQ && n_cqs < 64)
		memcpy(&cqs[n_cqs++].user_handle, b + 16, 8);
	if (ex && num == IB_USER_VERBS_CMD_CREATE_CQ && n_cqs < 64)
		memcpy(&cqs[n_cqs++].user_handle, b + 24, 8); // after the extended header
	if (n && resp)
		memcpy((void *)(uintptr_t)resp, out, n);
	return len;
}

ssize_t write(int fd, const void *buf, size_t len)
{
	if (fd >= 0 && fd == uverbs_fd) {
		int t = trace_pause();
		ssize_t n = fake_write(buf, len);
		int e = errno;
		trace_resume(t);
		errno = e;
		return n;
	}
	return syscall(SYS_write, fd, buf, len);
}

/* ---------- scenario interpreter ---------- */

#define MAXOBJ 64
static struct ibv_device **devs;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_comp_channel *chan;
static struct ibv_cq *cq[MAXOBJ];
static struct ibv_cq_ex *cqx[MAXOBJ]; // CQs made by cq_ex (also in cq[])
static struct ibv_qp *qp[MAXOBJ];
static struct ibv_mr *mr[MAXOBJ];
static int chan_idx = -1;

static char *tok(char **s)
{
	char *t = strtok_r(NULL, " \t\n", s);
	if (!t)
		die("missing argument");
	return t;
}
static unsigned long long num(char **s)
{
	return strtoull(tok(s), NULL, 0);
}

static int cq_index(struct ibv_cq *c)
{
	for (int i = 0; i < MAXOBJ; i++)
		if (cq[i] && cq[i] == c)
			return i;
	return -1;
}

static void sge(char **s, struct ibv_sge *g)
{
	int m = num(s);
	unsigned long long off = num(s), len = num(s);
	if (m < 0 || m >= MAXOBJ || !mr[m])
		die("no mr %d", m);
	g->addr = (uintptr_t)mr[m]->addr + off;
	g->length = len;
	g->lkey = mr[m]->lkey;
}

static void modify_rts(struct ibv_qp *q, char *res, size_t cap)
{
	struct ibv_qp_attr a;
	int r1, r2, r3;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
	r1 = ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = 0x99;
	a.rq_psn = 0x1234;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = 2;
	a.ah_attr.port_num = 1;
	r2 = ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0x5678;
	a.max_rd_atomic = 1;
	r3 = ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	snprintf(res, cap, "\"init\":%d,\"rtr\":%d,\"rts\":%d", r1, r2, r3);
}

static int cur_step; // the step being run (a "cqe" step's query names it)

static int run_step(char *line, char *res, size_t cap)
{
	char *s;
	char *op = strtok_r(line, " \t\n", &s);
	res[0] = 0;
	errno = 0;
	if (!op)
		die("empty step");
	if (!strcmp(op, "open")) {
		int n = 0;
		devs = ibv_get_device_list(&n);
		if (!devs || n < 1) {
			snprintf(res, cap, "\"ndev\":%d", n);
			return -1;
		}
		ctx = ibv_open_device(devs[0]);
		snprintf(res, cap, "\"ndev\":%d,\"name\":\"%s\",\"ioctls\":%d", n,
			 ibv_get_device_name(devs[0]), n_ioctl);
		return ctx ? 0 : -1;
	}
	if (!ctx) {
		errno = ENODEV;
		return -1;
	}
	if (!strcmp(op, "query_port")) {
		struct ibv_port_attr pa;
		int r = ibv_query_port(ctx, num(&s), &pa);
		snprintf(res, cap, "\"state\":%d,\"lid\":%d,\"link_layer\":%d,\"active_mtu\":%d", pa.state,
			 pa.lid, pa.link_layer, pa.active_mtu);
		return r;
	}
	if (!strcmp(op, "pd")) {
		pd = ibv_alloc_pd(ctx);
		return pd ? 0 : -1;
	}
	if (!strcmp(op, "mr")) {
		int id = num(&s);
		unsigned long long addr = num(&s), len = num(&s), access = num(&s);
		void *p = (void *)syscall(SYS_mmap, (void *)(uintptr_t)addr, len, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (p != (void *)(uintptr_t)addr)
			die("mmap mr at %llx", addr);
		for (unsigned long long i = 0; i < len; i++)
			((uint8_t *)p)[i] = (uint8_t)(i * 7 + id);
		mr[id] = ibv_reg_mr(pd, p, len, access);
		if (mr[id])
			snprintf(res, cap, "\"lkey\":%u,\"rkey\":%u", mr[id]->lkey, mr[id]->rkey);
		return mr[id] ? 0 : -1;
	}
	if (!strcmp(op, "channel")) {
		chan = ibv_create_comp_channel(ctx);
		chan_idx = n_chans - 1;
		return chan ? 0 : -1;
	}
	if (!strcmp(op, "cq")) {
		int id = num(&s), cqe = num(&s), wch = num(&s);
		cq[id] = ibv_create_cq(ctx, cqe, NULL, wch ? chan : NULL, 0);
		if (cq[id])
			snprintf(res, cap, "\"cqe\":%d", cq[id]->cqe);
		return cq[id] ? 0 : -1;
	}
	if (!strcmp(op, "qp")) {
		int id = num(&s), scq = num(&s), rcq = num(&s);
		struct ibv_qp_init_attr a;
		memset(&a, 0, sizeof(a));
		a.send_cq = cq[scq];
		a.recv_cq = cq[rcq];
		a.qp_type = IBV_QPT_RC;
		a.cap.max_send_wr = num(&s);
		a.cap.max_recv_wr = num(&s);
		a.cap.max_send_sge = num(&s);
		a.cap.max_recv_sge = num(&s);
		a.cap.max_inline_data = num(&s);
		a.sq_sig_all = num(&s);
		qp[id] = ibv_create_qp(pd, &a);
		if (qp[id])
			snprintf(res, cap,
				 "\"qpn\":%u,\"max_send_wr\":%u,\"max_recv_wr\":%u,\"max_send_sge\":%u,"
				 "\"max_recv_sge\":%u,\"max_inline_data\":%u",
				 qp[id]->qp_num, a.cap.max_send_wr, a.cap.max_recv_wr, a.cap.max_send_sge,
				 a.cap.max_recv_sge, a.cap.max_inline_data);
		return qp[id] ? 0 : -1;
	}
	if (!strcmp(op, "rts")) {
		int id = num(&s);
		modify_rts(qp[id], res, cap);
		return 0;
	}
	if (!strcmp(op, "recv")) {
		int id = num(&s), n = num(&s);
		struct ibv_recv_wr wr[64], *bad = NULL;
		struct ibv_sge g[64][8];
		memset(wr, 0, sizeof(wr));
		for (int i = 0; i < n; i++) {
			wr[i].wr_id = num(&s);
			wr[i].num_sge = num(&s);
			for (int j = 0; j < wr[i].num_sge; j++)
				sge(&s, &g[i][j]);
			wr[i].sg_list = g[i];
			wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		}
		trace_on();
		int r = ibv_post_recv(qp[id], wr, &bad);
		trace_off();
		snprintf(res, cap, "\"bad\":%d", bad ? (int)(bad - wr) : -1);
		if (r)
			errno = r;
		return r ? -1 : 0;
	}
	if (!strcmp(op, "send")) {
		int id = num(&s), n = num(&s);
		struct ibv_send_wr wr[64], *bad = NULL;
		struct ibv_sge g[64][8];
		memset(wr, 0, sizeof(wr));
		for (int i = 0; i < n; i++) {
			wr[i].wr_id = num(&s);
			wr[i].opcode = num(&s);
			wr[i].send_flags = num(&s);
			wr[i].imm_data = htobe32(num(&s));
			wr[i].wr.rdma.remote_addr = num(&s);
			wr[i].wr.rdma.rkey = num(&s);
			wr[i].num_sge = num(&s);
			for (int j = 0; j < wr[i].num_sge; j++)
				sge(&s, &g[i][j]);
			wr[i].sg_list = g[i];
			wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		}
		trace_on();
		int r = ibv_post_send(qp[id], wr, &bad);
		trace_off();
		snprintf(res, cap, "\"bad\":%d", bad ? (int)(bad - wr) : -1);
		if (r)
			errno = r;
		return r ? -1 : 0;
	}
	if (!strcmp(op, "cqe")) {
		// What the device writes: the Go side places it ("D <region> <offset> <hex>"),
		// from what its fake kernel learned (the driver's CQE format, handles).
		static uint8_t b[4096];
		char name[32], *rest;
		unsigned long off;
		int pos;
		printf("P %d\n", cur_step);
		fflush(stdout);
		if (answer(&rest))
			die("no cqe for step %d", cur_step);
		if (sscanf(rest, "%31s %lu %n", name, &off, &pos) != 2)
			die("bad cqe answer %s", rest);
		struct region *r = region_by_name(name);
		int n = hexin(rest + pos, b, sizeof(b));
		if (off + n > r->len)
			die("cqe of %d bytes at %lu outside %s", n, off, name);
		memcpy(r->addr + off, b, n);
		return 0;
	}
	if (!strcmp(op, "query_device_ex")) {
		struct ibv_device_attr_ex a;
		memset(&a, 0, sizeof(a));
		int r = ibv_query_device_ex(ctx, NULL, &a);
		snprintf(res, cap, "\"ts_mask\":%llu,\"hca_clock\":%llu",
			 (unsigned long long)a.completion_timestamp_mask, (unsigned long long)a.hca_core_clock);
		if (r)
			errno = r;
		return r ? -1 : 0;
	}
	if (!strcmp(op, "cq_ex")) {
		int id = num(&s), cqe = num(&s), wch = num(&s), ts = num(&s);
		struct ibv_cq_init_attr_ex a;
		memset(&a, 0, sizeof(a));
		a.cqe = cqe;
		a.channel = wch ? chan : NULL;
		a.wc_flags = IBV_WC_STANDARD_FLAGS | (ts ? IBV_WC_EX_WITH_COMPLETION_TIMESTAMP : 0);
		cqx[id] = ibv_create_cq_ex(ctx, &a);
		cq[id] = cqx[id] ? ibv_cq_ex_to_cq(cqx[id]) : NULL;
		if (cq[id])
			snprintf(res, cap, "\"cqe\":%d", cq[id]->cqe);
		return cq[id] ? 0 : -1;
	}
#ifdef ORACLE_MLX5
	if (!strcmp(op, "poll_ts")) {
		// The extended poll API: each completion's raw timestamp, and that timestamp
		// converted with the clock_info page by mlx5dv_ts_to_ns.
		int id = num(&s), n = num(&s);
		struct ibv_poll_cq_attr pa;
		struct mlx5dv_clock_info ci;
		memset(&pa, 0, sizeof(pa));
		memset(&ci, 0, sizeof(ci));
		int cr = mlx5dv_get_clock_info(ctx, &ci);
		size_t o = snprintf(res, cap, "\"wc\":[");
		int k = 0;
		trace_on();
		int r = ibv_start_poll(cqx[id], &pa);
		trace_off();
		while (r == 0 && k < n) {
			uint64_t ts = ibv_wc_read_completion_ts(cqx[id]);
			o += snprintf(res + o, cap - o,
				      "%s{\"wr_id\":%llu,\"status\":%d,\"opcode\":%d,\"byte_len\":%u,\"qp_num\":%u,"
				      "\"ts\":%llu,\"ns\":%llu}",
				      k ? "," : "", (unsigned long long)cqx[id]->wr_id, cqx[id]->status,
				      ibv_wc_read_opcode(cqx[id]), ibv_wc_read_byte_len(cqx[id]),
				      ibv_wc_read_qp_num(cqx[id]), (unsigned long long)ts,
				      (unsigned long long)(cr ? 0 : mlx5dv_ts_to_ns(&ci, ts)));
			k++;
			if (k == n)
				break;
			trace_on();
			r = ibv_next_poll(cqx[id]);
			trace_off();
		}
		if (k > 0) {
			trace_on();
			ibv_end_poll(cqx[id]);
			trace_off();
		}
		snprintf(res + o, cap - o, "],\"n\":%d,\"clock_err\":%d", k, cr);
		return 0;
	}
#endif
	if (!strcmp(op, "poll")) {
		int id = num(&s), n = num(&s);
		struct ibv_wc wc[64];
		if (n > 64)
			n = 64;
		memset(wc, 0, sizeof(wc));
		trace_on();
		int r = ibv_poll_cq(cq[id], n, wc);
		trace_off();
		size_t o = snprintf(res, cap, "\"n\":%d,\"wc\":[", r);
		for (int i = 0; i < r && o < cap; i++)
			o += snprintf(res + o, cap - o,
				      "%s{\"wr_id\":%llu,\"status\":%d,\"opcode\":%d,\"vendor_err\":%u,"
				      "\"byte_len\":%u,\"imm_data\":%u,\"qp_num\":%u,\"src_qp\":%u,"
				      "\"wc_flags\":%u,\"pkey_index\":%u,\"slid\":%u,\"sl\":%u,"
				      "\"dlid_path_bits\":%u,\"invalidated_rkey\":%u}",
				      i ? "," : "", (unsigned long long)wc[i].wr_id, wc[i].status, wc[i].opcode,
				      wc[i].vendor_err, wc[i].byte_len, be32toh(wc[i].imm_data), wc[i].qp_num,
				      wc[i].src_qp, wc[i].wc_flags, wc[i].pkey_index, wc[i].slid, wc[i].sl,
				      wc[i].dlid_path_bits,
				      (wc[i].wc_flags & IBV_WC_WITH_INV) ? wc[i].invalidated_rkey : 0);
		if (o < cap)
			snprintf(res + o, cap - o, "]");
		return r < 0 ? -1 : 0;
	}
	if (!strcmp(op, "arm")) {
		int id = num(&s), sol = num(&s);
		trace_on();
		int r = ibv_req_notify_cq(cq[id], sol);
		trace_off();
		if (r)
			errno = r;
		return r ? -1 : 0;
	}
	if (!strcmp(op, "event")) {
		int id = num(&s);
		if (chan_idx < 0)
			die("event without channel");
		struct ib_uverbs_comp_event_desc d = { .cq_handle = cqs[id].user_handle };
		if (syscall(SYS_write, chan_wr[chan_idx], &d, sizeof(d)) != sizeof(d))
			die("event write");
		struct ibv_cq *got = NULL;
		void *gctx = NULL;
		int r = ibv_get_cq_event(chan, &got, &gctx);
		if (r == 0)
			ibv_ack_cq_events(got, 1);
		snprintf(res, cap, "\"cq\":%d", r == 0 ? cq_index(got) : -1);
		return r;
	}
	if (!strcmp(op, "destroy_qp")) {
		int id = num(&s);
		forget("qp", id);
		int r = ibv_destroy_qp(qp[id]);
		qp[id] = NULL;
		return r;
	}
	if (!strcmp(op, "destroy_cq")) {
		int id = num(&s);
		forget("cq", id);
		int r = ibv_destroy_cq(cq[id]);
		cq[id] = NULL;
		return r;
	}
	if (!strcmp(op, "dereg")) {
		int id = num(&s);
		forget("mr", id);
		int r = ibv_dereg_mr(mr[id]);
		mr[id] = NULL;
		return r;
	}
	if (!strcmp(op, "dealloc_pd")) {
		int r = ibv_dealloc_pd(pd);
		pd = NULL;
		return r;
	}
	die("unknown step %s", op);
	return -1;
}

#ifdef ORACLE_MLX5
// ts_to_ns_vectors: stdin holds records of seven little-endian u64 (nsec, last_cycles,
// frac, mult, shift, mask, device timestamp); for each, stdout gets mlx5dv_ts_to_ns's
// result as a little-endian u64.
static int ts_to_ns_vectors(void)
{
	uint64_t v[7], out[1024];
	int n = 0;
	while (fread(v, sizeof(v), 1, stdin) == 1) {
		struct mlx5dv_clock_info ci = {
			.nsec = v[0], .last_cycles = v[1], .frac = v[2],
			.mult = (uint32_t)v[3], .shift = (uint32_t)v[4], .mask = v[5],
		};
		out[n++] = mlx5dv_ts_to_ns(&ci, v[6]);
		if (n == 1024) {
			fwrite(out, sizeof(out[0]), n, stdout);
			n = 0;
		}
	}
	fwrite(out, sizeof(out[0]), n, stdout);
	fflush(stdout);
	return 0;
}
#endif

int main(int argc, char **argv)
{
	static char script[1 << 20], res[1 << 16];
	char *lines[4096];
	int n = 0;
	size_t used = 0;

#ifdef ORACLE_MLX5
	if (argc == 2 && !strcmp(argv[1], "--ts-to-ns"))
		return ts_to_ns_vectors();
#endif
	if (argc != 2)
		die("usage: harness SYSFS_DIR < script");
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	in = stdin;
	setenv("SYSFS_PATH", argv[1], 1); // the Go side wrote the fake sysfs there
	if (getenv("ORACLE_PAGE_SIZE"))
		page_size = strtol(getenv("ORACLE_PAGE_SIZE"), NULL, 0);

	while (used < sizeof(script) - 4096 && fgets(script + used, sizeof(script) - used, in)) {
		if (!strcmp(script + used, "end\n"))
			break;
		if (n >= 4096)
			die("script too long");
		lines[n++] = script + used;
		used += strlen(script + used) + 1;
	}

#if HAVE_STEP
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_flags = SA_SIGINFO;
	sa.sa_sigaction = on_segv;
	sigaction(SIGSEGV, &sa, NULL);
	sa.sa_sigaction = on_trap;
	sigaction(SIGTRAP, &sa, NULL);
#endif
	printf("E {\"ev\":\"start\",\"single_step\":%d}\n", HAVE_STEP);
	for (int i = 0; i < n; i++) {
		cur_step = i;
		int r = run_step(lines[i], res, sizeof(res));
		int e = r ? errno : 0;
		emit_stores();
		emit_mem();
		printf("E {\"ev\":\"step\",\"i\":%d,\"ret\":%d,\"errno\":%d%s%s}\n", i, r, e, res[0] ? "," : "",
		       res);
		fflush(stdout);
	}
	printf("E {\"ev\":\"done\"}\n");
	fflush(stdout);
	return 0;
}

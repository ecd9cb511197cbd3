package cli

// getaddrinfo error codes (glibc <netdb.h>). rping's get_addr returns them as
// its ret, so they become exit statuses 256+code (EAI_NONAME -2 → 254).
const (
	eaiBadFlags   = -1
	eaiNoName     = -2
	eaiAgain      = -3
	eaiFail       = -4
	eaiNoData     = -5
	eaiFamily     = -6
	eaiSockType   = -7
	eaiService    = -8
	eaiAddrFamily = -9
	eaiMemory     = -10
	eaiSystem     = -11
)

// gaiStrerror is glibc's gai_strerror text (glibc 2.36; "Unknown error" for
// codes it does not know).
func gaiStrerror(code int) string {
	switch code {
	case eaiBadFlags:
		return "Bad value for ai_flags"
	case eaiNoName:
		return "Name or service not known"
	case eaiAgain:
		return "Temporary failure in name resolution"
	case eaiFail:
		return "Non-recoverable failure in name resolution"
	case eaiNoData:
		return "No address associated with hostname"
	case eaiFamily:
		return "ai_family not supported"
	case eaiSockType:
		return "ai_socktype not supported"
	case eaiService:
		return "Servname not supported for ai_socktype"
	case eaiAddrFamily:
		return "Address family for hostname not supported"
	case eaiMemory:
		return "Memory allocation failure"
	case eaiSystem:
		return "System error"
	}
	return "Unknown error"
}

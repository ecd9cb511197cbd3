//go:build guest

package mesh

// The agent in process (runAgent) opens the guest's rxe device: the providers gorping
// ships, as the binary has them (main imports them).
import _ "github.com/gorping/gorping/uverbs/providers"

//go:build guest

package guest

// The providers gorping ships, as the binary has them (main imports them): the tests
// here open the guest's rxe and siw devices through rping, rdmacm and uverbs directly.
import _ "github.com/gorping/gorping/uverbs/providers"

package pinglist

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// Member is one agent of the mesh: the name it is known by and its group (a ToR, a rack,
// a switch plane). Agents with an empty group form one group together.
type Member struct {
	Host  string
	Group string
}

// Limits of a member's fields and of a members file, so that a file or a peer's
// description cannot make the plan allocate without bound.
const (
	MaxHostLen  = 253     // a DNS name's length
	MaxGroupLen = 128     // room for "pod-3/rack-12/tor-a"
	MaxLineLen  = 1024    // a members file line, comment included
	MaxMembers  = 1 << 20 // members in one plan
)

// CheckHost says why s cannot be a member's name, or nil. Names are 1 to MaxHostLen
// bytes of visible ASCII but '#' (node names, addresses, host:port): they are printed in
// plans and logs and carried in labels as they are.
func CheckHost(s string) error { return checkToken("host", s, MaxHostLen) }

// CheckGroup says why s cannot be a group's name, or nil. The empty group is allowed.
func CheckGroup(s string) error {
	if s == "" {
		return nil
	}
	return checkToken("group", s, MaxGroupLen)
}

func checkToken(what, s string, max int) error {
	if s == "" {
		return fmt.Errorf("empty %s", what)
	}
	if len(s) > max {
		return fmt.Errorf("%s %.20q... is %d bytes long (at most %d)", what, s, len(s), max)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' || c == '#' {
			b := fmt.Sprintf("%q", c)
			if c < ' ' || c > '~' {
				b = fmt.Sprintf("0x%02x", c)
			}
			return fmt.Errorf("%s %q: byte %d is %s (names are visible ASCII, without '#')", what, s, i+1, b)
		}
	}
	return nil
}

// maxMembers is MaxMembers, lowered by the tests.
var maxMembers = MaxMembers

// LineError is a members file line that does not parse.
type LineError struct {
	Line int
	Err  error
}

func (e LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// ParseMembers parses a members file: one "HOST GROUP" line per agent, '#' starts a
// comment (at the start of a line or after white space), blank lines are ignored. It
// returns the members of the lines that parse, in file order, and an error per line
// that does not (a host may stand on one line only). Lines longer than MaxLineLen are
// errors, as is every member past MaxMembers.
func ParseMembers(data []byte) ([]Member, []LineError) {
	var ms []Member
	var errs []LineError
	seen := map[string]int{} // host -> its line
	for n := 1; len(data) > 0; n++ {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		if len(line) > MaxLineLen {
			errs = append(errs, LineError{n, fmt.Errorf("line is %d bytes long (at most %d)", len(line), MaxLineLen)})
			continue
		}
		s := string(bytes.TrimSuffix(line, []byte{'\r'}))
		if i := commentStart(s); i >= 0 {
			s = s[:i]
		}
		f := strings.Fields(s)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			errs = append(errs, LineError{n, fmt.Errorf("%q: want HOST GROUP", strings.Join(f, " "))})
			continue
		}
		m := Member{Host: f[0], Group: f[1]}
		if err := errors.Join(CheckHost(m.Host), CheckGroup(m.Group)); err != nil {
			errs = append(errs, LineError{n, err})
			continue
		}
		if prev, dup := seen[m.Host]; dup {
			errs = append(errs, LineError{n, fmt.Errorf("host %q is already on line %d", m.Host, prev)})
			continue
		}
		if len(ms) == maxMembers {
			errs = append(errs, LineError{n, fmt.Errorf("more than %d members", maxMembers)})
			break
		}
		seen[m.Host] = n
		ms = append(ms, m)
	}
	return ms, errs
}

// commentStart is where a '#' comment starts: at the start of the line or after white
// space, as in mesh's target files.
func commentStart(line string) int {
	for i := 0; i < len(line); i++ {
		if line[i] == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') {
			return i
		}
	}
	return -1
}

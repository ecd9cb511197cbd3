package agentdesc

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/gorping/gorping/mesh/pinglist"
)

// Version is the format version this package writes and reads: a document of major
// version 1 and any minor version is read; see the package comment for the rules.
// 1.1 added "instance".
const Version = "1.1"

// Limits of a document, so that a peer cannot make an agent allocate without bound.
const (
	MaxSize      = 64 << 10 // bytes; eight rails with a dozen addresses and GIDs each take under 8 KiB
	MaxRails     = 32       // rails in a document
	MaxAddresses = 16       // addresses per rail
	MaxGIDs      = 128      // GID entries per rail
)

// Link layers (sysfs ports/N/link_layer) and GID types (gid_attrs/types/N, as
// `gorping devices` names them).
const (
	LinkEthernet   = "Ethernet"
	LinkInfiniBand = "InfiniBand"
	GIDTypeIB      = "IB"
	GIDTypeRoCEv1  = "RoCE v1"
	GIDTypeRoCEv2  = "RoCE v2"
)

const (
	major, minor  = 1, 1
	maxInstance   = 64 // bytes of an instance ID
	maxDeviceLen  = 63 // IB_DEVICE_NAME_MAX less its NUL
	maxNetdevLen  = 15 // IFNAMSIZ less its NUL
	maxVersionLen = 64
	maxGIDIndex   = 1 << 16
	maxPort       = 255 // a port number is a u8 in verbs
)

// Description is an agent's description of itself: what its peers need to probe it on
// every rail.
type Description struct {
	Version string // the document's format version (Marshal writes Version)
	Name    string // the agent's name: its member name in pinglists, the peer label
	// Instance is drawn by the agent at start (NewInstance): two agents of one name (hosts
	// cloned from one image, an unset host name) tell each other apart by it, and an
	// agent knows its own description by it. "" in a 1.0 document.
	Instance       string
	Group          string // its pinglist group ("": no group)
	GorpingVersion string // the gorping release it runs
	ResponderPort  uint16 // the port its rping responder listens on, on every rail
	Rails          []Rail
}

// Rail is one local RDMA port, as its peers probe it.
type Rail struct {
	Device    string         // RDMA device ("mlx5_0"), the device label
	Port      int            // its port (1-based), the port label
	Netdev    string         // the network interface of the port ("ens1f0np0"; "" if none)
	LinkLayer string         // LinkEthernet (RoCE) or LinkInfiniBand
	ActiveMTU int            // the port's active MTU in bytes (256..4096); 0 if unknown
	Addresses []netip.Prefix // the netdev's addresses with their subnet's prefix length ("10.0.1.5/24")
	GIDs      []GID          // the port's valid GID table entries
}

// GID is one entry of a port's GID table.
type GID struct {
	Index int
	GID   netip.Addr // 16 bytes: an IPv4 address's RoCE GID stays IPv4-mapped (::ffff:10.0.1.5)
	Type  string     // GIDTypeIB, GIDTypeRoCEv1 or GIDTypeRoCEv2
}

// NewInstance draws an instance ID: 16 hex digits, unique among a fleet's running
// agents for all practical purposes (64 random bits).
func NewInstance() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b[:])
}

// SameAgent says whether d and o describe one agent: by instance where both have one,
// else (a 1.0 document) by name and, where both list GIDs, a GID in common.
func (d Description) SameAgent(o Description) bool {
	if d.Instance != "" && o.Instance != "" {
		return d.Instance == o.Instance
	}
	if d.Name != o.Name {
		return false
	}
	gids := map[netip.Addr]bool{}
	for _, r := range d.Rails {
		for _, g := range r.GIDs {
			gids[g.GID] = true
		}
	}
	n := 0
	for _, r := range o.Rails {
		for _, g := range r.GIDs {
			n++
			if gids[g.GID] {
				return true
			}
		}
	}
	return len(gids) == 0 || n == 0
}

// Member is the description's pinglist member.
func (d Description) Member() pinglist.Member {
	return pinglist.Member{Host: d.Name, Group: d.Group}
}

// The wire form: plain strings and numbers, checked field by field so that a bad value
// is named by its path.
type wireDoc struct {
	Version        string     `json:"version"`
	Name           string     `json:"name"`
	Instance       string     `json:"instance,omitempty"`
	Group          string     `json:"group,omitempty"`
	GorpingVersion string     `json:"gorping_version"`
	ResponderPort  int        `json:"responder_port"`
	Rails          []wireRail `json:"rails"`
}

type wireRail struct {
	Device    string    `json:"device"`
	Port      int       `json:"port"`
	Netdev    string    `json:"netdev,omitempty"`
	LinkLayer string    `json:"link_layer"`
	ActiveMTU int       `json:"active_mtu,omitempty"`
	Addresses []string  `json:"addresses"`
	GIDs      []wireGID `json:"gids"`
}

type wireGID struct {
	Index int    `json:"index"`
	GID   string `json:"gid"`
	Type  string `json:"type"`
}

// Marshal is d's JSON document (version Version), after the checks Unmarshal makes.
func (d Description) Marshal() ([]byte, error) {
	w := wireDoc{Version: Version, Name: d.Name, Instance: d.Instance, Group: d.Group, GorpingVersion: d.GorpingVersion,
		ResponderPort: int(d.ResponderPort), Rails: []wireRail{}}
	for _, r := range d.Rails {
		wr := wireRail{Device: r.Device, Port: r.Port, Netdev: r.Netdev, LinkLayer: r.LinkLayer,
			ActiveMTU: r.ActiveMTU, Addresses: []string{}, GIDs: []wireGID{}}
		for _, a := range r.Addresses {
			wr.Addresses = append(wr.Addresses, a.String())
		}
		for _, g := range r.GIDs {
			wr.GIDs = append(wr.GIDs, wireGID{g.Index, g.GID.String(), g.Type})
		}
		w.Rails = append(w.Rails, wr)
	}
	if _, err := w.check(minor); err != nil {
		return nil, err
	}
	return json.Marshal(w)
}

// Decode reads one document from r (a peer's HTTP response body), at most MaxSize bytes.
func Decode(r io.Reader) (Description, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return Description{}, fmt.Errorf("agent description: %w", err)
	}
	return Unmarshal(data)
}

// Unmarshal parses and checks a document. Its errors say what is wrong and where
// ("agent description: rails[1].addresses[0]: ..."); it never allocates much more than
// the document's size, which is at most MaxSize.
func Unmarshal(data []byte) (Description, error) {
	d, err := unmarshal(data)
	if err != nil {
		return Description{}, fmt.Errorf("agent description: %w", err)
	}
	return d, nil
}

func unmarshal(data []byte) (Description, error) {
	if len(data) > MaxSize {
		return Description{}, fmt.Errorf("larger than %d KiB", MaxSize>>10)
	}
	var head struct {
		Version *string `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return Description{}, fmt.Errorf("not a description: %w", err)
	}
	if head.Version == nil {
		return Description{}, errors.New(`no "version"`)
	}
	if err := prescan(data); err != nil {
		return Description{}, err
	}
	docMinor, err := parseVersion(*head.Version)
	if err != nil {
		return Description{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if docMinor <= minor {
		// A document of a version this package knows has no field it does not know.
		dec.DisallowUnknownFields()
	}
	var w wireDoc
	if err := dec.Decode(&w); err != nil {
		if docMinor <= minor && strings.HasPrefix(err.Error(), "json: unknown field") {
			return Description{}, fmt.Errorf("version %s: %s (a %d.%d document has none; only later minor versions add fields)",
				*head.Version, strings.TrimPrefix(err.Error(), "json: "), major, docMinor)
		}
		return Description{}, fmt.Errorf("version %s: %w", *head.Version, err)
	}
	return w.check(docMinor)
}

// Shape limits of any document, whatever its version: they bound what decoding it can
// allocate before its fields are checked (unknown fields included).
const (
	maxArray  = MaxGIDs // elements of any array
	maxFields = 32      // members of any object
	maxDepth  = 8       // nesting of arrays and objects
	maxString = 1024    // bytes of any string
)

// prescan walks the document's tokens and refuses it at the first array, object, string
// or nesting past the shape limits, naming where.
func prescan(data []byte) error {
	type frame struct {
		array bool
		n     int    // elements, or keys and values
		key   string // the object's current key
	}
	var stack []frame
	path := func(depth int) string { // where stack[:depth] is
		var b strings.Builder
		for i, f := range stack[:depth] {
			switch {
			case f.array:
				fmt.Fprintf(&b, "[%d]", f.n-1)
			case i > 0:
				b.WriteString("." + f.key)
			default:
				b.WriteString(f.key)
			}
		}
		return b.String()
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("not a description: %w", err)
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		if len(stack) > 0 {
			f := &stack[len(stack)-1]
			f.n++
			switch {
			case f.array && f.n > maxArray:
				return fmt.Errorf("%s: an array of more than %d elements", path(len(stack)-1), maxArray)
			case !f.array && f.n > 2*maxFields:
				return fmt.Errorf("%s: an object of more than %d fields", path(len(stack)-1), maxFields)
			case !f.array && f.n%2 == 1:
				if f.key, _ = tok.(string); len(f.key) > 64 {
					return fmt.Errorf("%s: a field name of %d bytes", path(len(stack)-1), len(f.key))
				}
			}
		}
		switch v := tok.(type) {
		case json.Delim: // '{' or '['
			if len(stack) == maxDepth {
				return fmt.Errorf("%s: nested deeper than %d", path(len(stack)), maxDepth)
			}
			stack = append(stack, frame{array: v == '['})
		case string:
			if len(v) > maxString {
				return fmt.Errorf("%s: a string of %d bytes (at most %d)", path(len(stack)), len(v), maxString)
			}
		}
	}
}

// parseVersion checks "MAJOR.MINOR" and returns the minor version.
func parseVersion(v string) (int, error) {
	ma, mi, ok := strings.Cut(v, ".")
	maj, err1 := strconv.ParseUint(ma, 10, 16)
	min, err2 := strconv.ParseUint(mi, 10, 16)
	if !ok || err1 != nil || err2 != nil || len(v) > 11 {
		return 0, fmt.Errorf("version %.20q: not MAJOR.MINOR", v)
	}
	if maj != major {
		return 0, fmt.Errorf("version %s: this gorping reads version %d.x only (a new major version changes the meaning of fields: upgrade gorping on this host, or run the same major version everywhere)", v, major)
	}
	return int(min), nil
}

// check validates w and converts it. docMinor is the document's minor version: one
// newer than this package may carry link layers and GID types this package does not
// know, which it keeps (pairing passes them over); an older or equal one may not.
func (w wireDoc) check(docMinor int) (Description, error) {
	newer := docMinor > minor
	d := Description{Version: w.Version, Name: w.Name, Instance: w.Instance, Group: w.Group, GorpingVersion: w.GorpingVersion}
	if err := pinglist.CheckHost(w.Name); err != nil {
		return d, fmt.Errorf("name: %w", err)
	}
	if w.Instance != "" {
		if docMinor < 1 {
			return d, fmt.Errorf(`version %s: unknown field "instance" (a %d.%d document has none; only later minor versions add fields)`, w.Version, major, docMinor)
		}
		if err := checkText(w.Instance, maxInstance); err != nil {
			return d, fmt.Errorf("instance: %w", err)
		}
	}
	if err := pinglist.CheckGroup(w.Group); err != nil {
		return d, fmt.Errorf("group: %w", err)
	}
	if err := checkText(w.GorpingVersion, maxVersionLen); err != nil {
		return d, fmt.Errorf("gorping_version: %w", err)
	}
	if w.ResponderPort < 1 || w.ResponderPort > 65535 {
		return d, fmt.Errorf("responder_port: %d is not a port (1..65535)", w.ResponderPort)
	}
	d.ResponderPort = uint16(w.ResponderPort)
	if len(w.Rails) > MaxRails {
		return d, fmt.Errorf("rails: %d rails (at most %d)", len(w.Rails), MaxRails)
	}
	ports := map[string]int{}
	addrs := map[netip.Addr]string{}
	for i, wr := range w.Rails {
		at := fmt.Sprintf("rails[%d]", i)
		r := Rail{Device: wr.Device, Port: wr.Port, Netdev: wr.Netdev, LinkLayer: wr.LinkLayer, ActiveMTU: wr.ActiveMTU}
		if err := checkText(wr.Device, maxDeviceLen); err != nil {
			return d, fmt.Errorf("%s.device: %w", at, err)
		}
		if wr.Port < 1 || wr.Port > maxPort {
			return d, fmt.Errorf("%s.port: %d is not a port number (1..%d)", at, wr.Port, maxPort)
		}
		key := wr.Device + "/" + strconv.Itoa(wr.Port)
		if j, dup := ports[key]; dup {
			return d, fmt.Errorf("%s: %s port %d is also rails[%d]", at, wr.Device, wr.Port, j)
		}
		ports[key] = i
		if wr.Netdev != "" {
			if err := checkText(wr.Netdev, maxNetdevLen); err != nil {
				return d, fmt.Errorf("%s.netdev: %w", at, err)
			}
		}
		switch wr.LinkLayer {
		case LinkEthernet, LinkInfiniBand:
		default:
			if !newer || checkText(wr.LinkLayer, 32) != nil {
				return d, fmt.Errorf("%s.link_layer: %.40q is not %q or %q", at, wr.LinkLayer, LinkEthernet, LinkInfiniBand)
			}
		}
		if m := wr.ActiveMTU; m != 0 && (m < 256 || m > 4096 || m&(m-1) != 0) {
			return d, fmt.Errorf("%s.active_mtu: %d is not an RDMA MTU (256, 512, 1024, 2048 or 4096; 0 if unknown)", at, m)
		}
		if len(wr.Addresses) > MaxAddresses {
			return d, fmt.Errorf("%s.addresses: %d addresses (at most %d)", at, len(wr.Addresses), MaxAddresses)
		}
		for j, s := range wr.Addresses {
			p, err := netip.ParsePrefix(s)
			if err != nil || p.Addr().Zone() != "" || p.Addr().Is4In6() {
				return d, fmt.Errorf("%s.addresses[%d]: %.60q is not ADDRESS/PREFIX-LENGTH (\"10.0.1.5/24\", \"fd00:1::5/64\")", at, j, s)
			}
			if a := p.Addr(); a.IsUnspecified() || a.IsMulticast() {
				return d, fmt.Errorf("%s.addresses[%d]: %s is not a host address", at, j, a)
			}
			if other, dup := addrs[p.Addr()]; dup {
				return d, fmt.Errorf("%s.addresses[%d]: %s is also on %s", at, j, p.Addr(), other)
			}
			addrs[p.Addr()] = at
			r.Addresses = append(r.Addresses, p)
		}
		if len(wr.GIDs) > MaxGIDs {
			return d, fmt.Errorf("%s.gids: %d GIDs (at most %d)", at, len(wr.GIDs), MaxGIDs)
		}
		for j, wg := range wr.GIDs {
			g, err := netip.ParseAddr(wg.GID)
			if err != nil || !g.Is6() || g.Zone() != "" {
				return d, fmt.Errorf("%s.gids[%d].gid: %.60q is not a GID (16 bytes in IPv6 notation)", at, j, wg.GID)
			}
			if wg.Index < 0 || wg.Index >= maxGIDIndex {
				return d, fmt.Errorf("%s.gids[%d].index: %d is out of range", at, j, wg.Index)
			}
			switch wg.Type {
			case GIDTypeIB, GIDTypeRoCEv1, GIDTypeRoCEv2:
			default:
				if !newer || checkText(wg.Type, 32) != nil {
					return d, fmt.Errorf("%s.gids[%d].type: %.40q is not %q, %q or %q", at, j, wg.Type, GIDTypeIB, GIDTypeRoCEv1, GIDTypeRoCEv2)
				}
			}
			r.GIDs = append(r.GIDs, GID{Index: wg.Index, GID: g, Type: wg.Type})
		}
		d.Rails = append(d.Rails, r)
	}
	return d, nil
}

// checkText: 1 to max bytes of visible ASCII (device and interface names, versions).
func checkText(s string, max int) error {
	if s == "" {
		return errors.New("empty")
	}
	if len(s) > max {
		return fmt.Errorf("%.20q... is %d bytes long (at most %d)", s, len(s), max)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("%q: byte %d is not visible ASCII", s, i+1)
		}
	}
	return nil
}

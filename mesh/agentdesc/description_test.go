package agentdesc

import (
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// node is a description with n RoCE rails: rail i is mlx5_i on 10.0.i.host/24 and
// fd00:i::host/64, with both RoCE v2 GIDs.
func node(name string, host, n int) Description {
	d := Description{Version: Version, Name: name, Group: "tor-a", GorpingVersion: "v1.4.0", ResponderPort: 7174}
	for i := 0; i < n; i++ {
		v4 := netip.MustParseAddr(fmt.Sprintf("10.0.%d.%d", i, host))
		v6 := netip.MustParseAddr(fmt.Sprintf("fd00:%d::%d", i, host))
		d.Rails = append(d.Rails, Rail{
			Device: fmt.Sprintf("mlx5_%d", i), Port: 1, Netdev: fmt.Sprintf("ens%df0", i),
			LinkLayer: LinkEthernet, ActiveMTU: 4096,
			Addresses: []netip.Prefix{netip.PrefixFrom(v4, 24), netip.PrefixFrom(v6, 64)},
			GIDs: []GID{
				{Index: 0, GID: netip.MustParseAddr(fmt.Sprintf("fe80::%d", host)), Type: GIDTypeRoCEv1},
				{Index: 3, GID: netip.AddrFrom16(v4.As16()), Type: GIDTypeRoCEv2},
				{Index: 5, GID: v6, Type: GIDTypeRoCEv2},
			},
		})
	}
	return d
}

func TestRoundTrip(t *testing.T) {
	d := node("node1", 5, 8)
	data, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, d) {
		t.Fatalf("round trip:\n%+v\n%+v", got, d)
	}
	if !bytes.Contains(data, []byte(`"gid":"::ffff:10.0.0.5","type":"RoCE v2"`)) || !bytes.Contains(data, []byte(`"addresses":["10.0.0.5/24","fd00::5/64"]`)) {
		t.Errorf("wire form: %s", data)
	}
	t.Logf("figures: an 8-rail description is %d bytes", len(data))
	if m := d.Member(); m.Host != "node1" || m.Group != "tor-a" {
		t.Errorf("Member %v", m)
	}
	empty := Description{Name: "n", GorpingVersion: "dev", ResponderPort: 1}
	data, _ = empty.Marshal()
	if !bytes.Contains(data, []byte(`"rails":[]`)) {
		t.Errorf("no rails: %s", data)
	}
}

// doc is a valid 1.0 document with edit applied to its text.
func doc(edit func(string) string) string {
	return edit(`{"version":"1.0","name":"node2","group":"g","gorping_version":"v1","responder_port":7174,` +
		`"rails":[{"device":"mlx5_0","port":1,"netdev":"eth1","link_layer":"Ethernet","active_mtu":1024,` +
		`"addresses":["10.0.1.6/24"],"gids":[{"index":1,"gid":"::ffff:10.0.1.6","type":"RoCE v2"}]}]}`)
}

func replace(old, new string) func(string) string {
	return func(s string) string {
		if !strings.Contains(s, old) {
			panic(old)
		}
		return strings.Replace(s, old, new, 1)
	}
}

func same(s string) string { return s }

// TestUnmarshalBadInput is what a peer may send: each is refused with a reason that
// names the field, or (newer minor versions) accepted.
func TestUnmarshalBadInput(t *testing.T) {
	many := func(n int, item string) string { return strings.TrimSuffix(strings.Repeat(item+",", n), ",") }
	for _, c := range []struct {
		name, doc, want string // want "" = accepted
	}{
		{"valid", doc(same), ""},
		{"not JSON", "{", "not a description: unexpected end of JSON input"},
		{"array", "[]", "not a description"},
		{"no version", `{"name":"x"}`, `no "version"`},
		{"version a number", doc(replace(`"1.0"`, `1.0`)), "not a description"},
		{"major 2", doc(replace(`"1.0"`, `"2.0"`)), "version 2.0: this gorping reads version 1.x only"},
		{"major 0", doc(replace(`"1.0"`, `"0.9"`)), "version 0.9: this gorping reads version 1.x only"},
		{"not MAJOR.MINOR", doc(replace(`"1.0"`, `"1"`)), `version "1": not MAJOR.MINOR`},
		{"junk version", doc(replace(`"1.0"`, `"1.0.0"`)), `not MAJOR.MINOR`},
		{"unknown field in 1.0", doc(replace(`"name"`, `"colour":"red","name"`)), `version 1.0: unknown field "colour" (a 1.0 document has none`},
		{"unknown rail field in 1.0", doc(replace(`"port":1`, `"port":1,"speed":400`)), `unknown field "speed"`},
		{"unknown fields in 1.2", replace(`"1.0"`, `"1.2"`)(doc(replace(`"port":1`, `"port":1,"speed":400,"x":{"y":[1,2,{"z":null}]}`))), ""},
		{"instance in 1.0", doc(replace(`"name"`, `"instance":"ab12","name"`)), `version 1.0: unknown field "instance" (a 1.0 document has none`},
		{"instance in 1.1", replace(`"1.0"`, `"1.1"`)(doc(replace(`"name"`, `"instance":"ab12","name"`))), ""},
		{"instance with a space", replace(`"1.0"`, `"1.1"`)(doc(replace(`"name"`, `"instance":"ab 12","name"`))), `instance: "ab 12": byte 3 is not visible ASCII`},
		{"instance too long", replace(`"1.0"`, `"1.1"`)(doc(replace(`"name"`, `"instance":"`+strings.Repeat("a", 65)+`","name"`))), `instance: "aaaaaaaaaaaaaaaaaaaa"... is 65 bytes long (at most 64)`},
		{"unknown link layer in 1.0", doc(replace(`"Ethernet"`, `"OmniPath"`)), `rails[0].link_layer: "OmniPath" is not "Ethernet" or "InfiniBand"`},
		{"unknown link layer in 1.3", replace(`"1.0"`, `"1.3"`)(doc(replace(`"Ethernet"`, `"OmniPath"`))), ""},
		{"unknown GID type in 1.0", doc(replace(`"RoCE v2"`, `"RoCE v3"`)), `rails[0].gids[0].type: "RoCE v3" is not`},
		{"empty name", doc(replace(`"node2"`, `""`)), "name: empty host"},
		{"name with a space", doc(replace(`"node2"`, `"node 2"`)), `name: host "node 2": byte 5 is ' '`},
		{"name too long", doc(replace(`"node2"`, `"`+strings.Repeat("n", 300)+`"`)), "is 300 bytes long (at most 253)"},
		{"name with a newline", doc(replace(`"node2"`, `"node\n2"`)), `byte 5 is 0x0a`},
		{"bad group", doc(replace(`"group":"g"`, `"group":"a#b"`)), `group: group "a#b"`},
		{"no gorping version", doc(replace(`"v1"`, `""`)), "gorping_version: empty"},
		{"responder port 0", doc(replace(`7174`, `0`)), "responder_port: 0 is not a port"},
		{"responder port 70000", doc(replace(`7174`, `70000`)), "responder_port: 70000 is not a port"},
		{"responder port a string", doc(replace(`7174`, `"7174"`)), "cannot unmarshal string into Go struct field wireDoc.responder_port of type int"},
		{"port 1.5", doc(replace(`"port":1`, `"port":1.5`)), "cannot unmarshal number 1.5"},
		{"port 0", doc(replace(`"port":1`, `"port":0`)), "rails[0].port: 0 is not a port number (1..255)"},
		{"port 256", doc(replace(`"port":1`, `"port":256`)), "rails[0].port: 256"},
		{"huge port", doc(replace(`"port":1`, `"port":1e300`)), "cannot unmarshal number 1e300"},
		{"empty device", doc(replace(`"mlx5_0"`, `""`)), "rails[0].device: empty"},
		{"long netdev", doc(replace(`"eth1"`, `"`+strings.Repeat("e", 16)+`"`)), "rails[0].netdev: "},
		{"MTU 1500", doc(replace(`1024`, `1500`)), "rails[0].active_mtu: 1500 is not an RDMA MTU"},
		{"bad address", doc(replace(`"10.0.1.6/24"`, `"10.0.1.300/24"`)), `rails[0].addresses[0]: "10.0.1.300/24" is not ADDRESS/PREFIX-LENGTH`},
		{"address without prefix", doc(replace(`"10.0.1.6/24"`, `"10.0.1.6"`)), `rails[0].addresses[0]: "10.0.1.6" is not`},
		{"zoned address", doc(replace(`"10.0.1.6/24"`, `"fe80::1%eth1/64"`)), `"fe80::1%eth1/64" is not`},
		{"multicast address", doc(replace(`"10.0.1.6/24"`, `"224.0.0.1/4"`)), "224.0.0.1 is not a host address"},
		{"4-byte GID", doc(replace(`"::ffff:10.0.1.6"`, `"10.0.1.6"`)), `rails[0].gids[0].gid: "10.0.1.6" is not a GID`},
		{"GID index -1", doc(replace(`"index":1`, `"index":-1`)), "rails[0].gids[0].index: -1 is out of range"},
		{"two rails, one port", doc(replace(`]}]}`, `]},{"device":"mlx5_0","port":1,"link_layer":"Ethernet","addresses":[],"gids":[]}]}`)), "rails[1]: mlx5_0 port 1 is also rails[0]"},
		{"one address, two rails", doc(replace(`]}]}`, `]},{"device":"mlx5_1","port":1,"link_layer":"Ethernet","addresses":["10.0.1.6/16"],"gids":[]}]}`)), "rails[1].addresses[0]: 10.0.1.6 is also on rails[0]"},
		{"33 rails", doc(replace(`"rails":[`, `"rails":[`+many(32, `{"device":"d","port":1,"link_layer":"Ethernet"}`)+`,`)), "rails: 33 rails (at most 32)"},
		{"17 addresses", doc(replace(`"addresses":[`, `"addresses":[`+many(16, `"10.9.0.1/24"`)+`,`)), "rails[0].addresses: 17 addresses (at most 16)"},
		{"129 GIDs", doc(replace(`"gids":[`, `"gids":[`+many(128, `{"index":1,"gid":"::1","type":"IB"}`)+`,`)), "rails[0].gids: an array of more than 128 elements"},
		{"data after", doc(same) + `{}`, "invalid character '{' after top-level value"},
		{"a long array", doc(replace(`"gids":[`, `"gids":[`+many(128, `1`)+`,`)), "rails[0].gids: an array of more than 128 elements"},
		{"many fields in 1.2", replace(`"1.0"`, `"1.2"`)(doc(replace(`"port":1`, `"port":1,`+many(30, `"f":1`)))), "rails[0]: an object of more than 32 fields"},
		{"deep in 1.2", replace(`"1.0"`, `"1.2"`)(doc(replace(`"port":1`, `"port":1,"x":`+strings.Repeat("[", 10)+strings.Repeat("]", 10)))), "rails[0].x[0][0][0][0][0]: nested deeper than 8"},
		{"a long string in 1.2", replace(`"1.0"`, `"1.2"`)(doc(replace(`"port":1`, `"port":1,"note":"`+strings.Repeat("n", 2000)+`"`))), "rails[0].note: a string of 2000 bytes"},
		{"too large", doc(replace(`"name"`, `"x":"`+strings.Repeat("x", MaxSize)+`","name"`)), "larger than 64 KiB"},
		{"null rails", doc(replace(`"rails":[`, `"rails":null,"r":[`)), `unknown field "r"`},
	} {
		_, err := Unmarshal([]byte(c.doc))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		case err != nil && !strings.HasPrefix(err.Error(), "agent description: "):
			t.Errorf("%s: %v: no context", c.name, err)
		}
	}
	d, err := Unmarshal([]byte(replace(`"1.0"`, `"1.3"`)(doc(replace(`"Ethernet"`, `"OmniPath"`)))))
	if err != nil || d.Rails[0].LinkLayer != "OmniPath" || d.Version != "1.3" {
		t.Errorf("1.3 with a new link layer: %+v %v: want it kept", d, err)
	}
}

// endless is a peer that never stops sending.
type endless struct{ n int }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	e.n += len(p)
	return len(p), nil
}

func TestDecodeBounds(t *testing.T) {
	r := &endless{}
	_, err := Decode(r)
	if err == nil || !strings.Contains(err.Error(), "larger than 64 KiB") {
		t.Fatalf("endless body: %v", err)
	}
	if r.n > MaxSize+64<<10 {
		t.Errorf("read %d bytes of an endless body, want about %d", r.n, MaxSize)
	}
	if d, err := Decode(strings.NewReader(doc(same))); err != nil || d.Name != "node2" {
		t.Errorf("Decode: %v %v", d, err)
	}
	if _, err := Decode(io.MultiReader(strings.NewReader(doc(same)[:20]), errReader{})); err == nil || !strings.Contains(err.Error(), "connection reset") {
		t.Errorf("a failing body: %v", err)
	}
	// The largest allocation a document can cause: as many tiny elements as fit.
	small := `{"version":"1.1","name":"n","gorping_version":"v","responder_port":1,"rails":[` +
		strings.TrimSuffix(strings.Repeat(`{},`, (MaxSize-200)/3), ",") + `]}`
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = Unmarshal([]byte(small))
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "rails: an array of more than 128 elements") {
		t.Errorf("21,000 rails: %v", err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	if alloc > 4*MaxSize {
		t.Errorf("a %d-byte document allocated %d bytes", len(small), alloc)
	}
	t.Logf("figures: a %d-byte document of 21,000 empty rails allocates %d KiB while refused", len(small), alloc>>10)
	// Within the shape limits: 128 rails of up to 128 empty GIDs, as many as fit.
	var b strings.Builder
	b.WriteString(`{"version":"1.0","name":"n","gorping_version":"v","responder_port":1,"rails":[`)
	for i := 0; i < 128; i++ {
		b.WriteString(`{"gids":[` + strings.TrimSuffix(strings.Repeat(`{},`, 127), ",") + `]},`)
	}
	wide := strings.TrimSuffix(b.String(), ",") + `]}`
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = Unmarshal([]byte(wide))
	runtime.ReadMemStats(&after)
	alloc = after.TotalAlloc - before.TotalAlloc
	if err == nil || !strings.Contains(err.Error(), "rails: 128 rails (at most 32)") || alloc > 64*MaxSize {
		t.Errorf("a %d-byte document of empty GIDs: %v, allocated %d bytes", len(wide), err, alloc)
	}
	t.Logf("figures: a %d-byte document of 127-GID rails allocates %d KiB while refused (%v)", len(wide), alloc>>10, err)
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, fmt.Errorf("read: connection reset by peer") }

// FuzzUnmarshal: any input is refused with a reason or accepted; an accepted document
// that Marshal writes again reads back the same.
func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte(doc(same)))
	d, _ := node("n", 1, 2).Marshal()
	f.Add(d)
	f.Add([]byte(doc(replace(`"1.0"`, `"1.9"`))))
	f.Add([]byte(`{"version":"1.0"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Unmarshal(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "agent description: ") {
				t.Fatalf("error without context: %v", err)
			}
			return
		}
		again, err := d.Marshal()
		if err != nil {
			return // a newer minor version's values, which this version does not write
		}
		d2, err := Unmarshal(again)
		d.Version = Version
		if err != nil || !reflect.DeepEqual(d, d2) {
			t.Fatalf("written again: %v\n%+v\n%+v", err, d2, d)
		}
	})
}

// TestSameAgent: an agent is known by its instance; a 1.0 description (no instance) by
// its name and a GID in common.
func TestSameAgent(t *testing.T) {
	gid := func(s string) []Rail {
		return []Rail{{Device: "rxe0", Port: 1, GIDs: []GID{{Index: 1, GID: netip.MustParseAddr(s), Type: GIDTypeRoCEv2}}}}
	}
	me := Description{Name: "node", Instance: "aaaa", Rails: gid("::ffff:10.0.0.1")}
	for _, c := range []struct {
		name  string
		other Description
		same  bool
	}{
		{"same instance", Description{Name: "node", Instance: "aaaa"}, true},
		{"same name, another instance", Description{Name: "node", Instance: "bbbb", Rails: gid("::ffff:10.0.0.1")}, false},
		{"another name, same instance", Description{Name: "other", Instance: "aaaa"}, true},
		{"1.0, same name and GID", Description{Name: "node", Rails: gid("::ffff:10.0.0.1")}, true},
		{"1.0, same name, other GIDs", Description{Name: "node", Rails: gid("::ffff:10.0.0.2")}, false},
		{"1.0, same name, no GIDs", Description{Name: "node"}, true},
		{"1.0, another name", Description{Name: "other", Rails: gid("::ffff:10.0.0.1")}, false},
	} {
		if got := c.other.SameAgent(me); got != c.same {
			t.Errorf("%s: SameAgent %v, want %v", c.name, got, c.same)
		}
		if got := me.SameAgent(c.other); got != c.same {
			t.Errorf("%s (the other way): SameAgent %v, want %v", c.name, got, c.same)
		}
	}
	a, b := NewInstance(), NewInstance()
	if len(a) != 16 || a == b {
		t.Errorf("NewInstance: %q, %q: want two different 16-digit IDs", a, b)
	}
	doc, err := Description{Version: Version, Name: "node", Instance: a, GorpingVersion: "v1", ResponderPort: 7174}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	d, err := Unmarshal(doc)
	if err != nil || d.Instance != a || d.Version != "1.1" {
		t.Errorf("round trip of %s: %+v %v", doc, d, err)
	}
}

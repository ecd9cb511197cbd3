// Command abigen generates the Go mirrors of kernel ABI structs, their sizes and enum
// tables from the uapi headers (make generate). It compiles the headers with gcc -g and
// reads the layout from the DWARF of the object, so every offset, size and enum value is
// the compiler's, as cgo -godefs does; a spec file per package says which structs and
// enums to take and what to call them. Development tooling: gcc and the headers are
// needed here, never by the product, which only contains the generated files.
//
//	go run ./internal/cmd/abigen -spec uverbs/abi.spec    writes uverbs/abi_gen.go
//	go run ./internal/cmd/abigen -check uverbs/abi.spec   fails if that file is not current
//
// Spec lines (# starts a comment):
//
//	package NAME                        the Go package
//	include HEADER                      a header to compile (<HEADER>)
//	struct GONAME CNAME                 struct CNAME as type GONAME
//	  type MEMBER GOTYPE                  member MEMBER as GOTYPE (same size), e.g. [8]byte
//	  union MEMBER ARM [TYPE]             union member MEMBER as its member ARM, padded (an
//	                                      anonymous struct ARM as type TYPE)
//	  name MEMBER GONAME                  member MEMBER's Go field name
//	                                    (an enum named @VALUE is the one that has VALUE,
//	                                    for the anonymous enums of the headers)
//	enum GONAME TYPE CENUM PREFIX [lower] [omit=NAME]...
//	                                    map[TYPE]string of enum CENUM's names, PREFIX cut,
//	                                    lower-cased with lower, without the omitted ones
//	const PREFIX CENUM CPREFIX          a constant PREFIX+CamelCase(name-CPREFIX) per value
//	convert FUNC FROM TO [BACK]         FUNC(*FROM) TO (and BACK(*TO) FROM) copies the members listed, between a
//	  field CMEMBER FIELD [TOPUB TOWIRE]  generated struct and a public type: CMEMBER is the
//	                                    public FIELD, converted with TOPUB/TOWIRE if given
//
// Struct members become fields named in CamelCase with the usual Go initialisms (qp_num
// → QPNum); holes become _ fields; a flexible array at the end is left out (the driver
// data that follows a core struct); a nested named struct becomes a type of its own.
package main

import (
	"bufio"
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	spec := flag.String("spec", "", "spec file; writes abi_gen.go next to it")
	check := flag.String("check", "", "spec file; fails if abi_gen.go next to it is not what it generates")
	flag.Parse()
	path, write := *spec, true
	if *check != "" {
		path, write = *check, false
	}
	if path == "" {
		fmt.Fprintln(os.Stderr, "usage: abigen -spec FILE | -check FILE")
		os.Exit(2)
	}
	if err := run(path, write); err != nil {
		fmt.Fprintf(os.Stderr, "abigen: %v\n", err)
		os.Exit(1)
	}
}

func run(specPath string, write bool) error {
	sp, err := parseSpec(specPath)
	if err != nil {
		return err
	}
	d, err := compile(sp.includes)
	if err != nil {
		return err
	}
	src, err := generate(sp, d, specPath)
	if err != nil {
		return err
	}
	out := filepath.Join(filepath.Dir(specPath), "abi_gen.go")
	if write {
		return os.WriteFile(out, src, 0o644)
	}
	old, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	if !bytes.Equal(old, src) {
		return fmt.Errorf("%s is not what %s generates from this machine's headers: run make generate (and review the diff)", out, specPath)
	}
	return nil
}

// --- spec

type structSpec struct {
	goName, cName string
	types         map[string]string // member → Go type
	unions        map[string]string // union member → arm
	armTypes      map[string]string // union member → Go type name of an anonymous arm struct
	names         map[string]string // member → Go field name
}

type enumSpec struct {
	goName, typ, cEnum, prefix string
	lower                      bool
	omit                       map[string]bool
}

type constSpec struct{ prefix, cEnum, cPrefix string }

type convSpec struct {
	fn, from, to string
	fields       map[string]convField // C member → field of the public side
}

// convField is the public side of one converted member: its field, and for a member
// whose types need more than a conversion, the functions from the wire (toPub) and to it.
type convField struct{ name, toPub, toWire string }

type spec struct {
	pkg      string
	includes []string
	structs  []*structSpec
	enums    []enumSpec
	consts   []constSpec
	convs    []*convSpec
}

func parseSpec(path string) (*spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sp := &spec{}
	var cur *structSpec
	var conv *convSpec
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		w := strings.Fields(line)
		if len(w) == 0 {
			continue
		}
		bad := func() error { return fmt.Errorf("%s:%d: bad line %q", path, n, strings.TrimSpace(line)) }
		switch {
		case w[0] == "package" && len(w) == 2:
			sp.pkg = w[1]
		case w[0] == "include" && len(w) == 2:
			sp.includes = append(sp.includes, w[1])
		case w[0] == "struct" && len(w) == 3:
			cur, conv = &structSpec{goName: w[1], cName: w[2], types: map[string]string{}, unions: map[string]string{}, armTypes: map[string]string{}, names: map[string]string{}}, nil
			sp.structs = append(sp.structs, cur)
		case w[0] == "type" && len(w) == 3 && cur != nil:
			cur.types[w[1]] = w[2]
		case w[0] == "union" && (len(w) == 3 || len(w) == 4) && cur != nil:
			if w[1] == "_" {
				w[1] = "_" + w[2] // anonymous unions are told apart by their arm
			}
			cur.unions[w[1]] = w[2]
			if len(w) == 4 {
				cur.armTypes[w[1]] = w[3]
			}
		case w[0] == "name" && len(w) == 3 && cur != nil:
			cur.names[w[1]] = w[2]
		case w[0] == "enum" && len(w) >= 5:
			e := enumSpec{goName: w[1], typ: w[2], cEnum: w[3], prefix: w[4], omit: map[string]bool{}}
			for _, o := range w[5:] {
				switch {
				case o == "lower":
					e.lower = true
				case strings.HasPrefix(o, "omit="):
					e.omit[strings.TrimPrefix(o, "omit=")] = true
				default:
					return nil, bad()
				}
			}
			sp.enums = append(sp.enums, e)
			cur, conv = nil, nil
		case w[0] == "const" && len(w) == 4:
			sp.consts = append(sp.consts, constSpec{prefix: w[1], cEnum: w[2], cPrefix: w[3]})
			cur, conv = nil, nil
		case w[0] == "convert" && (len(w) == 4 || len(w) == 5):
			conv, cur = &convSpec{fn: w[1], from: w[2], to: w[3], fields: map[string]convField{}}, nil
			sp.convs = append(sp.convs, conv)
			if len(w) == 5 { // and back, with the same fields
				sp.convs = append(sp.convs, &convSpec{fn: w[4], from: w[3], to: w[2], fields: conv.fields})
			}
		case w[0] == "field" && (len(w) == 3 || len(w) == 5) && conv != nil:
			f := convField{name: w[2]}
			if len(w) == 5 {
				f.toPub, f.toWire = w[3], w[4]
			}
			conv.fields[w[1]] = f
		default:
			return nil, bad()
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if sp.pkg == "" || len(sp.includes) == 0 {
		return nil, fmt.Errorf("%s: no package or include", path)
	}
	return sp, nil
}

// --- DWARF

type layout struct {
	d       *dwarf.Data
	structs map[string]*dwarf.StructType // "struct x" / "union x" by tag
	enums   map[string]*dwarf.EnumType
}

// compile builds an object from the headers with every type's debug information kept.
func compile(includes []string) (*layout, error) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	dir, err := os.MkdirTemp("", "abigen")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var src strings.Builder
	for _, h := range includes {
		fmt.Fprintf(&src, "#include <%s>\n", h)
	}
	c, o := filepath.Join(dir, "abi.c"), filepath.Join(dir, "abi.o")
	if err := os.WriteFile(c, []byte(src.String()), 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.Command(cc, "-std=gnu11", "-g", "-fno-eliminate-unused-debug-types", "-c", "-o", o, c).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s: %v\n%s", cc, err, out)
	}
	f, err := elf.Open(o)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d, err := f.DWARF()
	if err != nil {
		return nil, err
	}
	l := &layout{d: d, structs: map[string]*dwarf.StructType{}, enums: map[string]*dwarf.EnumType{}}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			return nil, err
		}
		if e == nil {
			break
		}
		if e.Tag != dwarf.TagStructType && e.Tag != dwarf.TagUnionType && e.Tag != dwarf.TagEnumerationType {
			continue
		}
		if e.Val(dwarf.AttrDeclaration) != nil {
			continue
		}
		t, err := d.Type(e.Offset)
		if err != nil {
			return nil, err
		}
		switch t := t.(type) {
		case *dwarf.StructType:
			if t.StructName != "" && !t.Incomplete {
				l.structs[t.Kind+" "+t.StructName] = t
			}
		case *dwarf.EnumType:
			if t.EnumName != "" {
				l.enums[t.EnumName] = t
			}
			for _, v := range t.Val { // "@VALUE" names the (maybe anonymous) enum of VALUE
				l.enums["@"+v.Name] = t
			}
		}
	}
	return l, nil
}

// --- generation

type gen struct {
	sp      *spec
	l       *layout
	goNames map[string]string // C struct tag → Go type name
	done    map[string]bool
	queue   []*structSpec // nested structs to emit
	buf     bytes.Buffer
	sizes   []string // sizeof constants
	extra   []string // named types of union arms
	fields  map[string]map[string]genField
}

// genField is one generated field: Go name and type, for the conversions.
type genField struct{ name, typ string }

func generate(sp *spec, l *layout, specPath string) ([]byte, error) {
	g := &gen{sp: sp, l: l, goNames: map[string]string{}, done: map[string]bool{}, fields: map[string]map[string]genField{}}
	for _, s := range sp.structs {
		g.goNames[s.cName] = s.goName
	}
	fmt.Fprintf(&g.buf, "// Code generated by internal/cmd/abigen from %s; DO NOT EDIT.\n", filepath.Base(specPath))
	fmt.Fprintf(&g.buf, "// Headers: %s.\n\npackage %s\n\nimport \"unsafe\"\n\n", strings.Join(sp.includes, ", "), sp.pkg)
	g.queue = append(g.queue, sp.structs...)
	for len(g.queue) > 0 {
		s := g.queue[0]
		g.queue = g.queue[1:]
		if err := g.emitStruct(s); err != nil {
			return nil, err
		}
	}
	for _, e := range g.extra {
		g.buf.WriteString(e)
	}
	if len(g.sizes) > 0 {
		g.buf.WriteString("// Sizes, as the compiler lays the C structs out.\nconst (\n")
		for _, s := range g.sizes {
			g.buf.WriteString(s)
		}
		g.buf.WriteString(")\n\n// The Go layouts have the C sizes (offsets: make abicheck).\nvar (\n")
		for _, s := range sp.structs {
			if g.done[s.cName] {
				fmt.Fprintf(&g.buf, "\t_ = [1]struct{}{}[unsafe.Sizeof(%s{})-sizeof%s]\n", s.goName, upperFirst(s.goName))
			}
		}
		g.buf.WriteString(")\n\n")
	}
	for _, e := range sp.enums {
		if err := g.emitEnum(e); err != nil {
			return nil, err
		}
	}
	for _, c := range sp.consts {
		if err := g.emitConsts(c); err != nil {
			return nil, err
		}
	}
	for _, c := range sp.convs {
		if err := g.emitConv(c, filepath.Dir(specPath)); err != nil {
			return nil, err
		}
	}
	src, err := format.Source(g.buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("formatting the generated code: %v\n%s", err, g.buf.Bytes())
	}
	return src, nil
}

func (g *gen) cStruct(name string) (*dwarf.StructType, error) {
	t := g.l.structs["struct "+name]
	if t == nil {
		return nil, fmt.Errorf("struct %s is not in %s", name, strings.Join(g.sp.includes, ", "))
	}
	return t, nil
}

func (g *gen) emitStruct(s *structSpec) error {
	if g.done[s.cName] {
		return nil
	}
	g.done[s.cName] = true
	t, err := g.cStruct(s.cName)
	if err != nil {
		return err
	}
	fields := map[string]genField{}
	g.fields[s.goName] = fields
	body, err := g.fieldList(t, s, fields)
	if err != nil {
		return fmt.Errorf("struct %s: %w", s.cName, err)
	}
	fmt.Fprintf(&g.buf, "// %s mirrors struct %s.\ntype %s struct {\n%s}\n\n", s.goName, s.cName, s.goName, body)
	g.sizes = append(g.sizes, fmt.Sprintf("\tsizeof%s = %d\n", upperFirst(s.goName), t.ByteSize))
	return nil
}

// fieldList lays out t's members as Go fields: explicit holes, and each field at its C
// offset (a field Go would align differently becomes bytes).
func (g *gen) fieldList(t *dwarf.StructType, s *structSpec, fields map[string]genField) (string, error) {
	var b strings.Builder
	off := int64(0)
	pad := func(n int64) {
		if n > 0 {
			fmt.Fprintf(&b, "\t_ [%d]byte\n", n)
			off += n
		}
	}
	for _, f := range t.Field {
		if f.BitSize != 0 {
			return "", fmt.Errorf("bit field %s", f.Name)
		}
		if f.Type.Size() == 0 && f.ByteOffset == t.ByteSize {
			continue // a union of flexible arrays at the end
		}
		if a, ok := f.Type.(*dwarf.ArrayType); ok && a.Count <= 0 {
			if f.ByteOffset != t.ByteSize {
				return "", fmt.Errorf("flexible array %s not at the end", f.Name)
			}
			continue // the driver data (or entries) that follow
		}
		if t.Kind == "union" {
			return "", fmt.Errorf("union as a struct")
		}
		pad(f.ByteOffset - off)
		member := f.Name
		if member == "" {
			member = anonKey(f.Type, s) // an anonymous union: "union _ ARM" in the spec
		}
		size := f.Type.Size()
		typ, align := s.types[member], int64(1)
		if typ == "" {
			var err error
			if typ, align, err = g.goType(f.Type, member, s); err != nil {
				return "", fmt.Errorf("member %s: %w", f.Name, err)
			}
		}
		if off%align != 0 {
			typ, align = fmt.Sprintf("[%d]byte", size), 1 // packed in C: bytes in Go
		}
		name := s.names[member]
		if u, ok := s.unions[member]; ok {
			path := member + "." + u
			if strings.HasPrefix(member, "_") {
				path = u
			}
			if name == "" {
				name = camel(member)
				if strings.HasPrefix(member, "_") {
					name = camel(u)
				}
			}
			fmt.Fprintf(&b, "\t%s %s `abi:%q`\n", name, typ, path)
			fields[member] = genField{name, typ}
			armSize, _ := g.unionArmSize(f.Type, u)
			off += armSize
			pad(f.ByteOffset + size - off)
			continue
		}
		if name == "" {
			name = camel(f.Name)
		}
		if f.Name == "" {
			name = "_"
		}
		tag := "" // the C name, for abicheck and the trace (which would guess it otherwise)
		if name != "_" {
			tag = fmt.Sprintf(" `abi:%q`", f.Name)
		}
		fmt.Fprintf(&b, "\t%s %s%s\n", name, typ, tag)
		fields[f.Name] = genField{name, typ}
		off += size
	}
	pad(t.ByteSize - off)
	return b.String(), nil
}

func (g *gen) unionArmSize(t dwarf.Type, arm string) (int64, error) {
	u := underlying(t).(*dwarf.StructType)
	for _, f := range u.Field {
		if f.Name == arm {
			return f.Type.Size(), nil
		}
	}
	return 0, fmt.Errorf("no arm %s", arm)
}

func underlying(t dwarf.Type) dwarf.Type {
	for {
		switch x := t.(type) {
		case *dwarf.TypedefType:
			t = x.Type
		case *dwarf.QualType:
			t = x.Type
		default:
			return t
		}
	}
}

// goType is the Go type of a C member type, and its Go alignment.
func (g *gen) goType(t dwarf.Type, member string, s *structSpec) (string, int64, error) {
	switch x := underlying(t).(type) {
	case *dwarf.UintType, *dwarf.IntType, *dwarf.CharType, *dwarf.UcharType, *dwarf.EnumType, *dwarf.BoolType:
		n := x.Size()
		signed := false
		switch y := x.(type) {
		case *dwarf.IntType:
			signed = true
		case *dwarf.CharType:
			signed = n != 1
		case *dwarf.EnumType:
			signed = false
			_ = y
		}
		if n == 1 {
			return "uint8", 1, nil
		}
		if signed {
			return fmt.Sprintf("int%d", 8*n), n, nil
		}
		return fmt.Sprintf("uint%d", 8*n), n, nil
	case *dwarf.ArrayType:
		et, a, err := g.goType(x.Type, member, s)
		if err != nil {
			return "", 0, err
		}
		return fmt.Sprintf("[%d]%s", x.Count, et), a, nil
	case *dwarf.StructType:
		if x.Kind == "union" {
			arm, ok := s.unions[member]
			if !ok {
				return fmt.Sprintf("[%d]byte", x.ByteSize), 1, nil
			}
			for _, f := range x.Field {
				if f.Name != arm {
					continue
				}
				if name := s.armTypes[member]; name != "" {
					st, ok := underlying(f.Type).(*dwarf.StructType)
					if !ok || st.StructName != "" {
						return "", 0, fmt.Errorf("union %s: arm %s is not an anonymous struct", member, arm)
					}
					body, err := g.fieldList(st, &structSpec{types: map[string]string{}, unions: map[string]string{}, armTypes: map[string]string{}, names: map[string]string{}}, map[string]genField{})
					if err != nil {
						return "", 0, err
					}
					g.extra = append(g.extra, fmt.Sprintf("// %s mirrors the %s arm of %s's union %s.\ntype %s struct {\n%s}\n\n", name, arm, s.cName, member, name, body))
					return name, structAlign(st), nil
				}
				return g.goType(f.Type, member+"."+arm, s)
			}
			return "", 0, fmt.Errorf("union %s has no member %s", member, arm)
		}
		if x.StructName == "" { // an anonymous struct: a struct literal type
			inner := &structSpec{types: map[string]string{}, unions: map[string]string{}, armTypes: map[string]string{}, names: map[string]string{}}
			body, err := g.fieldList(x, inner, map[string]genField{})
			if err != nil {
				return "", 0, err
			}
			return "struct {\n" + body + "}", structAlign(x), nil
		}
		name, ok := g.goNames[x.StructName]
		if !ok {
			name = lowerFirst(camel(x.StructName))
			g.goNames[x.StructName] = name
		}
		if !g.done[x.StructName] {
			g.queue = append(g.queue, &structSpec{goName: name, cName: x.StructName, types: map[string]string{}, unions: map[string]string{}, armTypes: map[string]string{}, names: map[string]string{}})
		}
		return name, structAlign(x), nil
	}
	return "", 0, fmt.Errorf("type %s (%T) has no Go mirror", t, underlying(t))
}

// structAlign is the Go alignment of the mirror of x: its widest scalar, at most 8.
func structAlign(x *dwarf.StructType) int64 {
	a := int64(1)
	var walk func(t dwarf.Type)
	walk = func(t dwarf.Type) {
		switch y := underlying(t).(type) {
		case *dwarf.ArrayType:
			walk(y.Type)
		case *dwarf.StructType:
			if y.Kind == "union" {
				return // bytes in Go
			}
			for _, f := range y.Field {
				walk(f.Type)
			}
		default:
			a = max(a, min(t.Size(), 8))
		}
	}
	walk(x)
	return a
}

func (g *gen) emitEnum(e enumSpec) error {
	t := g.l.enums[e.cEnum]
	if t == nil {
		return fmt.Errorf("enum %s is not in the headers", e.cEnum)
	}
	fmt.Fprintf(&g.buf, "// %s names the values of enum %s.\nvar %s = map[%s]string{\n", e.goName, e.cEnum, e.goName, e.typ)
	vals := append([]*dwarf.EnumValue(nil), t.Val...)
	sort.SliceStable(vals, func(i, j int) bool { return vals[i].Val < vals[j].Val })
	seen := map[int64]bool{}
	for _, v := range vals {
		if !strings.HasPrefix(v.Name, e.prefix) || seen[v.Val] || e.omit[v.Name] {
			continue
		}
		seen[v.Val] = true
		name := strings.TrimPrefix(v.Name, e.prefix)
		if e.lower {
			name = strings.ToLower(name)
		}
		fmt.Fprintf(&g.buf, "\t%d: %q,\n", v.Val, name)
	}
	g.buf.WriteString("}\n\n")
	return nil
}

func (g *gen) emitConsts(c constSpec) error {
	t := g.l.enums[c.cEnum]
	if t == nil {
		return fmt.Errorf("enum %s is not in the headers", c.cEnum)
	}
	fmt.Fprintf(&g.buf, "// Values of enum %s.\nconst (\n", c.cEnum)
	for _, v := range t.Val {
		if !strings.HasPrefix(v.Name, c.cPrefix) {
			continue
		}
		fmt.Fprintf(&g.buf, "\t%s%s = %d // %s\n", c.prefix, camel(strings.ToLower(strings.TrimPrefix(v.Name, c.cPrefix))), v.Val, v.Name)
	}
	g.buf.WriteString(")\n\n")
	return nil
}

// emitConv writes FUNC, which copies every member the spec lists between a generated
// wire struct and a public type of the package (whose field types it reads from the
// package's source): a conversion where the types differ, the spec's functions for
// members that need more.
func (g *gen) emitConv(c *convSpec, dir string) error {
	wireFrom, okFrom := g.fields[c.from]
	wireTo, okTo := g.fields[c.to]
	if okFrom == okTo {
		return fmt.Errorf("convert %s: exactly one of %s and %s must be a generated struct", c.fn, c.from, c.to)
	}
	pubName, wire, wireName := c.to, wireFrom, c.from
	if okTo {
		pubName, wire, wireName = c.from, wireTo, c.to
	}
	pub, err := publicFields(dir, pubName)
	if err != nil {
		return err
	}
	members := make([]string, 0, len(c.fields))
	for m := range c.fields {
		members = append(members, m)
	}
	// A generated conversion takes a pointer; a hand-written one a value.
	generated := map[string]bool{}
	for _, o := range g.sp.convs {
		generated[o.fn] = true
	}
	arg := func(fn, x string) string {
		if generated[fn] {
			return fn + "(&" + x + ")"
		}
		return fn + "(" + x + ")"
	}
	var b strings.Builder
	if okFrom {
		fmt.Fprintf(&b, "// %s converts %s (the wire struct) to %s.\nfunc %s(w *%s) %s {\n\treturn %s{\n", c.fn, c.from, c.to, c.fn, c.from, c.to, c.to)
	} else {
		fmt.Fprintf(&b, "// %s converts %s to %s (the wire struct).\nfunc %s(a *%s) %s {\n\treturn %s{\n", c.fn, c.from, c.to, c.fn, c.from, c.to, c.to)
	}
	for _, m := range g.order(wireName, members) {
		wf, ok := wire[m]
		if !ok {
			return fmt.Errorf("convert %s: %s has no member %s", c.fn, wireName, m)
		}
		f := c.fields[m]
		pt, ok := pub[f.name]
		if !ok {
			return fmt.Errorf("convert %s: %s has no field %s", c.fn, pubName, f.name)
		}
		switch {
		case okFrom && f.toPub != "":
			fmt.Fprintf(&b, "\t\t%s: %s,\n", f.name, arg(f.toPub, "w."+wf.name))
		case okFrom && pt == wf.typ:
			fmt.Fprintf(&b, "\t\t%s: w.%s,\n", f.name, wf.name)
		case okFrom:
			fmt.Fprintf(&b, "\t\t%s: %s(w.%s),\n", f.name, pt, wf.name)
		case f.toWire != "":
			fmt.Fprintf(&b, "\t\t%s: %s,\n", wf.name, arg(f.toWire, "a."+f.name))
		case pt == wf.typ:
			fmt.Fprintf(&b, "\t\t%s: a.%s,\n", wf.name, f.name)
		default:
			fmt.Fprintf(&b, "\t\t%s: %s(a.%s),\n", wf.name, wf.typ, f.name)
		}
	}
	b.WriteString("\t}\n}\n\n")
	g.buf.WriteString(b.String())
	return nil
}

// publicFields are the fields of struct type name in the package in dir (its hand-written
// files), with their types as written.
func publicFields(dir, name string) (map[string]string, error) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
		n := fi.Name()
		return !strings.HasSuffix(n, "_test.go") && n != "abi_gen.go"
	}, 0)
	if err != nil {
		return nil, err
	}
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok {
					continue
				}
				for _, sp := range gd.Specs {
					ts, ok := sp.(*ast.TypeSpec)
					if !ok || ts.Name.Name != name {
						continue
					}
					if sel, ok := ts.Type.(*ast.SelectorExpr); ok && ts.Assign.IsValid() {
						// An alias of another package's struct (uverbs names driver's
						// verbs types as its own): read that package's declaration.
						if odir, ok := importDir(dir, f, sel); ok {
							return publicFields(odir, sel.Sel.Name)
						}
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						return nil, fmt.Errorf("%s is not a struct", name)
					}
					out := map[string]string{}
					for _, fl := range st.Fields.List {
						var tb bytes.Buffer
						printer.Fprint(&tb, fset, fl.Type)
						for _, n := range fl.Names {
							out[n.Name] = tb.String()
						}
					}
					return out, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("no struct %s in %s", name, dir)
}

// importDir is the directory of the package sel's qualifier names in f, a file of the
// package in dir, when it is one of this module's: found from go.mod above dir.
func importDir(dir string, f *ast.File, sel *ast.SelectorExpr) (string, bool) {
	x, ok := sel.X.(*ast.Ident)
	if !ok {
		return "", false
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return "", false
	}
	var mod []byte
	for {
		if mod, err = os.ReadFile(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		up := filepath.Dir(root)
		if up == root {
			return "", false
		}
		root = up
	}
	var modPath string
	for _, l := range strings.Split(string(mod), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
			modPath = strings.Trim(strings.TrimSpace(m), `"`)
			break
		}
	}
	for _, im := range f.Imports {
		path := strings.Trim(im.Path.Value, `"`)
		name := filepath.Base(path)
		if im.Name != nil {
			name = im.Name.Name
		}
		if name == x.Name && strings.HasPrefix(path, modPath+"/") {
			return filepath.Join(root, strings.TrimPrefix(path, modPath+"/")), true
		}
	}
	return "", false
}

// order sorts members as the struct generated as goName has them.
func (g *gen) order(goName string, members []string) []string {
	var cName string
	for c, n := range g.goNames {
		if n == goName {
			cName = c
		}
	}
	t := g.l.structs["struct "+cName]
	if t == nil {
		return members
	}
	want := map[string]bool{}
	for _, m := range members {
		want[m] = true
	}
	var out []string
	for _, f := range t.Field {
		if want[f.Name] {
			out = append(out, f.Name)
		}
	}
	return out
}

// --- names

var initialisms = map[string]bool{
	"id": true, "qp": true, "qpn": true, "cq": true, "cqe": true, "pd": true, "mr": true, "srq": true,
	"wr": true, "sge": true, "gid": true, "lid": true, "mtu": true, "psn": true, "ah": true, "guid": true,
	"uid": true, "fd": true, "abi": true, "uar": true, "wqe": true, "rq": true, "sq": true, "qpt": true,
	"ece": true, "rdma": true, "ib": true, "ud": true, "dm": true, "tm": true, "odp": true, "rss": true,
	"dgid": true, "sgid": true, "dlid": true, "slid": true, "grh": true, "sl": true, "rc": true, "uc": true,
}

// camel turns a C name into a Go one: qp_num → QPNum, max_send_wr → MaxSendWR.
func camel(c string) string {
	c = strings.TrimLeft(c, "_")
	var b strings.Builder
	for _, p := range strings.Split(c, "_") {
		if p == "" {
			continue
		}
		if initialisms[strings.ToLower(p)] {
			b.WriteString(strings.ToUpper(p))
			continue
		}
		b.WriteString(strings.ToUpper(p[:1]) + p[1:])
	}
	return b.String()
}

func upperFirst(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

func lowerFirst(s string) string {
	// ibUverbsOdpCaps, not iBUverbsOdpCaps: lower the leading initialism whole.
	i := 0
	for i < len(s) && s[i] >= 'A' && s[i] <= 'Z' {
		i++
	}
	if i > 1 && i < len(s) {
		i--
	}
	return strings.ToLower(s[:max(i, 1)]) + s[max(i, 1):]
}

// anonKey is the spec key of an anonymous union member: "_" and the arm the spec picked,
// or "_" if it picked none.
func anonKey(t dwarf.Type, s *structSpec) string {
	if u, ok := underlying(t).(*dwarf.StructType); ok {
		for _, f := range u.Field {
			if _, ok := s.unions["_"+f.Name]; ok {
				return "_" + f.Name
			}
		}
	}
	return "_"
}

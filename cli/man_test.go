//go:build !guest

package cli

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cpuguy83/go-md2man/v2/md2man"
)

// manPage renders docs/gorping.1.md as `make man` does.
func manPage(t *testing.T) string {
	t.Helper()
	md, err := os.ReadFile("../docs/gorping.1.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(md2man.Render(md))
}

// optionTokens finds the options a usage text names: "-v", "--json", "-interval" (Go's
// flag package); with clusters, "-vVd" in rping's synopsis, split into its letters.
var optionToken = regexp.MustCompile(`(?:^|[\s\[(|,])(--?[A-Za-z](?:[-A-Za-z0-9.]*[A-Za-z0-9])?)`)

func optionTokens(usage string, clusters bool) []string {
	var toks []string
	for _, m := range optionToken.FindAllStringSubmatch(usage, -1) {
		tok := m[1]
		if clusters && !strings.HasPrefix(tok, "--") && len(tok) > 2 {
			for _, c := range tok[1:] {
				toks = append(toks, "-"+string(c))
			}
			continue
		}
		toks = append(toks, tok)
	}
	return toks
}

// bold reports whether roff has word in bold (Markdown **word**).
func bold(roff, word string) bool { return strings.Contains(roff, `\fB`+word+`\fP`) }

// The man page documents every option of rping's command line (from the parser's tables
// and from --help) and of each subcommand (from its table entry and its --help), each in
// bold; a subcommand's in its own section.
func TestManPageCoversOptions(t *testing.T) {
	roff := manPage(t)
	var main []string
	for _, o := range rpingOptions() {
		main = append(main, o.spellings()...)
	}
	_, help, _ := runCLI(false, "--help")
	main = append(main, optionTokens(help, true)...)
	for _, sp := range main {
		if !bold(roff, sp) {
			t.Errorf("gorping(1) does not document %s (write it in bold, **%s**, where it is described)", sp, sp)
		}
	}
	if len(main) < 20 {
		t.Errorf("found only %d options of rping's command line: %q", len(main), main)
	}
	for _, sc := range subcommands {
		sec, ok := manSection(roff, "gorping "+sc.name)
		if !ok {
			t.Errorf("gorping(1) has no section \"### gorping %s\"", sc.name)
			continue
		}
		words := slices.Clone(sc.args)
		for _, o := range sc.options {
			words = append(words, o.spellings()...)
		}
		st, out, _ := runCLI(false, append(sc.nameWords(), "--help")...)
		if st != 0 || out == "" {
			t.Errorf("gorping %s --help: exit %d, stdout %q", sc.name, st, out)
		}
		words = append(words, optionTokens(out, false)...)
		for _, w := range words {
			if !bold(sec, w) {
				t.Errorf("gorping(1), section gorping %s, does not document %s (write it in bold, **%s**)", sc.name, w, w)
			}
		}
	}
}

// manSection is the roff text of the subsection (.SS) titled title.
func manSection(roff, title string) (string, bool) {
	_, rest, ok := strings.Cut(roff, "\n.SS "+title+"\n")
	if !ok {
		return "", false
	}
	if i := regexp.MustCompile(`\n\.S[HS] `).FindStringIndex(rest); i != nil {
		rest = rest[:i[0]]
	}
	return rest, true
}

// A subcommand the table does not know is missed by Run, the man page and the
// completions: every command literal in this package (a urfave/cli Command: a Name and
// an Action) must be in subcommands.
func TestEverySubcommandRegistered(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range pkgs["cli"].Files {
		ast.Inspect(f, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			if sel, ok := cl.Type.(*ast.SelectorExpr); ok && sel.Sel.Name != "Command" {
				return true // the App (rping's command line)
			}
			name, action := "", false
			for _, e := range cl.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				switch k, _ := kv.Key.(*ast.Ident); {
				case k == nil:
				case k.Name == "Name":
					if v, ok := kv.Value.(*ast.BasicLit); ok {
						name = strings.Trim(v.Value, `"`)
					}
				case k.Name == "Action":
					action = true
				}
			}
			if name != "" && action {
				names = append(names, name)
			}
			return true
		})
	}
	for _, n := range names {
		found := false
		for _, sc := range subcommands {
			found = found || sc.name == n || strings.HasSuffix(sc.name, " "+n)
		}
		if !found {
			t.Errorf("subcommand %q is not in subcommands (subcommand.go): register it there, so Run, gorping(1) and the completions know it", n)
		}
	}
	if len(names) != len(subcommands) {
		t.Errorf("found %d subcommand literals (%q) for %d subcommands", len(names), names, len(subcommands))
	}
}

// The page renders without the converter's complaints and names the version it is given.
func TestManPageRenders(t *testing.T) {
	roff := manPage(t)
	if !strings.HasPrefix(roff, ".nh\n.TH gorping 1") || !strings.Contains(roff, "gorping @VERSION@") {
		t.Errorf("unexpected header: %.200q", roff)
	}
	for _, sec := range []string{"NAME", "SYNOPSIS", "OPTIONS", "GORPING OPTIONS", "SUBCOMMANDS", "EXIT STATUS", "EXAMPLES", "SEE ALSO"} {
		if !strings.Contains(roff, "\n.SH "+sec+"\n") {
			t.Errorf("no section %s", sec)
		}
	}
}

// gorping(1)'s METRICS names every metric the mesh agent registers: each
// prometheus.*Opts literal in package mesh with a Name (and the gorping_ prefix where
// it has Namespace), read from the source so a new metric cannot be missed.
func TestManPageNamesMeshMetrics(t *testing.T) {
	roff := manPage(t)
	sec, ok := strings.CutPrefix(roff[strings.Index(roff, "\n.SH METRICS\n")+1:], ".SH METRICS\n")
	if !ok {
		t.Fatal("gorping(1) has no METRICS section")
	}
	if i := strings.Index(sec, "\n.SH "); i >= 0 {
		sec = sec[:i]
	}
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, "../mesh", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range pkgs["mesh"].Files {
		ast.Inspect(f, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			sel, ok := cl.Type.(*ast.SelectorExpr)
			if !ok || !strings.HasSuffix(sel.Sel.Name, "Opts") {
				return true
			}
			name, prefix := "", ""
			for _, e := range cl.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				switch kv.Key.(*ast.Ident).Name {
				case "Name":
					if lit, ok := kv.Value.(*ast.BasicLit); ok {
						name = strings.Trim(lit.Value, `"`)
					}
				case "Namespace":
					prefix = "gorping_"
				}
			}
			if name != "" {
				names = append(names, prefix+name)
			}
			return true
		})
	}
	if len(names) < 10 {
		t.Fatalf("found %d metrics in package mesh: %q", len(names), names)
	}
	for _, n := range names {
		if !bold(sec, strings.ReplaceAll(n, "_", `\_`)) && !bold(sec, n) {
			t.Errorf("gorping(1), METRICS, does not name %s (write it in bold, **%s**)", n, n)
		}
	}
}

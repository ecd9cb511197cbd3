package cli

import "sort"

// ManOptions is the Markdown option list of gorping(1)'s section name: "rping" (OPTIONS:
// rping's own), "gorping" (GORPING OPTIONS) or a subcommand's name. cli/mangen writes
// them into docs/gorping.1.md between <!-- options NAME --> and <!-- end options -->.
func ManOptions(name string) (string, bool) {
	switch name {
	case "rping", "gorping":
		var opts []option
		for _, o := range rpingLine {
			if isRpings := o.usage != "" || o.hidden; isRpings == (name == "rping") {
				opts = append(opts, o)
			}
		}
		return manList(opts), true
	}
	for _, sc := range subcommands {
		if sc.name == name {
			return manList(sc.options), true
		}
	}
	return "", false
}

// ManSections are the names ManOptions knows, sorted.
func ManSections() []string {
	names := []string{"rping", "gorping"}
	for _, sc := range subcommands {
		names = append(names, sc.name)
	}
	sort.Strings(names)
	return names
}

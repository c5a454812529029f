package daemon

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ConfigError is a configuration that cannot be used; Key names where (e.g.
// "probes[1].workload.rate"). The CLI maps it to exit code 2.
type ConfigError struct {
	Key string
	Msg string
}

func (e *ConfigError) Error() string {
	if e.Key == "" {
		return "config: " + e.Msg
	}
	return fmt.Sprintf("config: %s: %s", e.Key, e.Msg)
}

func cfgErr(key, format string, args ...any) error {
	return &ConfigError{Key: key, Msg: fmt.Sprintf(format, args...)}
}

var (
	lineRe       = regexp.MustCompile(`^line (\d+): (.*)$`)
	unknownRe    = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
	unmarshalRe  = regexp.MustCompile("^cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")
	typeNameOf   = map[string]string{"int": "a whole number", "float64": "a number", "string": "a string", "bool": "true or false", "[]string": "a list of strings"}
	yamlKindName = map[string]string{"str": "a string", "int": "a number", "float": "a number", "bool": "a boolean", "seq": "a list", "map": "a mapping", "null": "null"}
)

// yamlError turns a YAML decoding error into a ConfigError that names the key at the line
// of its first problem ("probes[0].every") and says what was wanted in the configuration's
// terms rather than Go's.
func yamlError(data []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	var root yaml.Node
	paths := map[int]string{}
	if yaml.Unmarshal(data, &root) == nil {
		linePaths(&root, paths)
	}
	var parts []string
	key := ""
	for _, line := range strings.Split(msg, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		m := lineRe.FindStringSubmatch(line)
		if m == nil {
			parts = append(parts, line)
			continue
		}
		n, _ := strconv.Atoi(m[1])
		text := m[2]
		if u := unknownRe.FindStringSubmatch(text); u != nil {
			text = fmt.Sprintf("unknown key %q", u[1])
		} else if u := unmarshalRe.FindStringSubmatch(text); u != nil {
			want := typeNameOf[u[3]]
			switch {
			case want != "":
			case strings.HasPrefix(u[3], "[]"):
				want = "a list"
			case strings.HasPrefix(u[3], "map[") || strings.HasPrefix(u[3], "daemon."):
				want = "a mapping"
			default:
				want = "another kind of value"
			}
			got := yamlKindName[u[1]]
			if got == "" {
				got = u[1]
			}
			if u[2] != "" {
				text = fmt.Sprintf("want %s, not %s %q", want, got, u[2])
			} else {
				text = fmt.Sprintf("want %s, not %s", want, got)
			}
		}
		p := paths[n]
		if strings.HasPrefix(p, "[") {
			p = "" // the document itself is not a mapping
		}
		switch {
		case len(parts) == 0 && p != "":
			key = p
			parts = append(parts, fmt.Sprintf("%s (line %d)", text, n))
		case p != "":
			parts = append(parts, fmt.Sprintf("%s (line %d): %s", p, n, text))
		default:
			parts = append(parts, fmt.Sprintf("line %d: %s", n, text))
		}
	}
	return &ConfigError{Key: key, Msg: strings.Join(parts, "; ")}
}

// yamlEntry is one key or list item of a document, as walkYAML meets it: its path
// ("probes[1].workload.rate", "probes[1]"), whether it is a list item, the line of the key
// (of the item's "-") and the line its value starts on.
type yamlEntry struct {
	path            string
	item            bool
	line, valueLine int
}

// walkYAML visits every key and list item below n in document order, a parent before its
// children. Aliases are not followed.
func walkYAML(n *yaml.Node, path string, visit func(yamlEntry)) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			walkYAML(c, path, visit)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			visit(yamlEntry{path: p, line: k.Line, valueLine: v.Line})
			walkYAML(v, p, visit)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			visit(yamlEntry{path: p, item: true, line: c.Line, valueLine: c.Line})
			walkYAML(c, p, visit)
		}
	}
}

// linePaths records, for every line that holds a key or a list item, the key's path
// ("probes[1].workload.rate"); the innermost key of a line wins over outer keys and over
// list items.
func linePaths(n *yaml.Node, m map[int]string) {
	walkYAML(n, "", func(e yamlEntry) {
		if e.item {
			if _, ok := m[e.line]; !ok { // a key on the line names it better than an item
				m[e.line] = e.path
			}
			return
		}
		m[e.line] = e.path
		if _, ok := m[e.valueLine]; !ok && e.valueLine != e.line {
			m[e.valueLine] = e.path
		}
	})
}

// lineSuffixRe matches a message that already names its line.
var lineSuffixRe = regexp.MustCompile(`\(line \d+\)`)

// withLine gives a *ConfigError about a value of the document (data) the line of its key,
// as the YAML reader's own errors have it: "config: probes[0].every: must be at least 1s,
// not -5m0s (line 13)". A message that names a line already, an error without a key, and a
// key the document does not write (a default, a missing section) are left as they are.
func withLine(data []byte, err error) error {
	ce, ok := err.(*ConfigError)
	if !ok || ce.Key == "" || lineSuffixRe.MatchString(ce.Msg) {
		return err
	}
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		return err
	}
	lines := map[string]int{}
	keyLines(&root, lines)
	if n, ok := lines[ce.Key]; ok {
		return &ConfigError{Key: ce.Key, Msg: fmt.Sprintf("%s (line %d)", ce.Msg, n)}
	}
	return err
}

// keyLines records the line of every key ("probes[1].every": the line of "every:", the first
// one written) and list item ("probes[1]": the line of its "-") of the document, by path.
func keyLines(n *yaml.Node, m map[string]int) {
	walkYAML(n, "", func(e yamlEntry) {
		if _, seen := m[e.path]; !seen || e.item {
			m[e.path] = e.line
		}
	})
}

package docgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"

	"github.com/inferprobe/inferprobe/artifact"
)

// RecordsFile is the file, under the reference directory, of the artifact's records.
const RecordsFile = "records.md"

// Records are the record types an artifact holds, in the order the page lists them: one
// Go type per event_type and schema_version. infer.vllm_span_context and the v2
// infer.vllm_span line are written by hand-made encoders, not from struct tags: the
// artifact format page (docs/reference/artifact.md) describes them.
var Records = []artifact.Record{
	artifact.Session{}, artifact.ArtifactHeader{}, artifact.Workload{}, artifact.SLORecord{},
	artifact.CacheState{}, artifact.PhaseWindow{}, artifact.Request{},
	artifact.MetricsScrape{Header: artifact.HeaderOf(artifact.KindMetricsScrape)}, artifact.Span{},
	artifact.TelemetrySample{}, artifact.SystemSample{}, artifact.ClockAlignment{}, artifact.Capabilities{},
	artifact.TraceWindow{}, artifact.Iteration{}, artifact.ActivityRef{}, artifact.Search{},
}

// goDocs are the doc comments of the artifact package's types and struct fields.
type goDocs struct {
	types  map[string]string            // type name → its doc comment
	fields map[string]map[string]string // type name → field name → its doc (or line) comment
}

// readDocs parses the non-test Go files of dir (the artifact package's source).
func readDocs(dir string) (*goDocs, error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	d := &goDocs{types: map[string]string{}, fields: map[string]map[string]string{}}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, spec := range g.Specs {
				ts := spec.(*ast.TypeSpec)
				doc := ts.Doc
				if doc == nil && len(g.Specs) == 1 {
					doc = g.Doc
				}
				d.types[ts.Name.Name] = text(doc)
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				fd := map[string]string{}
				for _, fl := range st.Fields.List {
					c := text(fl.Doc)
					if c == "" {
						c = text(fl.Comment)
					}
					for _, n := range fl.Names {
						fd[n.Name] = c
					}
				}
				d.fields[ts.Name.Name] = fd
			}
		}
	}
	return d, nil
}

// text is a comment group as one line.
func text(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return strings.Join(strings.Fields(g.Text()), " ")
}

// RecordsPage is docs/reference/records.md: for each record type of Records, its
// event_type and schema_version, the Go type's doc comment and one row per JSON field
// (nested objects as dotted paths, arrays as []) with its JSON type, its unit by the
// field's suffix and the field's doc comment. srcDir is the artifact package's source
// directory. Errors: the source cannot be read or parsed.
func RecordsPage(srcDir string) ([]byte, error) {
	docs, err := readDocs(srcDir)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("<!-- Generated from the artifact package's Go types by `inferprobe docs --output docs/reference`: do not edit. -->\n\n")
	b.WriteString("# Artifact records\n\n")
	b.WriteString("Every record type of the JSONL artifact, with every field its Go type writes. ")
	b.WriteString("How the file is laid out (record order, the compact span lines, durability) is in ")
	b.WriteString("[the artifact format](artifact.md). In every record, a field that can be unknown is `null`, never 0; ")
	b.WriteString("nanosecond times are JSON integers; a field marked *omitted when empty* is left out rather than written empty.\n\n")
	for _, r := range Records {
		k := r.RecordKind()
		fmt.Fprintf(&b, "- [`%s` v%d](#%s)\n", k.EventType, k.SchemaVersion, anchor(k))
	}
	for _, r := range Records {
		k := r.RecordKind()
		t := reflect.TypeOf(r)
		fmt.Fprintf(&b, "\n## %s\n\n", heading(k))
		fmt.Fprintf(&b, "`event_type` `%s`, `schema_version` %d (Go type `artifact.%s`).", k.EventType, k.SchemaVersion, t.Name())
		if doc := plain(t.Name(), docs.types[t.Name()]); doc != "" {
			fmt.Fprintf(&b, " %s", doc)
		}
		b.WriteString("\n\n| field | JSON type | unit | meaning |\n| --- | --- | --- | --- |\n")
		rows := fieldRows(t, "", docs, map[reflect.Type]bool{})
		for _, row := range rows {
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", row.path, row.typ, unitOfField(row.path), cell(row.doc))
		}
	}
	return b.Bytes(), nil
}

// marshaler is json.Marshaler: a nested type that encodes itself is not described field
// by field.
var marshaler = reflect.TypeFor[json.Marshaler]()

// sharedDoc is, for a field without a comment of its own, the comment of another field of
// the same struct that names it ("StartedAtNS is when the request was sent; EndedAtNS when
// it ended"), else "".
func (d *goDocs) sharedDoc(typ, field string) string {
	re := regexp.MustCompile(`\b` + regexp.QuoteMeta(field) + `\b`)
	for _, name := range sortedKeys(d.fields[typ]) {
		if c := d.fields[typ][name]; name != field && re.MatchString(c) {
			return c
		}
	}
	return ""
}

// plain is a Go doc comment as the page shows it: "X is the …" (X the identifier it
// documents) becomes "The …".
func plain(ident, doc string) string {
	for _, verb := range []string{" is ", " are ", " equals "} {
		if rest, ok := strings.CutPrefix(doc, ident+verb); ok {
			if verb == " equals " {
				return "Equals " + rest
			}
			return strings.ToUpper(rest[:1]) + rest[1:]
		}
	}
	return doc
}

// commonFields give the meaning of the fields many records share, where a field's own
// doc comment says nothing.
var commonFields = map[string]string{
	"session_id":   "The session (one run's artifact) the record belongs to: the infer.session record's id.",
	"run_id":       "The run id, also in every X-Request-Id sent (inferprobe-<run_id>-<request_id>).",
	"case_id":      "The workload case: <label>_in<input>_out<output>, e.g. c8_in512_out128.",
	"phase":        "The phase: warmup or measured.",
	"status":       "The record's status (see the record's description for its values).",
	"model":        "The model name sent in every request.",
	"endpoint":     "The Chat Completions URL, without credentials or query.",
	"host":         "The host name.",
	"pid":          "The process id.",
	"boot_id":      "The host's boot id (/proc/sys/kernel/random/boot_id).",
	"clock_domain": "The clock the record's times are on: {host}/{boot_id}/unix_epoch_ns for a host's wall clock.",
	"source":       "The producer that wrote the record.",
	"metadata":     "Producer-specific details (see the record's description).",
	"seed":         "The seed of prompts, nonces and Poisson gaps.",
}

// heading is a record's section title.
func heading(k artifact.Kind) string { return fmt.Sprintf("%s v%d", k.EventType, k.SchemaVersion) }

// anchor is the GitHub anchor of heading(k).
func anchor(k artifact.Kind) string {
	return strings.NewReplacer(".", "", " ", "-").Replace(strings.ToLower(heading(k)))
}

type fieldRow struct{ path, typ, doc string }

// fieldRows lists t's JSON fields (embedded structs flattened, nested structs as
// prefix.field), each with its JSON type and doc comment; a field without one takes its
// struct type's doc. seen stops a recursive type.
func fieldRows(t reflect.Type, prefix string, docs *goDocs, seen map[reflect.Type]bool) []fieldRow {
	t = deref(t)
	if t.Kind() != reflect.Struct || seen[t] {
		return nil
	}
	seen[t] = true
	defer delete(seen, t)
	var rows []fieldRow
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			rows = append(rows, fieldRows(f.Type, prefix, docs, seen)...)
			continue
		}
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		doc := plain(f.Name, docs.fields[t.Name()][f.Name])
		if doc == "" {
			doc = docs.sharedDoc(t.Name(), f.Name)
		}
		inner := elem(f.Type)
		if doc == "" && inner.Kind() == reflect.Struct && inner.PkgPath() == t.PkgPath() {
			doc = plain(inner.Name(), docs.types[inner.Name()])
		}
		if doc == "" {
			doc = commonFields[name]
		}
		typ := jsonType(f.Type)
		custom := inner.Kind() == reflect.Struct && (inner.Implements(marshaler) || reflect.PointerTo(inner).Implements(marshaler))
		if custom {
			typ = "custom JSON (see the meaning)"
		}
		if strings.Contains(opts, "omitempty") {
			typ += ", omitted when empty"
		}
		path := prefix + name
		rows = append(rows, fieldRow{path: path, typ: typ, doc: doc})
		if inner.Kind() == reflect.Struct && inner.PkgPath() == t.PkgPath() && !custom {
			sub := path
			if isList(f.Type) {
				sub += "[]"
			}
			rows = append(rows, fieldRows(inner, sub+".", docs, seen)...)
		}
	}
	return rows
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// elem is the struct (or other) type a field holds, through pointers, slices and maps.
func elem(t reflect.Type) reflect.Type {
	for {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
				return t
			}
			t = t.Elem()
		default:
			return t
		}
	}
}

func isList(t reflect.Type) bool {
	t = deref(t)
	return t.Kind() == reflect.Slice || t.Kind() == reflect.Array
}

// jsonType is the JSON type encoding/json writes for t; "or null" for a pointer, a map or
// a raw message.
func jsonType(t reflect.Type) string {
	null := ""
	if t.Kind() == reflect.Pointer || t.Kind() == reflect.Map || t.Kind() == reflect.Interface {
		null = " or null"
	}
	t = deref(t)
	switch {
	case t == reflect.TypeFor[[]byte]() || t.Name() == "RawMessage":
		return "any JSON" + null
	}
	switch t.Kind() {
	case reflect.String:
		return "string" + null
	case reflect.Bool:
		return "boolean" + null
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer" + null
	case reflect.Float32, reflect.Float64:
		return "number" + null
	case reflect.Slice, reflect.Array:
		return "array of " + strings.TrimSuffix(jsonType(t.Elem()), " or null")
	case reflect.Map:
		return "object of " + strings.TrimSuffix(jsonType(t.Elem()), " or null")
	case reflect.Struct:
		return "object" + null
	case reflect.Interface:
		return "any JSON"
	}
	return t.Kind().String()
}

// suffixUnits are the units a field name's last word names.
var suffixUnits = []struct {
	re   *regexp.Regexp
	unit string
}{
	{regexp.MustCompile(`_ns$`), "ns"},
	{regexp.MustCompile(`_ms$`), "ms"},
	{regexp.MustCompile(`_(seconds|s)$`), "s"},
	{regexp.MustCompile(`_bytes$`), "bytes"},
	{regexp.MustCompile(`_(ratio|share|utilization|coverage)$`), "ratio (0–1)"},
	{regexp.MustCompile(`_per_second$`), "per second"},
	{regexp.MustCompile(`_tokens$`), "tokens"},
}

// unitOfField is the unit a field path's last name carries by its suffix, "—" for none.
func unitOfField(path string) string {
	name := path[strings.LastIndexAny(path, ".]")+1:]
	for _, u := range suffixUnits {
		if u.re.MatchString(name) {
			return u.unit
		}
	}
	return "—"
}

// recordEventTypes are the event types the artifact package declares (its Event*
// constants and variables: everything a record can be), read from srcDir.
func recordEventTypes(srcDir string) ([]string, error) {
	names, err := filepath.Glob(filepath.Join(srcDir, "*.go"))
	if err != nil {
		return nil, err
	}
	re := regexp.MustCompile(`(?m)^\s*Event\w+\s*=\s*"(infer\.[a-z_]+)"`)
	set := map[string]bool{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		for _, m := range re.FindAllSubmatch(src, -1) {
			set[string(m[1])] = true
		}
	}
	return sortedKeys(set), nil
}

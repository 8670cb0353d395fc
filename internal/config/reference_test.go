package config

import (
	"flag"
	"fmt"
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md (make generate)")

// referencePath is the configuration reference, from this package's
// directory.
const referencePath = "../../docs/configuration.md"

// The committed configuration reference is what the code says: every key
// with its type, default, variable, flags and meaning. `make generate`
// (-update) rewrites it.
func TestReference(t *testing.T) {
	got, err := renderReference()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(referencePath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatalf("%v: run make generate", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("docs/configuration.md is stale: run make generate (-committed +generated):\n%s", diff)
	}
}

// A reference section is a heading's keys: a section of the file, or the
// entries of a map or a list.
type refSection struct {
	key  string // "" for the top level, "bridge.pool", "bridge.servers.<name>"
	top  bool   // whether it is a top-level key's
	doc  string // Markdown
	rows []setting
}

// renderReference renders docs/configuration.md.
func renderReference() (string, error) {
	docs, err := parseDocs(".")
	if err != nil {
		return "", err
	}
	flags, err := parseFlags("../../cmd/agentd/serve.go")
	if err != nil {
		return "", err
	}
	intro, err := os.ReadFile("testdata/reference_intro.md")
	if err != nil {
		return "", err
	}
	r := referenceWriter{docs: docs, flags: flags, defaults: reflect.ValueOf(Default())}
	return r.render(string(intro)), nil
}

// referenceWriter writes the reference from the configuration's doc
// comments, the keys that flags set, and the defaults.
type referenceWriter struct {
	docs     docComments
	flags    map[string][]string
	defaults reflect.Value
	b        strings.Builder
}

// render writes the reference: its intro, then a section for the top
// level, for each section of the file, and for the entries of each map
// or list of sections.
func (r *referenceWriter) render(intro string) string {
	sections := []*refSection{{}}
	byKey := map[string]*refSection{"": sections[0]}
	walkSettings(reflect.TypeFor[Config](), scope{index: []int{}}, func(s setting) {
		if sec := r.sectionOf(s); sec != nil {
			sections = append(sections, sec)
			byKey[sec.key] = sec
		}
		if isLeaf(s.field.Type) || s.field.Type.Kind() == reflect.Map || s.field.Type.Kind() == reflect.Slice {
			parent := byKey[parentKey(s.key)]
			parent.rows = append(parent.rows, s)
		}
	})
	r.b.WriteString(intro)
	for _, sec := range sections {
		r.section(sec)
	}
	return r.b.String()
}

// sectionOf is the section that setting s opens, if it opens one: its
// own for a section of the file, its entries' for a map or a list of
// sections. Its doc is the field's, then its type's (an entry's); when
// both begin with the same sentence, the longer alone.
func (r *referenceWriter) sectionOf(s setting) *refSection {
	t := s.field.Type
	if isLeaf(t) {
		return nil
	}
	sec := &refSection{key: s.key, top: !strings.ContainsAny(s.key, ".[")}
	switch t.Kind() {
	case reflect.Map:
		sec.key, t = s.key+".<name>", t.Elem()
	case reflect.Slice:
		sec.key, t = s.key+"[]", t.Elem()
	}
	fieldDoc, typeDoc := r.docs.fieldDoc(s.owner, s.field.Name), r.docs.typeDoc(t)
	switch {
	case meaning(fieldDoc) != meaning(typeDoc):
		sec.doc = markdownNamed(fieldDoc, s.key) + "\n" + markdownNamed(typeDoc, sec.key)
	case len(fieldDoc) >= len(typeDoc):
		sec.doc = markdownNamed(fieldDoc, s.key)
	default:
		sec.doc = markdownNamed(typeDoc, sec.key)
	}
	return sec
}

// section writes a section: its heading, its doc, and its keys' table.
func (r *referenceWriter) section(sec *refSection) {
	switch {
	case sec.key == "":
		r.b.WriteString("\n## Top-level keys\n")
	case sec.top:
		fmt.Fprintf(&r.b, "\n## `%s`\n", sec.key)
	default:
		fmt.Fprintf(&r.b, "\n### `%s`\n", sec.key)
	}
	if sec.doc != "" {
		r.b.WriteString("\n" + sec.doc)
	}
	if len(sec.rows) == 0 {
		return
	}
	r.b.WriteString("\n| Key | Type | Default | Set by | Meaning |\n| --- | --- | --- | --- | --- |\n")
	for _, s := range sec.rows {
		text := r.docs.fieldDoc(s.owner, s.field.Name)
		fmt.Fprintf(&r.b, "| `%s` | %s | %s | %s | %s |\n", s.key, typeWords(s.field), r.defaultOf(s), r.setBy(s), cell(meaning(text)))
	}
}

// setBy lists the variable and flags that set s.
func (r *referenceWriter) setBy(s setting) string {
	var by []string
	if s.env != "" {
		by = append(by, "`"+s.env+"`")
	}
	for _, f := range r.flags[s.key] {
		by = append(by, "`"+f+"`")
	}
	return strings.Join(by, ", ")
}

// typeWords is the type of the key f decodes into, in the user's words.
func typeWords(f reflect.StructField) string {
	t := f.Type
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if values := enum(f); values != nil {
		list := make([]string, 0, len(values))
		for _, v := range values {
			if v != "" {
				list = append(list, "`"+v+"`")
			}
		}
		if t.Kind() == reflect.Slice {
			return "list of " + strings.Join(list, ", ")
		}
		return "one of " + strings.Join(list, ", ")
	}
	switch {
	case t.Kind() == reflect.Slice && !isLeaf(t.Elem()):
		return "list of entries"
	case t.Kind() == reflect.Slice:
		return "list of strings"
	case t.Kind() == reflect.Map && !isLeaf(t.Elem()):
		return "map of entries by name"
	case t.Kind() == reflect.Map:
		return "map of strings"
	}
	return strings.TrimPrefix(strings.TrimPrefix(typeName(t), "an "), "a ")
}

// defaultOf is s's default as the reference shows it: Default()'s value,
// an entry's defaults (WithDefaults), the key it inherits, or what its
// default tag says an unset value means.
func (r *referenceWriter) defaultOf(s setting) string {
	if s.inherit != "" {
		return "as `" + s.inherit + "`"
	}
	v := r.entryDefault(s)
	if v.IsZero() {
		if d := s.field.Tag.Get("default"); d != "" {
			return cell(d)
		}
		if k := v.Kind(); k == reflect.String || k == reflect.Slice || k == reflect.Map || k == reflect.Pointer {
			return "none"
		}
	}
	return "`" + formatValue(v) + "`"
}

// entryDefault is s's value in Default(), or, beneath a map or a list,
// in an entry's defaults: those its type's WithDefaults sets, else zero.
func (r *referenceWriter) entryDefault(s setting) reflect.Value {
	if s.index != nil {
		return r.defaults.FieldByIndex(s.index)
	}
	entry := reflect.New(s.owner).Elem()
	if m, ok := s.owner.MethodByName("WithDefaults"); ok {
		entry = m.Func.Call([]reflect.Value{entry})[0]
	}
	return entry.FieldByIndex(s.field.Index)
}

// formatValue is v as YAML writes it in flow style, durations shortest.
func formatValue(v reflect.Value) string {
	if v.Type() == durationType {
		s := time.Duration(v.Int()).String()
		s = strings.Replace(s, "m0s", "m", 1)
		return strings.Replace(s, "h0m", "h", 1)
	}
	if st, ok := v.Interface().(fmt.Stringer); ok {
		return st.String()
	}
	switch v.Kind() {
	case reflect.String:
		out, _ := yaml.Marshal(v.String())
		return strings.TrimSpace(string(out))
	case reflect.Slice:
		items := make([]string, v.Len())
		for i := range items {
			items[i] = formatValue(v.Index(i))
		}
		return "[" + strings.Join(items, ", ") + "]"
	case reflect.Map:
		var items []string
		for _, k := range v.MapKeys() {
			items = append(items, k.String()+": "+formatValue(v.MapIndex(k)))
		}
		slices.Sort(items)
		return "{" + strings.Join(items, ", ") + "}"
	case reflect.Struct:
		var items []string
		for name, f := range keysOf(v.Type()) {
			if fv := v.FieldByIndex(f.Index); !fv.IsZero() {
				items = append(items, name+": "+formatValue(fv))
			}
		}
		return "{" + strings.Join(items, ", ") + "}"
	}
	return fmt.Sprint(v.Interface())
}

// synopsis is the first sentence of doc.
func synopsis(text string) string {
	return new(doc.Package).Synopsis(text)
}

// meaning is the first sentence of a field's doc without the field's name
// (nor the "is" or "are" after it), capitalized unless it begins with a
// key: "Where `agentd serve` serves the AgentService, ...".
func meaning(text string) string {
	_, rest, ok := strings.Cut(synopsis(text), " ")
	if !ok {
		return ""
	}
	for _, verb := range []string{"is ", "are "} {
		if r, ok := strings.CutPrefix(rest, verb); ok {
			rest = r
			break
		}
	}
	if first, _, _ := strings.Cut(rest, " "); !strings.ContainsAny(first, "_.:") {
		rest = strings.ToUpper(rest[:1]) + rest[1:]
	}
	return rest
}

// markdownNamed is doc comment text as Markdown, its first word, the Go
// name of what it documents, replaced by key.
func markdownNamed(text, key string) string {
	if text == "" {
		return ""
	}
	_, rest, _ := strings.Cut(text, " ")
	var p comment.Parser
	out := string((&comment.Printer{}).Markdown(p.Parse(rest)))
	// The printer escapes what might be Markdown; backticks are code
	// spans in these comments, and an underscore within a word is
	// literal to Markdown.
	out = strings.NewReplacer("\\`", "`", "\\_", "_").Replace(out)
	return "`" + key + "` " + out
}

// cell is text fit for a table cell: its pipes and angle brackets escaped
// outside `code` spans.
func cell(text string) string {
	parts := strings.Split(text, "`")
	for i := 0; i < len(parts); i += 2 {
		parts[i] = strings.NewReplacer("|", `\|`, "<", `\<`).Replace(parts[i])
	}
	return strings.Join(parts, "`")
}

// docComments are the doc comments of a package's types and their fields.
type docComments map[string]typeComments

type typeComments struct {
	doc    string
	fields map[string]string
}

func (d docComments) typeDoc(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return d[t.Name()].doc
}

func (d docComments) fieldDoc(owner reflect.Type, field string) string {
	return d[owner.Name()].fields[field]
}

// parseDocs reads the doc comments of the struct types declared by the
// non-test Go files in dir.
func parseDocs(dir string) (docComments, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	docs := make(docComments)
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				addTypeDocs(docs, g)
			}
		}
	}
	return docs, nil
}

// addTypeDocs adds the doc comments of the struct types g declares.
func addTypeDocs(docs docComments, g *ast.GenDecl) {
	for _, spec := range g.Specs {
		ts := spec.(*ast.TypeSpec)
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			continue
		}
		tc := typeComments{doc: g.Doc.Text(), fields: make(map[string]string)}
		if ts.Doc != nil {
			tc.doc = ts.Doc.Text()
		}
		for _, f := range st.Fields.List {
			for _, n := range f.Names {
				tc.fields[n.Name] = f.Doc.Text()
			}
		}
		docs[ts.Name.Name] = tc
	}
}

// parseFlags reads which keys the flags of `agentd serve` and `agentd
// bridge` set, from the file that declares them (commonFlags): register
// binds each flag to a field of commonFlags, and load copies that field
// to a key (cfg.Bridge.Listen = f.listen), or sets the key when the
// field is true (if f.insecure { cfg.Insecure = true }).
func parseFlags(path string) (map[string][]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		return nil, err
	}
	register, load := method(f, "register"), method(f, "load")
	if register == nil || load == nil {
		return nil, fmt.Errorf("%s: no commonFlags.register and load to read the flags from", path)
	}
	names := make(map[string]string) // field of commonFlags → flag
	ast.Inspect(register, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok && len(call.Args) >= 2 {
			if u, ok := call.Args[0].(*ast.UnaryExpr); ok {
				if lit, ok := call.Args[1].(*ast.BasicLit); ok {
					names[selected(u.X, "f")] = "--" + strings.Trim(lit.Value, `"`)
				}
			}
		}
		return true
	})
	keys := make(map[string][]string)
	flagAssignments(load.Body, "", func(cfgPath []string, field string) {
		if name := names[field]; name != "" {
			k := keyOf(cfgPath)
			if !slices.Contains(keys[k], name) {
				keys[k] = append(keys[k], name)
			}
		}
	})
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: load sets no key from a flag", path)
	}
	return keys, nil
}

// method is the declaration of the method name in f.
func method(f *ast.File, name string) *ast.FuncDecl {
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv != nil && fn.Name.Name == name {
			return fn
		}
	}
	return nil
}

// flagAssignments calls found for every assignment to a key (cfg.X.Y)
// beneath n with the field of the flags it copies, or, when it copies
// none, the field that the enclosing if tests (cond).
func flagAssignments(n ast.Node, cond string, found func(cfgPath []string, field string)) {
	ast.Inspect(n, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt:
			flagAssignments(n.Body, selected(n.Cond, "f"), found)
			if n.Else != nil {
				flagAssignments(n.Else, cond, found)
			}
			return false
		case *ast.AssignStmt:
			for i, lhs := range n.Lhs {
				path := cfgPath(lhs)
				field := selected(n.Rhs[min(i, len(n.Rhs)-1)], "f")
				if field == "" {
					field = cond
				}
				if path != nil && field != "" {
					found(path, field)
				}
			}
		}
		return true
	})
}

// selected is the field x selects from the variable named recv (f.listen:
// "listen"), or "".
func selected(x ast.Expr, recv string) string {
	sel, ok := x.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	if id, ok := sel.X.(*ast.Ident); ok && id.Name == recv {
		return sel.Sel.Name
	}
	return ""
}

// cfgPath is the fields x selects from cfg (cfg.Bridge.Listen: Bridge,
// Listen), or nil.
func cfgPath(x ast.Expr) []string {
	var path []string
	for {
		switch e := x.(type) {
		case *ast.SelectorExpr:
			path = append([]string{e.Sel.Name}, path...)
			x = e.X
		case *ast.Ident:
			if e.Name == "cfg" && len(path) > 0 {
				return path
			}
			return nil
		default:
			return nil
		}
	}
}

// keyOf is the key of Config's field path.
func keyOf(path []string) string {
	t, key := reflect.TypeFor[Config](), ""
	for _, name := range path {
		f, _ := t.FieldByName(name)
		key, t = join(key, yamlName(f)), f.Type
	}
	return key
}

// decode.go: a strict YAML decoder that remembers where every field came from.
//
// yaml.v3 reports syntax and type errors with a line, but not errors from a
// value's own UnmarshalText (a bad rate, an unknown lane) nor unknown keys in
// nested structs with their full path. This walker decodes a yaml.Node into a
// Go value field by field, so every error names the line and the dotted field
// path, and it records path -> line so that later validation errors (which
// only know the path) can be placed in the file too.
package policy

import (
	"encoding"
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
)

// decoder walks a yaml.Node tree into Go values. A field that cannot be
// decoded is noted in errs and left at its default, and the walk goes on,
// so that one run shows every such error of the file.
type decoder struct {
	lines map[string]int // field path -> line in the file
	errs  []*decodeError // in file order
}

// note keeps a field's decode error; the caller goes on with the next field.
func (d *decoder) note(err error) {
	if de, ok := err.(*decodeError); ok {
		d.errs = append(d.errs, de)
	}
}

// decodeError is a decode failure at a known place.
type decodeError struct {
	Line  int
	Field string
	Msg   string
}

func (e *decodeError) Error() string { return fmt.Sprintf("line %d: %s: %s", e.Line, e.Field, e.Msg) }

var textUnmarshaler = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) error {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil
		}
		n = n.Content[0]
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	d.lines[path] = n.Line
	if n.Tag == "!!null" {
		return nil // keep the default
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return d.decode(n, v.Elem(), path)
	}
	if reflect.PointerTo(v.Type()).Implements(textUnmarshaler) {
		if n.Kind != yaml.ScalarNode {
			return &decodeError{n.Line, path, "want a single value"}
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(n.Value)); err != nil {
			return &decodeError{n.Line, path, err.Error()}
		}
		return nil
	}
	switch v.Kind() {
	case reflect.Struct:
		return d.decodeStruct(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			if v.Type().Elem().Kind() != reflect.Struct && n.Kind == yaml.ScalarNode {
				// allow a single scalar where a list is expected: "uids: 0"
				elem := reflect.New(v.Type().Elem()).Elem()
				if err := d.decode(n, elem, path+"[0]"); err != nil {
					return err
				}
				v.Set(reflect.Append(reflect.MakeSlice(v.Type(), 0, 1), elem))
				return nil
			}
			return &decodeError{n.Line, path, "want a list"}
		}
		out := reflect.MakeSlice(v.Type(), 0, len(n.Content))
		for i, c := range n.Content {
			elem := reflect.New(v.Type().Elem()).Elem()
			if err := d.decode(c, elem, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				d.note(err) // the element stays, partly decoded, to be checked with the rest
			}
			out = reflect.Append(out, elem)
		}
		v.Set(out)
		return nil
	case reflect.Map:
		return &decodeError{n.Line, path, "maps are not supported in the policy schema"}
	}
	if n.Kind != yaml.ScalarNode {
		return &decodeError{n.Line, path, "want a single value"}
	}
	if err := n.Decode(v.Addr().Interface()); err != nil {
		msg := err.Error()
		if i := strings.Index(msg, "cannot unmarshal"); i >= 0 {
			msg = fmt.Sprintf("%q is not a valid %s", n.Value, kindName(v.Kind()))
		}
		return &decodeError{n.Line, path, msg}
	}
	return nil
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) error {
	if n.Kind != yaml.MappingNode {
		return &decodeError{n.Line, path, "want a mapping of key: value"}
	}
	fields := map[string]reflect.Value{}
	var names []string
	collectFields(v, fields, &names)
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		child := joinPath(path, k.Value)
		f, ok := fields[k.Value]
		if !ok {
			d.note(&decodeError{k.Line, child, fmt.Sprintf("unknown field (known here: %s)", strings.Join(names, ", "))})
			continue
		}
		if seen[k.Value] {
			d.note(&decodeError{k.Line, child, "given twice"})
			continue
		}
		seen[k.Value] = true
		if err := d.decode(val, f, child); err != nil {
			d.note(err)
		}
		d.lines[child] = k.Line
	}
	return nil
}

// collectFields maps yaml keys to settable fields, flattening `yaml:",inline"`.
func collectFields(v reflect.Value, out map[string]reflect.Value, names *[]string) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			collectFields(v.Field(i), out, names)
			continue
		}
		if name == "" {
			name = strings.ToLower(sf.Name)
		}
		out[name] = v.Field(i)
		*names = append(*names, name)
	}
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func kindName(k reflect.Kind) string {
	switch k {
	case reflect.Bool:
		return "true/false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	}
	return "string"
}

// lineOf finds the line of a field path, or of its nearest recorded parent.
func (d *decoder) lineOf(path string) int {
	for p := path; ; {
		if l, ok := d.lines[p]; ok {
			return l
		}
		i := strings.LastIndexAny(p, ".[")
		if i <= 0 {
			return d.lines[""]
		}
		p = p[:i]
	}
}
